/* Kernels for tests/python/compilers/programs/test_jax_jit.py and the jax.jit benchmark rows:
 * result counts that break their declaration (an error under jax.jit, not garbage), and the no-op
 * of the benchmark. */
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

/* Sharding probes (tests/python/compilers/programs/test_jax_sharding.py, issue 32): each returns,
 * beside its values, the number of elements its own call saw, so a sharded program shows
 * what every device's call received. */

/* y = x * w (rows independent, n not), seen[i] = the elements of x in this call. */
DLX_KERNEL(shard_rows, "x: f32[b*, n] contig, w: f32[n] contig -> (f32[b, n], i64[b])") {
  DLTensor *x, *w, *y, *seen;
  int64_t b, n;
  if (dlx_arg_tensor(call, 0, &x) || dlx_arg_tensor(call, 1, &w) || dlx_size(call, "b", &b) ||
      dlx_size(call, "n", &n) ||
      dlx_return_new_tensor(call, x->device, 2, x->shape, x->dtype, &y) ||
      dlx_return_new_tensor(call, x->device, 1, &b, (DLDataType){kDLInt, 64, 1}, &seen))
    return -1;
  const float *xs = x->data, *ws = w->data;
  float *ys = y->data;
  for (int64_t i = 0; i < b; ++i) {
    ((int64_t *)seen->data)[i] = b * n;
    for (int64_t j = 0; j < n; ++j) ys[i * n + j] = xs[i * n + j] * ws[j];
  }
  return 0;
}

/* y[..., j] = x[..., j] + the sum of x's row (the batch independent, n not), seen[...] =
 * the elements of x in this call. */
DLX_KERNEL(shard_batch, "x: f32[..., n] contig -> (f32[..., n], i64[...])") {
  DLTensor *x, *y, *seen;
  int64_t n, rows = 1;
  if (dlx_arg_tensor(call, 0, &x) || dlx_size(call, "n", &n) ||
      dlx_return_new_tensor(call, x->device, x->ndim, x->shape, x->dtype, &y) ||
      dlx_return_new_tensor(call, x->device, x->ndim - 1, x->shape, (DLDataType){kDLInt, 64, 1},
                            &seen))
    return -1;
  for (int32_t d = 0; d < x->ndim - 1; ++d) rows *= x->shape[d];
  const float *xs = x->data;
  float *ys = y->data;
  for (int64_t i = 0; i < rows; ++i) {
    float s = 0;
    for (int64_t j = 0; j < n; ++j) s += xs[i * n + j];
    for (int64_t j = 0; j < n; ++j) ys[i * n + j] = xs[i * n + j] + s;
    ((int64_t *)seen->data)[i] = rows * n;
  }
  return 0;
}

/* z = x + y over the batch: y's rows broadcast when it has one (y: f32[n] or f32[1, n]),
 * else y's batch must have as many rows as x's; seen[...] = x's elements in this call * 1000
 * + y's (two "..." parameters whose batches may differ: docs/jax.md, "Many devices"). */
DLX_KERNEL(shard_add, "x: f32[..., n] contig, y: f32[..., n] contig -> (f32[..., n], i64[...])") {
  DLTensor *x, *y, *z, *seen;
  int64_t n, rows = 1, yrows = 1;
  if (dlx_arg_tensor(call, 0, &x) || dlx_arg_tensor(call, 1, &y) || dlx_size(call, "n", &n) ||
      dlx_return_new_tensor(call, x->device, x->ndim, x->shape, x->dtype, &z) ||
      dlx_return_new_tensor(call, x->device, x->ndim - 1, x->shape, (DLDataType){kDLInt, 64, 1},
                            &seen))
    return -1;
  for (int32_t d = 0; d < x->ndim - 1; ++d) rows *= x->shape[d];
  for (int32_t d = 0; d < y->ndim - 1; ++d) yrows *= y->shape[d];
  if (yrows != 1 && yrows != rows)
    return dlx_error(call, "ValueError", "y has %lld rows, x %lld", (long long)yrows,
                     (long long)rows);
  const float *xs = x->data, *ys = y->data;
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < n; ++j)
      ((float *)z->data)[i * n + j] = xs[i * n + j] + ys[(yrows == 1 ? 0 : i) * n + j];
    ((int64_t *)seen->data)[i] = rows * n * 1000 + yrows * n;
  }
  return 0;
}

/* The batch after a leading dimension: z[i, r] = x[i, r] + y[i, r % (y's batch)]; y's batch
 * may be smaller than x's (it is tiled): the result's batch is x's. */
DLX_KERNEL(shard_lead, "x: f32[n, ...] contig, y: f32[n, ...] contig -> f32[n, ...]") {
  DLTensor *x, *y, *z;
  int64_t n, xb = 1, yb = 1;
  if (dlx_arg_tensor(call, 0, &x) || dlx_arg_tensor(call, 1, &y) || dlx_size(call, "n", &n) ||
      dlx_return_new_tensor(call, x->device, x->ndim, x->shape, x->dtype, &z))
    return -1;
  for (int32_t d = 1; d < x->ndim; ++d) xb *= x->shape[d];
  for (int32_t d = 1; d < y->ndim; ++d) yb *= y->shape[d];
  for (int64_t i = 0; i < n; ++i)
    for (int64_t r = 0; r < xb; ++r)
      ((float *)z->data)[i * xb + r] =
          ((const float *)x->data)[i * xb + r] + ((const float *)y->data)[i * yb + r % yb];
  return 0;
}

/* acc += y, in place, elementwise. */
DLX_KERNEL(shard_accumulate, "acc: f32[k*] mut contig, y: f32[k] contig") {
  DLTensor *acc, *y;
  if (dlx_arg_tensor(call, 0, &acc) || dlx_arg_tensor(call, 1, &y)) return -1;
  for (int64_t i = 0; i < acc->shape[0]; ++i)
    ((float *)acc->data)[i] += ((const float *)y->data)[i];
  return 0;
}

/* Makes its result as long as the whole array (8), not as its own slice: right unsharded,
 * an error (never a silent wrong gather) once the call sees a slice. */
DLX_KERNEL(shard_whole_result, "x: f32[b*] -> f32[b]") {
  DLTensor *x, *y;
  int64_t eight = 8;
  if (dlx_arg_tensor(call, 0, &x) ||
      dlx_return_new_tensor(call, x->device, 1, &eight, x->dtype, &y))
    return -1;
  for (int64_t i = 0; i < 8; ++i) ((float *)y->data)[i] = 0;
  return 0;
}
