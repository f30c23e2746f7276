/* Kernels the Python tests call: each exercises one part of the dlx.h contract. */
#include <stdint.h>
#include <string.h>

#include <dlx/dlx.h>

DLX_KERNEL(noop) {
  (void)call;
  return 0;
}

DLX_KERNEL(num_args) { return dlx_return_int(call, dlx_num_args(call)); }

DLX_KERNEL(kind_of) {
  if (dlx_num_args(call) != 1) return dlx_error(call, "TypeError", "kind_of takes 1 argument");
  return dlx_return_int(call, call->args[0].kind);
}

DLX_KERNEL(echo_int) {
  int64_t v;
  return dlx_arg_int(call, 0, &v) ? -1 : dlx_return_int(call, v);
}

DLX_KERNEL(echo_float) {
  double v;
  return dlx_arg_float(call, 0, &v) ? -1 : dlx_return_float(call, v);
}

DLX_KERNEL(want_tensor) {
  DLTensor *t;
  return dlx_arg_tensor(call, 0, &t);
}

DLX_KERNEL(arg_out_of_range) {
  int64_t v;
  return dlx_arg_int(call, dlx_num_args(call), &v);
}

DLX_KERNEL(is_readonly) { return dlx_return_int(call, dlx_arg_is_readonly(call, 0)); }

/* What info() and info_of() report of t: 0 ndim, 1 dtype code, 2 dtype bits, 3 byte_offset,
 * 4 device type, 5 device id, 10+d shape[d], 20+d strides[d], 30 data pointer. */
static int query(dlx_call *call, const char *name, const DLTensor *t, int64_t what) {
  int64_t v;
  if (what == 0) v = t->ndim;
  else if (what == 1) v = t->dtype.code;
  else if (what == 2) v = t->dtype.bits;
  else if (what == 3) v = (int64_t)t->byte_offset;
  else if (what == 4) v = t->device.device_type;
  else if (what == 5) v = t->device.device_id;
  else if (what >= 10 && what < 10 + t->ndim) v = t->shape[what - 10];
  else if (what >= 20 && what < 20 + t->ndim) v = t->strides[what - 20];
  else if (what == 30) v = (int64_t)(intptr_t)t->data;
  else return dlx_error(call, "ValueError", "%s: unknown query %lld", name, (long long)what);
  return dlx_return_int(call, v);
}

/* info(t, what): query(t, what) */
DLX_KERNEL(info) {
  DLTensor *t;
  int64_t what;
  if (dlx_arg_tensor(call, 0, &t) || dlx_arg_int(call, 1, &what)) return -1;
  return query(call, "info", t, what);
}

/* info_of(which, what, t0, t1, ...): info(t_which, what), the tensors taken as one call
 * takes them (tests of where a tensor stands in a call). */
DLX_KERNEL(info_of) {
  int64_t which, what;
  if (dlx_arg_int(call, 0, &which) || dlx_arg_int(call, 1, &what)) return -1;
  if (which < 0 || which + 2 >= dlx_num_args(call))
    return dlx_error(call, "IndexError", "info_of: no tensor %lld", (long long)which);
  DLTensor *t;
  if (dlx_arg_tensor(call, (int32_t)which + 2, &t)) return -1;
  return query(call, "info_of", t, what);
}

/* Visit every element of a strided tensor in row-major order. */
typedef void (*visit_fn)(char *elem, void *ctx);
static void each(DLTensor *t, visit_fn fn, void *ctx) {
  int64_t n = 1, idx[64] = {0};
  for (int32_t d = 0; d < t->ndim; ++d) n *= t->shape[d];
  int64_t size = (t->dtype.bits * t->dtype.lanes + 7) / 8;
  for (int64_t k = 0; k < n; ++k) {
    int64_t off = 0;
    for (int32_t d = 0; d < t->ndim; ++d) off += idx[d] * t->strides[d];
    fn((char *)t->data + t->byte_offset + off * size, ctx);
    for (int32_t d = t->ndim - 1; d >= 0; --d) {
      if (++idx[d] < t->shape[d]) break;
      idx[d] = 0;
    }
  }
}

typedef struct { DLDataType dt; double acc; double value; } num_ctx;

static double load(const char *p, DLDataType dt) {
  if (dt.code == kDLFloat && dt.bits == 32) { float v; memcpy(&v, p, 4); return v; }
  if (dt.code == kDLFloat && dt.bits == 64) { double v; memcpy(&v, p, 8); return v; }
  if (dt.code == kDLInt && dt.bits == 32) { int32_t v; memcpy(&v, p, 4); return v; }
  if (dt.code == kDLInt && dt.bits == 64) { int64_t v; memcpy(&v, p, 8); return (double)v; }
  if ((dt.code == kDLUInt || dt.code == kDLBool) && dt.bits == 8) return (unsigned char)*p;
  return 0;
}

static void store(char *p, DLDataType dt, double x) {
  if (dt.code == kDLFloat && dt.bits == 32) { float v = (float)x; memcpy(p, &v, 4); }
  else if (dt.code == kDLFloat && dt.bits == 64) memcpy(p, &x, 8);
  else if (dt.code == kDLInt && dt.bits == 32) { int32_t v = (int32_t)x; memcpy(p, &v, 4); }
  else if (dt.code == kDLInt && dt.bits == 64) { int64_t v = (int64_t)x; memcpy(p, &v, 8); }
  else if ((dt.code == kDLUInt || dt.code == kDLBool) && dt.bits == 8) *p = (char)(unsigned char)x;
}

