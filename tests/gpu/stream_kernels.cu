// CUDA kernels for the real-GPU check (tests/gpu/run.sh): built with nvcc and the dlx
// headers alone, launched on the caller's current stream as dlx reports it.
#include <cuda_runtime.h>
#include <dlx/dlx.h>

__global__ void axpy_kernel(const float *x, float *y, float a, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

static const float *cdata(const DLTensor *t) {
  return (const float *)((const char *)t->data + t->byte_offset);
}

// axpy(x, y, a): y += a * x on dlx_call_stream(call); returns the stream it used.
DLX_KERNEL(axpy) {
  DLTensor *x, *y;
  double a;
  if (dlx_arg_tensor(call, 0, &x) || dlx_arg_tensor(call, 1, &y) || dlx_arg_float(call, 2, &a))
    return -1;
  if (x->device.device_type != kDLCUDA || x->ndim != 1 || y->ndim != 1 ||
      x->shape[0] != y->shape[0] || x->strides[0] != 1 || y->strides[0] != 1)
    return dlx_error(call, "ValueError", "axpy: two contiguous 1-d CUDA float32 tensors");
  cudaStream_t s = (cudaStream_t)dlx_call_stream(call);
  int64_t n = x->shape[0];
  axpy_kernel<<<(unsigned)((n + 255) / 256), 256, 0, s>>>(cdata(x), (float *)cdata(y), (float)a, n);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return dlx_error(call, "RuntimeError", "axpy: %s", cudaGetErrorString(e));
  return dlx_return_int(call, (int64_t)(intptr_t)s);
}

DLX_KERNEL(noop) {
  (void)call;
  return 0;
}
