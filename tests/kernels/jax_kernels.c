/* Kernels for tests/python/compilers/test_jax_jit.py and the jax.jit benchmark rows: result counts
 * that break their declaration (an error under jax.jit, not garbage), and the no-op of the
 * benchmark. */
#include <dlx/dlx.h>

/* Declares two results, makes one. */
DLX_KERNEL(short_results, "x: f32[n] -> (f32[n], f32[n])") {
  DLTensor *x, *a;
  return dlx_arg_tensor(call, 0, &x) ||
         dlx_return_new_tensor(call, x->device, 1, x->shape, x->dtype, &a);
}

/* Declares one result, makes two. */
DLX_KERNEL(extra_results, "x: f32[n] -> f32[n]") {
  DLTensor *x, *a;
  return dlx_arg_tensor(call, 0, &x) ||
         dlx_return_new_tensor(call, x->device, 1, x->shape, x->dtype, &a) ||
         dlx_return_new_tensor(call, x->device, 1, x->shape, x->dtype, &a);
}

/* Makes its result with another shape than the declared one. */
DLX_KERNEL(wrong_shape, "x: f32[n] -> f32[n]") {
  DLTensor *x, *a;
  int64_t more = 1;
  return dlx_arg_tensor(call, 0, &x) ||
         dlx_return_new_tensor(call, x->device, 1, &more, x->dtype, &a);
}

/* The benchmark's no-op on three arrays: two inputs and its result, which it leaves as XLA
 * gave it (each row of the benchmark does the same). */
DLX_KERNEL(noop3, "x: f32[n], y: f32[n] -> f32[n]") {
  DLTensor *x, *y, *out;
  return dlx_arg_tensor(call, 0, &x) || dlx_arg_tensor(call, 1, &y) ||
         dlx_return_new_tensor(call, x->device, 1, x->shape, x->dtype, &out);
}
