/* Kernels for the compilers' tests (tests/python/compilers/programs: test_infer.py,
 * test_torch_compile.py): one per shape of declaration torch.compile / torch.export /
 * jax.jit must carry. Elementwise over any strides (dlx always passes strides). */
#include <stdint.h>
#include <string.h>

#include <dlx/dlx.h>

#define AT(t, T, i) (((T *)((char *)(t)->data + (t)->byte_offset))[(i) * (t)->strides[0]])

static int64_t numel(const DLTensor *t) {
  int64_t n = 1;
  for (int32_t d = 0; d < t->ndim; ++d) n *= t->shape[d];
  return n;
}

/* The element at flat index i (row-major) of a strided tensor of any rank. */
static int64_t offset(const DLTensor *t, int64_t i) {
  int64_t off = 0;
  for (int32_t d = t->ndim - 1; d >= 0; --d) {
    off += (i % t->shape[d]) * t->strides[d];
    i /= t->shape[d];
  }
  return off;
}

static double get(const DLTensor *t, int64_t i) {
  char *p = (char *)t->data + t->byte_offset;
  return t->dtype.bits == 64 ? ((double *)p)[offset(t, i)] : ((float *)p)[offset(t, i)];
}

static void put(DLTensor *t, int64_t i, double v) { /* results are new: contiguous */
  char *p = (char *)t->data + t->byte_offset;
  if (t->dtype.bits == 64) ((double *)p)[i] = v;
  else ((float *)p)[i] = (float)v;
}

/* Only mutates: x *= a. */
DLX_KERNEL(scale, "x: f32[n] mut, a: float = 2.0") {
  DLTensor *x;
  double a;
  if (dlx_arg_tensor(call, 0, &x) || dlx_arg_float(call, 1, &a)) return -1;
  for (int64_t i = 0; i < x->shape[0]; ++i) AT(x, float, i) *= (float)a;
  return 0;
}

/* Allocates a result shaped by two size symbols. */
DLX_KERNEL(outer, "x: f32[m], y: f32[n] -> f32[m, n]") {
  DLTensor *x, *y, *out;
  int64_t m, n;
  if (dlx_arg_tensor(call, 0, &x) || dlx_arg_tensor(call, 1, &y) || dlx_size(call, "m", &m) ||
      dlx_size(call, "n", &n))
    return -1;
  int64_t shape[2] = {m, n};
  if (dlx_return_new_tensor(call, x->device, 2, shape, x->dtype, &out)) return -1;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) ((float *)out->data)[i * n + j] = AT(x, float, i) * AT(y, float, j);
  return 0;
}

/* Several results: each row's minimum and maximum, and the row count as a 0-d tensor. */
DLX_KERNEL(minmax, "x: f32[m, n] -> (f32[m], f32[m], i64[])") {
  DLTensor *x, *lo, *hi, *count;
  int64_t m, n;
  if (dlx_arg_tensor(call, 0, &x) || dlx_size(call, "m", &m) || dlx_size(call, "n", &n)) return -1;
  if (dlx_return_new_tensor(call, x->device, 1, &m, x->dtype, &lo) ||
      dlx_return_new_tensor(call, x->device, 1, &m, x->dtype, &hi) ||
      dlx_return_new_tensor(call, x->device, 0, NULL, (DLDataType){kDLInt, 64, 1}, &count))
    return -1;
  for (int64_t i = 0; i < m; ++i) {
    double a = get(x, i * n), b = a;
    for (int64_t j = 1; j < n; ++j) {
      double v = get(x, i * n + j);
      a = v < a ? v : a;
      b = v > b ? v : b;
    }
    put(lo, i, a);
    put(hi, i, b);
  }
  *(int64_t *)count->data = m;
  return 0;
}

/* Every scalar kind with a default, and an optional tensor:
 * out = x * f * i (+ o) (+ sum(li) + sum(lf)), negated when b, doubled when s == "twice". */
DLX_KERNEL(kinds, "x: f32[n], i: int = 1, f: float = 0.5, b: bool = False, s: str = 'once', "
                  "li: ints = (1, 2), lf: floats = (0.25,), o: f32[n]? = None -> f32[n]") {
  DLTensor *x, *o = NULL, *out;
  int64_t i, b, n;
  double f, extra = 0;
  const char *s;
  const int64_t *li;
  const double *lf;
  int32_t nli, nlf;
  if (dlx_arg_tensor(call, 0, &x) || dlx_arg_int(call, 1, &i) || dlx_arg_float(call, 2, &f) ||
      dlx_arg_int(call, 3, &b) || dlx_arg_str(call, 4, &s, NULL) ||
      dlx_arg_ints(call, 5, &li, &nli) || dlx_arg_floats(call, 6, &lf, &nlf) ||
      (!dlx_arg_is_none(call, 7) && dlx_arg_tensor(call, 7, &o)) || dlx_size(call, "n", &n))
    return -1;
  for (int32_t k = 0; k < nli; ++k) extra += (double)li[k];
  for (int32_t k = 0; k < nlf; ++k) extra += lf[k];
  double mul = (b ? -1.0 : 1.0) * (strcmp(s, "twice") == 0 ? 2.0 : 1.0);
  if (strcmp(s, "once") && strcmp(s, "twice"))
    return dlx_error(call, "ValueError", "kinds(): s must be 'once' or 'twice', got '%s'", s);
  if (dlx_return_new_tensor(call, x->device, 1, &n, x->dtype, &out)) return -1;
  for (int64_t k = 0; k < n; ++k)
    ((float *)out->data)[k] =
        (float)(mul * (AT(x, float, k) * f * (double)i + (o ? AT(o, float, k) : 0.0) + extra));
  return 0;
}

