/* Kernels for tests/python/calls/test_hardening_calls.py (issue 25): the call path under bad
 * input. They check nothing by hand: the runtime did, before they run. */
#include <stdint.h>

#include <dlx/dlx.h>

/* A declared mut tensor, written: a read-only one must never get here. */
DLX_KERNEL(fill_mut, "out: f32[n] mut, value: float") {
  DLTensor *t;
  double v;
  if (dlx_arg_tensor(call, 0, &t) || dlx_arg_float(call, 1, &v)) return -1;
  float *p = (float *)((char *)t->data + t->byte_offset);
  for (int64_t i = 0; i < t->shape[0]; ++i) p[i * t->strides[0]] = (float)v;
  return 0;
}

/* Any-layout contiguous tensor: its element count. */
DLX_KERNEL(count_contig, "x: tensor contig -> int") {
  DLTensor *t;
  if (dlx_arg_tensor(call, 0, &t)) return -1;
  int64_t n = 1;
  for (int32_t d = 0; d < t->ndim; ++d) n *= t->shape[d];
  return dlx_return_int(call, n);
}

/* A new float32 tensor of `ndim` dimensions of extent 1 (like `like`'s framework). */
DLX_KERNEL(new_ndim, "ndim: int, like: tensor? = None -> tensor") {
  int64_t ndim;
  if (dlx_arg_int(call, 0, &ndim)) return -1;
  if (ndim < 0 || ndim > 200) return dlx_error(call, "ValueError", "ndim %lld", (long long)ndim);
  int64_t shape[200];
  for (int64_t i = 0; i < ndim; ++i) shape[i] = 1;
  DLTensor *out;
  return dlx_return_new_tensor(call, dlx_call_device(call), (int32_t)ndim, shape,
                               (DLDataType){kDLFloat, 32, 1}, &out);
}

/* A tensor parameter, a float, a list of floats, a str: for error naming. */
DLX_KERNEL(named, "x: f32[n], g: tensor? = None, s: float = 0.0, fs: floats = (), "
                  "t: str = '', n: int = 0, ns: ints = ()") {
  (void)call;
  return 0;
}

/* A kernel whose name is a few hundred characters long (306), failing. */
DLX_KERNEL(k_012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789_end,
           "x: int = 0") {
  return dlx_error(call, "ValueError", "long and failing");
}

/* Unsigned: dlx_arg_is_readonly of each argument, asked twice (the answer must not change). */
DLX_KERNEL(readonly_flags) {
  for (int32_t i = 0; i < call->num_args; ++i) {
    int first = dlx_arg_is_readonly(call, i);
    if (dlx_arg_is_readonly(call, i) != first)
      return dlx_error(call, "AssertionError", "argument %d: answers differ", (int)i);
    if (dlx_return_int(call, first)) return -1;
  }
  return 0;
}

/* The same question from a nogil kernel, for a tensor it does not declare mut. */
DLX_KERNEL(readonly_nogil, "x: tensor -> int; nogil") {
  return dlx_return_int(call, dlx_arg_is_readonly(call, 0));
}

/* A recorded error stays the kernel's when it asks afterwards. */
DLX_KERNEL(readonly_after_error) {
  dlx_error(call, "ValueError", "recorded first");
  (void)dlx_arg_is_readonly(call, 0);
  return -1;
}
