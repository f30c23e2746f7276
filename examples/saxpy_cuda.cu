// saxpy_cuda: y[i] = a * x[i] + y[i] for float32 vectors in CUDA device memory, launched on
// the caller's current stream (dlx_call_stream), so it is ordered with the caller's other
// work on that stream and nothing synchronises.
// Built with the dlx headers alone: nvcc -shared -Xcompiler -fPIC -I"$(python -m dlx --include-dir)"
#include <cuda_runtime.h>
#include <dlx/dlx.h>

__global__ void saxpy_f32(int64_t n, float a, const float *x, int64_t sx, float *y, int64_t sy) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i * sy] = a * x[i * sx] + y[i * sy];
}

static bool is_f32_vector(const DLTensor *t) {
  return t->ndim == 1 && t->dtype.code == kDLFloat && t->dtype.bits == 32 && t->dtype.lanes == 1;
}

DLX_KERNEL(saxpy_cuda) {
  DLTensor *x, *y;
  double a;
  if (dlx_arg_tensor(call, 0, &x) || dlx_arg_tensor(call, 1, &y) || dlx_arg_float(call, 2, &a))
    return -1;
  if (!is_f32_vector(x) || !is_f32_vector(y))
    return dlx_error(call, "TypeError", "saxpy_cuda: x and y must be 1-d float32 tensors");
  if (x->device.device_type != kDLCUDA || y->device.device_type != kDLCUDA ||
      x->device.device_id != y->device.device_id)
    return dlx_error(call, "ValueError", "saxpy_cuda: x and y must be on the same CUDA device");
  if (x->shape[0] != y->shape[0])
    return dlx_error(call, "ValueError", "saxpy_cuda: length mismatch %lld vs %lld",
                     (long long)x->shape[0], (long long)y->shape[0]);
  if (dlx_arg_is_readonly(call, 1)) return dlx_error(call, "ValueError", "saxpy_cuda: y is read-only");
  int64_t n = x->shape[0];
  if (n == 0) return 0;
  // The kernel runs on the tensors' device: make it current for the launch, as torch would.
  int prev = 0;
  cudaError_t e = cudaGetDevice(&prev);
  if (e == cudaSuccess && prev != x->device.device_id) e = cudaSetDevice(x->device.device_id);
  if (e != cudaSuccess) return dlx_error(call, "RuntimeError", "saxpy_cuda: %s", cudaGetErrorString(e));
  cudaStream_t stream = (cudaStream_t)dlx_call_stream(call);
  const float *xp = (const float *)((const char *)x->data + x->byte_offset);
  float *yp = (float *)((char *)y->data + y->byte_offset);
  unsigned blocks = (unsigned)((n + 255) / 256);
  saxpy_f32<<<blocks, 256, 0, stream>>>(n, (float)a, xp, x->strides[0], yp, y->strides[0]);
  e = cudaGetLastError();
  if (prev != x->device.device_id) cudaSetDevice(prev);
  if (e != cudaSuccess) return dlx_error(call, "RuntimeError", "saxpy_cuda: launch failed: %s",
                                         cudaGetErrorString(e));
  return 0;
}
