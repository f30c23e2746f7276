/* saxpy: y[i] = a * x[i] + y[i] for float32 vectors on the CPU.
 * Built with the dlx headers alone: cc -shared -fPIC -I"$(python -m dlx --include-dir)" */
#include <dlx/dlx.h>

static int is_f32_vector(const DLTensor *t) {
  return t->ndim == 1 && t->dtype.code == kDLFloat && t->dtype.bits == 32 && t->dtype.lanes == 1;
}

DLX_KERNEL(saxpy) {
  DLTensor *x, *y;
  double a;
  if (dlx_arg_tensor(call, 0, &x) || dlx_arg_tensor(call, 1, &y) || dlx_arg_float(call, 2, &a))
    return -1;
  if (!is_f32_vector(x) || !is_f32_vector(y))
    return dlx_error(call, "TypeError", "saxpy: x and y must be 1-d float32 tensors");
  if (x->shape[0] != y->shape[0])
    return dlx_error(call, "ValueError", "saxpy: length mismatch %lld vs %lld",
                     (long long)x->shape[0], (long long)y->shape[0]);
  if (x->device.device_type != kDLCPU || y->device.device_type != kDLCPU)
    return dlx_error(call, "ValueError", "saxpy: this example runs on the CPU only");
  if (dlx_arg_is_readonly(call, 1))
    return dlx_error(call, "ValueError", "saxpy: y is read-only");
  const float *xp = (const float *)((const char *)x->data + x->byte_offset);
  float *yp = (float *)((char *)y->data + y->byte_offset);
  for (int64_t i = 0; i < x->shape[0]; ++i)
    yp[i * y->strides[0]] = (float)a * xp[i * x->strides[0]] + yp[i * y->strides[0]];
  return 0;
}