/* A size only the data decides: the positive entries of x. */
DLX_KERNEL(positives, "x: f32[n] -> f32[k]") {
  DLTensor *x, *out;
  int64_t n, k = 0;
  if (dlx_arg_tensor(call, 0, &x) || dlx_size(call, "n", &n)) return -1;
  for (int64_t i = 0; i < n; ++i) k += AT(x, float, i) > 0;
  if (dlx_return_new_tensor(call, x->device, 1, &k, x->dtype, &out)) return -1;
  for (int64_t i = 0, j = 0; i < n; ++i)
    if (AT(x, float, i) > 0) ((float *)out->data)[j++] = AT(x, float, i);
  return 0;
}

/* The benchmark's three tensors: out = x + y. */
DLX_KERNEL(add3, "x: f32[n], y: f32[n], out: f32[n] mut") {
  DLTensor *x, *y, *out;
  if (dlx_arg_tensor(call, 0, &x) || dlx_arg_tensor(call, 1, &y) || dlx_arg_tensor(call, 2, &out))
    return -1;
  for (int64_t i = 0; i < x->shape[0]; ++i) AT(out, float, i) = AT(x, float, i) + AT(y, float, i);
  return 0;
}

/* Autograd's pair: square's backward is another kernel, square_grad(x, g) = 2 x g. Any
 * rank ("..."), f32 or f64 (the result's dtype is x's). */
DLX_KERNEL(square, "x: f32|f64[...] -> f32|f64[...]") {
  DLTensor *x, *out;
  if (dlx_arg_tensor(call, 0, &x) ||
      dlx_return_new_tensor(call, x->device, x->ndim, x->shape, x->dtype, &out))
    return -1;
  for (int64_t i = 0, n = numel(x); i < n; ++i) put(out, i, get(x, i) * get(x, i));
  return 0;
}

DLX_KERNEL(square_grad, "x: f32|f64[...], g: f32|f64[...] -> f32|f64[...]") {
  DLTensor *x, *g, *out;
  if (dlx_arg_tensor(call, 0, &x) || dlx_arg_tensor(call, 1, &g)) return -1;
  if (x->ndim != g->ndim || numel(x) != numel(g) || x->dtype.bits != g->dtype.bits)
    return dlx_error(call, "ValueError", "square_grad(): x and g differ in shape or dtype");
  if (dlx_return_new_tensor(call, x->device, x->ndim, x->shape, x->dtype, &out)) return -1;
  for (int64_t i = 0, n = numel(x); i < n; ++i) put(out, i, 2.0 * get(x, i) * get(g, i));
  return 0;
}

/* A data-dependent result size shared by two results, for _infer: one symbol, one size. */
DLX_KERNEL(topk_like, "x: f32|f64[..., n] -> (f32|f64[..., j], i64[j])") {
  return dlx_error(call, "NotImplementedError", "topk_like(): only its declaration is tested");
}

/* Declarations torch cannot express, and one without a declaration. */
DLX_KERNEL(count, "x: f32[n] -> int") {
  DLTensor *x;
  return dlx_arg_tensor(call, 0, &x) || dlx_return_int(call, x->shape[0]);
}

DLX_KERNEL(maybe_out, "x: f32[n], out: f32[n] mut? = None -> f32[n]") {
  return dlx_error(call, "NotImplementedError", "maybe_out(): only its declaration is tested");
}

DLX_KERNEL(raw) { return dlx_num_args(call) ? 0 : 0; }

/* Writes the stream it was given into `out` (the stand-in NPU's test: through
 * torch.ops.<ns>.stream_into the stream must still be the device's current one). */
DLX_KERNEL(stream_into, "x: tensor, out: i64[1] mut") {
  DLTensor *out;
  if (dlx_arg_tensor(call, 1, &out)) return -1;
  *(int64_t *)((char *)out->data + out->byte_offset) = (int64_t)(intptr_t)dlx_call_stream(call);
  return 0;
}
