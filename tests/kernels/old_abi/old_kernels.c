/* Kernels built against dlx/dlx.h as it was before signatures (ABI 1.0, copied verbatim
 * into tests/kernels/old_abi/dlx/): such binaries must load and run unchanged. */
#include <stdint.h>

#include "dlx/dlx.h"

/* old_sum(x: f32 tensor) -> float, and the argument count and kinds as it sees them */
DLX_KERNEL(old_sum) {
  DLTensor *x;
  if (dlx_arg_tensor(call, 0, &x)) return -1;
  const float *p = (const float *)((const char *)x->data + x->byte_offset);
  double acc = 0;
  for (int64_t i = 0; i < x->shape[0]; ++i) acc += p[i * x->strides[0]];
  return dlx_return_float(call, acc);
}

DLX_KERNEL(old_scale) {
  DLTensor *x;
  double a;
  if (dlx_arg_tensor(call, 0, &x) || dlx_arg_float(call, 1, &a)) return -1;
  if (dlx_arg_is_readonly(call, 0)) return dlx_error(call, "ValueError", "old_scale: read-only");
  float *p = (float *)((char *)x->data + x->byte_offset);
  for (int64_t i = 0; i < x->shape[0]; ++i) p[i * x->strides[0]] *= (float)a;
  return 0;
}

/* The kind of each argument, through the 1.0 accessors' struct layout. */
DLX_KERNEL(old_kinds) {
  int64_t acc = 0;
  for (int32_t i = 0; i < dlx_num_args(call); ++i) acc = acc * 10 + call->args[i].kind;
  return dlx_return_int(call, acc);
}

DLX_KERNEL(old_new) {
  int64_t n = 3;
  DLTensor *out;
  DLDataType f32 = {kDLFloat, 32, 1};
  return dlx_return_new_tensor(call, dlx_call_device(call), 1, &n, f32, &out);
}
