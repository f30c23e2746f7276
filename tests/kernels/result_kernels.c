/* Kernels for tests/python/compilers/operators/test_results_checked.py (issue 30): results that
 * break their declaration, which every path (the direct call, the operator, torch.compile,
 * jax.jit) must refuse with dlx's error before anyone reads them; results that keep it
 * (data-dependent sizes, "...", open dtypes); and dlx_error kinds that must reach Python as
 * declared. */
#include <stdint.h>
#include <string.h>

#include <dlx/dlx.h>

static const DLDataType F32 = {kDLFloat, 32, 1}, F64 = {kDLFloat, 64, 1}, I64 = {kDLInt, 64, 1};

static float in(const DLTensor *x, int64_t i) {
  return ((const float *)((const char *)x->data + x->byte_offset))[i * x->strides[0]];
}

/* Declared f32[n]: makes n + 1 elements (x + 1, then 7). */
DLX_KERNEL(too_long, "x: f32[n] -> f32[n]") {
  DLTensor *x, *out;
  if (dlx_arg_tensor(call, 0, &x)) return -1;
  int64_t n = x->shape[0] + 1;
  if (dlx_return_new_tensor(call, x->device, 1, &n, F32, &out)) return -1;
  for (int64_t i = 0; i + 1 < n; ++i) ((float *)out->data)[i] = in(x, i) + 1;
  ((float *)out->data)[n - 1] = 7;
  return 0;
}

/* Declared f32[n]: makes f64[n] (x + 1). Read as float32, the values would be garbage. */
DLX_KERNEL(wrong_dtype, "x: f32[n] -> f32[n]") {
  DLTensor *x, *out;
  if (dlx_arg_tensor(call, 0, &x) ||
      dlx_return_new_tensor(call, x->device, 1, x->shape, F64, &out))
    return -1;
  for (int64_t i = 0; i < x->shape[0]; ++i) ((double *)out->data)[i] = in(x, i) + 1;
  return 0;
}

/* Declared as x's dtype (f32|f64 both sides): makes the other one. */
DLX_KERNEL(other_dtype, "x: f32|f64[n] -> f32|f64[n]") {
  DLTensor *x, *out;
  if (dlx_arg_tensor(call, 0, &x)) return -1;
  DLDataType dt = x->dtype.bits == 32 ? F64 : F32;
  return dlx_return_new_tensor(call, x->device, 1, x->shape, dt, &out);
}

/* Declared f32[n]: makes f32[n, 1]. */
DLX_KERNEL(wrong_rank, "x: f32[n] -> f32[n]") {
  DLTensor *x, *out;
  if (dlx_arg_tensor(call, 0, &x)) return -1;
  int64_t shape[2] = {x->shape[0], 1};
  return dlx_return_new_tensor(call, x->device, 2, shape, F32, &out);
}

/* "...": the batch of x, whose last dimension it drops (a row sum). `bad` adds a row. */
DLX_KERNEL(row_sums, "x: f32[..., n] contig, bad: bool = False -> f32[...]") {
  DLTensor *x, *out;
  int64_t bad;
  if (dlx_arg_tensor(call, 0, &x) || dlx_arg_int(call, 1, &bad)) return -1;
  if (x->ndim > 32) return dlx_error(call, "ValueError", "too many dimensions");
  int64_t shape[32] = {0}, rows = 1, n = x->shape[x->ndim - 1];
  for (int32_t d = 0; d + 1 < x->ndim; ++d) rows *= shape[d] = x->shape[d];
  if (bad && x->ndim > 1) ++shape[0];
  if (dlx_return_new_tensor(call, x->device, x->ndim - 1, shape, F32, &out)) return -1;
  const float *p = (const float *)((const char *)x->data + x->byte_offset);
  for (int64_t r = 0; r < rows; ++r) {
    float s = 0;
    for (int64_t j = 0; j < n; ++j) s += p[r * n + j];
    ((float *)out->data)[r] = s;
  }
  return 0;
}

/* A data-dependent size: the positive elements and their indices, k of each. `skew` makes
 * the second result one longer than the first (k differs between the results). */
DLX_KERNEL(positives_at, "x: f32[n], skew: bool = False -> (f32[k], i64[k])") {
  DLTensor *x, *v, *at;
  int64_t skew, k = 0;
  if (dlx_arg_tensor(call, 0, &x) || dlx_arg_int(call, 1, &skew)) return -1;
  for (int64_t i = 0; i < x->shape[0]; ++i) k += in(x, i) > 0;
  int64_t k2 = k + (skew != 0);
  if (dlx_return_new_tensor(call, x->device, 1, &k, F32, &v) ||
      dlx_return_new_tensor(call, x->device, 1, &k2, I64, &at))
    return -1;
  int64_t j = 0;
  for (int64_t i = 0; i < x->shape[0]; ++i)
    if (in(x, i) > 0) {
      ((float *)v->data)[j] = in(x, i);
      ((int64_t *)at->data)[j++] = i;
    }
  if (skew) ((int64_t *)at->data)[j] = -1;
  return 0;
}

/* Declared a tensor, returns an int; declared an int, makes a tensor. */
DLX_KERNEL(int_for_tensor, "x: f32[n] -> f32[n]") { return dlx_return_int(call, 3); }

DLX_KERNEL(tensor_for_int, "x: f32[n] -> int") {
  DLTensor *x, *out;
  if (dlx_arg_tensor(call, 0, &x)) return -1;
  return dlx_return_new_tensor(call, x->device, 1, x->shape, F32, &out);
}

/* x + 1, or dlx_error(kind, message) when kind is not empty: the kinds an operator must
 * raise as declared. */
DLX_KERNEL(fail_with, "x: f32[n], kind: str = '', message: str = 'boom' -> f32[n]") {
  DLTensor *x, *out;
  const char *kind, *msg;
  if (dlx_arg_tensor(call, 0, &x) || dlx_arg_str(call, 1, &kind, NULL) ||
      dlx_arg_str(call, 2, &msg, NULL))
    return -1;
  if (kind[0]) return dlx_error(call, kind, "%s", msg);
  if (dlx_return_new_tensor(call, x->device, 1, x->shape, F32, &out)) return -1;
  for (int64_t i = 0; i < x->shape[0]; ++i) ((float *)out->data)[i] = in(x, i) + 1;
  return 0;
}

/* Makes its result on the CPU whatever the call's device (writes nothing: the stand-in
 * framework's device tensors have no memory to read). `declared` says cpu. */
DLX_KERNEL(on_cpu, "x: f32[n] -> f32[n]") {
  DLTensor *x, *out;
  return dlx_arg_tensor(call, 0, &x) ||
         dlx_return_new_tensor(call, (DLDevice){kDLCPU, 0}, 1, x->shape, F32, &out);
}

DLX_KERNEL(on_cpu_declared, "x: f32[n] -> f32[n] cpu") {
  DLTensor *x, *out;
  return dlx_arg_tensor(call, 0, &x) ||
         dlx_return_new_tensor(call, (DLDevice){kDLCPU, 0}, 1, x->shape, F32, &out);
}