static int supported(const DLTensor *t) {
  DLDataType d = t->dtype;
  return d.lanes == 1 && ((d.code == kDLFloat && (d.bits == 32 || d.bits == 64)) ||
                          (d.code == kDLInt && (d.bits == 32 || d.bits == 64)) ||
                          ((d.code == kDLUInt || d.code == kDLBool) && d.bits == 8));
}

static void add_to(char *p, void *c) { num_ctx *n = c; n->acc += load(p, n->dt); }
static void set_to(char *p, void *c) { num_ctx *n = c; store(p, n->dt, n->value); }
static void iota(char *p, void *c) { num_ctx *n = c; store(p, n->dt, n->acc++); }

/* sum(t) -> float: sums a strided tensor of float32/64, int32/64, uint8 or bool. */
DLX_KERNEL(sum) {
  DLTensor *t;
  if (dlx_arg_tensor(call, 0, &t)) return -1;
  if (!supported(t)) return dlx_error(call, "TypeError", "sum: unsupported dtype");
  num_ctx c = {t->dtype, 0, 0};
  each(t, add_to, &c);
  return dlx_return_float(call, c.acc);
}

/* fill(t, value): writes value into every element; refuses read-only tensors. */
DLX_KERNEL(fill) {
  DLTensor *t;
  double v;
  if (dlx_arg_tensor(call, 0, &t) || dlx_arg_float(call, 1, &v)) return -1;
  if (dlx_arg_is_readonly(call, 0)) return dlx_error(call, "ValueError", "fill: read-only tensor");
  if (!supported(t)) return dlx_error(call, "TypeError", "fill: unsupported dtype");
  num_ctx c = {t->dtype, 0, v};
  each(t, set_to, &c);
  return 0;
}

/* fill_at(which, value, t0, t1, ...): fill(t_which, value), the others only converted. */
DLX_KERNEL(fill_at) {
  int64_t which;
  double v;
  if (dlx_arg_int(call, 0, &which) || dlx_arg_float(call, 1, &v)) return -1;
  if (which < 0 || which + 2 >= dlx_num_args(call))
    return dlx_error(call, "IndexError", "fill_at: no tensor %lld", (long long)which);
  DLTensor *t;
  if (dlx_arg_tensor(call, (int32_t)which + 2, &t)) return -1;
  if (!supported(t)) return dlx_error(call, "TypeError", "fill_at: unsupported dtype");
  num_ctx c = {t->dtype, 0, v};
  each(t, set_to, &c);
  return 0;
}

/* arange(n, [like]) -> a new float32 tensor 0..n-1 on the call's device (host-backed
 * devices only: the fixture framework's), through the first tensor argument's table. */
DLX_KERNEL(arange) {
  int64_t n;
  if (dlx_arg_int(call, 0, &n)) return -1;
  DLTensor *out;
  DLDataType f32 = {kDLFloat, 32, 1};
  if (dlx_return_new_tensor(call, dlx_call_device(call), 1, &n, f32, &out)) return -1;
  num_ctx c = {f32, 0, 0};
  each(out, iota, &c);
  return 0;
}

/* new_tensor(code, bits, d0, d1, ..., [like]) -> an uninitialised tensor of that
 * dtype/shape, allocated by the framework of `like` if given. */
DLX_KERNEL(new_tensor) {
  int64_t code, bits, shape[8];
  int32_t nd = 0;
  while (2 + nd < dlx_num_args(call) && call->args[2 + nd].kind == DLX_ARG_INT) ++nd;
  if (dlx_num_args(call) < 2 || nd > 8)
    return dlx_error(call, "TypeError", "new_tensor(code, bits, *shape, [like])");
  if (dlx_arg_int(call, 0, &code) || dlx_arg_int(call, 1, &bits)) return -1;
  for (int32_t i = 0; i < nd; ++i)
    if (dlx_arg_int(call, 2 + i, &shape[i])) return -1;
  DLTensor *out;
  DLDataType dt = {(uint8_t)code, (uint8_t)bits, 1};
  return dlx_return_new_tensor(call, dlx_call_device(call), nd, shape, dt, &out);
}

DLX_KERNEL(fail_value) { return dlx_error(call, "ValueError", "bad value %d", 42); }
DLX_KERNEL(fail_unknown_kind) { return dlx_error(call, "NoSuchError", "custom failure"); }
DLX_KERNEL(fail_silently) {
  (void)call;
  return -1;
}
DLX_KERNEL(return_twice) {
  if (dlx_return_int(call, 1)) return -1;
  return dlx_return_int(call, 2);
}
/* Allocates a result, then fails: the result must be released, not leaked. */
DLX_KERNEL(alloc_then_fail) {
  DLTensor *out;
  int64_t n = 4;
  DLDataType f32 = {kDLFloat, 32, 1};
  if (dlx_return_new_tensor(call, dlx_call_device(call), 1, &n, f32, &out)) return -1;
  return dlx_error(call, "RuntimeError", "failed after allocating");
}

/* An exported function that is not a kernel: dlx.load must refuse to call it. */
DLX_EXPORT int not_a_kernel(int x) { return x + 1; }
