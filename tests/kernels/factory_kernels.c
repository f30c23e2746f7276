/* Kernels without tensor arguments for the torch operators' tests
 * (tests/python/compilers/operators/test_torch_operators.py): factory functions, which torch's
 * dispatcher cannot route by a tensor's device. Results go on the call's device (the CPU
 * for a call without tensors, as torch's own factory functions default to it). */
#include <stdint.h>

#include <dlx/dlx.h>

/* ones3(n): [n, n, n]. */
DLX_KERNEL(ones3, "n: int -> f32[3]") {
  int64_t n;
  DLTensor *out;
  if (dlx_arg_int(call, 0, &n)) return -1;
  int64_t shape[1] = {3};
  if (dlx_return_new_tensor(call, dlx_call_device(call), 1, shape,
                            (DLDataType){kDLFloat, 32, 1}, &out))
    return -1;
  for (int i = 0; i < 3; ++i) ((float *)out->data)[i] = (float)n;
  return 0;
}

/* pair(a, b=2.5): ([a, a], [b]) in two dtypes. */
DLX_KERNEL(pair, "a: int, b: float = 2.5 -> (i64[2], f64[1])") {
  int64_t a;
  double b;
  DLTensor *x, *y;
  if (dlx_arg_int(call, 0, &a) || dlx_arg_float(call, 1, &b)) return -1;
  int64_t two[1] = {2}, one[1] = {1};
  DLDevice dev = dlx_call_device(call);
  if (dlx_return_new_tensor(call, dev, 1, two, (DLDataType){kDLInt, 64, 1}, &x) ||
      dlx_return_new_tensor(call, dev, 1, one, (DLDataType){kDLFloat, 64, 1}, &y))
    return -1;
  ((int64_t *)x->data)[0] = ((int64_t *)x->data)[1] = a;
  ((double *)y->data)[0] = b;
  return 0;
}

/* filled(x=None): [7, 7] with no tensor; x + 1 (elementwise, f32) with one. */
DLX_KERNEL(filled, "x: f32[2]? = None -> f32[2]") {
  DLTensor *x = NULL, *out;
  if (!dlx_arg_is_none(call, 0) && dlx_arg_tensor(call, 0, &x)) return -1;
  int64_t two[1] = {2};
  if (dlx_return_new_tensor(call, dlx_call_device(call), 1, two,
                            (DLDataType){kDLFloat, 32, 1}, &out))
    return -1;
  for (int i = 0; i < 2; ++i) {
    float v = 7.0f;
    if (x) v = ((float *)((char *)x->data + x->byte_offset))[i * x->strides[0]] + 1.0f;
    ((float *)out->data)[i] = v;
  }
  return 0;
}
