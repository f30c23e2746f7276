// A declared CUDA kernel for check_jax.py: under jax.jit it must run on XLA's stream. It
// spins on the GPU before writing its result, so that a launch on any other stream would
// let XLA's next operation read the result before it is written.
#include <cuda_runtime.h>
#include <dlx/dlx.h>

__global__ void slow_twice_kernel(const float *x, float *y, int64_t n, long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) {
  }
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)blockDim.x * gridDim.x)
    y[i] = 2.0f * x[i];
}

DLX_KERNEL(slow_twice, "x: f32[n] cuda contig, cycles: int = 100000000 -> f32[n]") {
  DLTensor *x, *y;
  int64_t n, cycles;
  if (dlx_arg_tensor(call, 0, &x) || dlx_arg_int(call, 1, &cycles) || dlx_size(call, "n", &n))
    return -1;
  cudaStream_t stream = (cudaStream_t)dlx_call_stream(call);
  if (!stream)  // XLA always has a stream of its own: NULL would be the legacy default
    return dlx_error(call, "RuntimeError", "slow_twice(): no stream from the caller");
  if (dlx_return_new_tensor(call, x->device, 1, &n, x->dtype, &y)) return -1;
  slow_twice_kernel<<<64, 256, 0, stream>>>((const float *)x->data, (float *)y->data, n, cycles);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    return dlx_error(call, "RuntimeError", "slow_twice(): %s", cudaGetErrorString(err));
  return 0;
}
