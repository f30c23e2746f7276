/* Kernels with declared signatures (DLX_KERNEL(name, "sig")) for
 * tests/python/calls/test_signatures.py. They check nothing by hand: the runtime did, before
 * they run. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <dlx/dlx.h>

static float *f32(DLTensor *t) { return (float *)((char *)t->data + t->byte_offset); }

/* Row softmax of a 2-d float32 tensor, into `out` when given, else into a new tensor. */
DLX_KERNEL(softmax, "x: f32[m, n], out: f32[m, n] mut? = None, axis: int = -1 -> f32[m, n]") {
  DLTensor *x, *out;
  int64_t axis, m, n;
  if (dlx_arg_tensor(call, 0, &x) || dlx_arg_int(call, 2, &axis) || dlx_size(call, "m", &m) ||
      dlx_size(call, "n", &n))
    return -1;
  if (axis != -1 && axis != 1)
    return dlx_error(call, "ValueError", "softmax(): axis %lld is not supported", (long long)axis);
  if (dlx_arg_is_none(call, 1)) {
    int64_t shape[2] = {m, n};
    if (dlx_return_new_tensor(call, x->device, 2, shape, x->dtype, &out)) return -1;
  } else if (dlx_arg_tensor(call, 1, &out)) {
    return -1;
  }
  for (int64_t i = 0; i < m; ++i) {
    const float *row = f32(x) + i * x->strides[0];
    float *o = f32(out) + i * out->strides[0];
    float mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < n; ++j) mx = fmaxf(mx, row[j * x->strides[1]]);
    for (int64_t j = 0; j < n; ++j) sum += o[j * out->strides[1]] = expf(row[j * x->strides[1]] - mx);
    for (int64_t j = 0; j < n; ++j) o[j * out->strides[1]] /= sum;
  }
  return 0;
}

/* zeros(shape, dtype='f32'): a new zero-filled tensor (numpy: no tensor argument). */
DLX_KERNEL(zeros, "shape: ints, dtype: str = 'f32' -> tensor") {
  const int64_t *shape;
  int32_t nd;
  const char *dt;
  if (dlx_arg_ints(call, 0, &shape, &nd) || dlx_arg_str(call, 1, &dt, NULL)) return -1;
  DLDataType t = {kDLFloat, 32, 1};
  if (strcmp(dt, "f64") == 0) t.bits = 64;
  else if (strcmp(dt, "i64") == 0) t.code = kDLInt, t.bits = 64;
  else if (strcmp(dt, "f32") != 0) return dlx_error(call, "ValueError", "zeros(): dtype '%s'?", dt);
  DLTensor *out;
  if (dlx_return_new_tensor(call, (DLDevice){kDLCPU, 0}, nd, shape, t, &out)) return -1;
  int64_t count = 1;
  for (int32_t d = 0; d < nd; ++d) count *= shape[d];
  memset((char *)out->data + out->byte_offset, 0, (size_t)(count * (t.bits / 8)));
  return 0;
}

/* reduce(x, mode='sum'): a string switch. */
DLX_KERNEL(reduce, "x: f64[n], mode: str = 'sum' -> float") {
  DLTensor *x;
  const char *mode;
  int64_t len;
  if (dlx_arg_tensor(call, 0, &x) || dlx_arg_str(call, 1, &mode, &len)) return -1;
  const double *p = (const double *)((char *)x->data + x->byte_offset);
  double acc = strcmp(mode, "max") == 0 ? -INFINITY : 0;
  for (int64_t i = 0; i < x->shape[0]; ++i) {
    double v = p[i * x->strides[0]];
    if (strcmp(mode, "sum") == 0) acc += v;
    else if (strcmp(mode, "max") == 0) acc = v > acc ? v : acc;
    else return dlx_error(call, "ValueError", "reduce(): unknown mode '%s' (%lld bytes)", mode,
                          (long long)len);
  }
  return dlx_return_float(call, acc);
}

/* Two results: a tuple in call order. */
DLX_KERNEL(minmax_rows, "x: f32[m, n] contig -> (f32[m], f32[m])") {
  DLTensor *x, *lo, *hi;
  int64_t m, n;
  if (dlx_arg_tensor(call, 0, &x) || dlx_size(call, "m", &m) || dlx_size(call, "n", &n)) return -1;
  if (dlx_return_new_tensor(call, x->device, 1, &m, x->dtype, &lo) ||
      dlx_return_new_tensor(call, x->device, 1, &m, x->dtype, &hi))
    return -1;
  for (int64_t i = 0; i < m; ++i) {
    const float *row = f32(x) + i * n;
    f32(lo)[i] = f32(hi)[i] = row[0];
    for (int64_t j = 1; j < n; ++j) {
      f32(lo)[i] = fminf(f32(lo)[i], row[j]);
      f32(hi)[i] = fmaxf(f32(hi)[i], row[j]);
    }
  }
  return 0;
}

/* What each declared scalar kind arrives as: (a, b, c, len(d), sum(e), sum(f), n_args). */
DLX_KERNEL(kinds, "a: int, b: float = 0.5, c: bool = False, d: str = 'abc', e: ints = (1, 2), "
                  "f: floats = (0.25,) -> (int, float, int, int, int, float, int)") {
  int64_t a, c, len, se = 0;
  double b, sf = 0;
  const char *d;
  const int64_t *e;
  const double *f;
  int32_t ne, nf;
  if (dlx_arg_int(call, 0, &a) || dlx_arg_float(call, 1, &b) || dlx_arg_int(call, 2, &c) ||
      dlx_arg_str(call, 3, &d, &len) || dlx_arg_ints(call, 4, &e, &ne) ||
      dlx_arg_floats(call, 5, &f, &nf))
    return -1;
  if (call->args[1].kind != DLX_ARG_FLOAT || call->args[2].kind != DLX_ARG_BOOL)
    return dlx_error(call, "AssertionError", "declared kinds not normalised");
  for (int32_t i = 0; i < ne; ++i) se += e[i];
  for (int32_t i = 0; i < nf; ++i) sf += f[i];
  return dlx_return_int(call, a) || dlx_return_float(call, b) || dlx_return_int(call, c) ||
                 dlx_return_int(call, len) || dlx_return_int(call, se) ||
                 dlx_return_float(call, sf) || dlx_return_int(call, dlx_num_args(call))
             ? -1
             : 0;
}

/* The three-tensor kernel of the benchmark: y += x * z. */
DLX_KERNEL(fma3, "x: f32[n], y: f32[n] mut, z: f32[n]") {
  DLTensor *x, *y, *z;
  if (dlx_arg_tensor(call, 0, &x) || dlx_arg_tensor(call, 1, &y) || dlx_arg_tensor(call, 2, &z))
    return -1;
  for (int64_t i = 0; i < x->shape[0]; ++i)
    f32(y)[i * y->strides[0]] += f32(x)[i * x->strides[0]] * f32(z)[i * z->strides[0]];
  return 0;
}

/* Size symbols across "..." and several tensors; dlx_size of a name it lacks fails. */
DLX_KERNEL(sizes, "x: tensor[a, ..., b], y: tensor[b, c]? = None, name: str = 'a' -> int") {
  const char *name;
  int64_t v;
  if (dlx_arg_str(call, 2, &name, NULL) || dlx_size(call, name, &v)) return -1;
  return dlx_return_int(call, v);
}

DLX_KERNEL(placed, "cpu_t: tensor cpu?, cuda_t: tensor cuda? = None, gpu_t: tensor gpu? = None, "
                   "npu_t: tensor npu? = None, c: tensor contig? = None") {
  (void)call;
  return 0;
}

DLX_KERNEL(dtypes, "x: f16|bf16|i8|u8|bool|c64[...]") {
  (void)call;
  return 0;
}

DLX_KERNEL(too_many_results, "-> int") {
  return dlx_return_int(call, 1) || dlx_return_int(call, 2);
}

DLX_KERNEL(fewer_results, "x: tensor? = None -> (int, int)") { return dlx_return_int(call, 7); }

DLX_KERNEL(no_args, "-> int") { return dlx_return_int(call, dlx_num_args(call)); }

/* Raise `kind` (a builtin name or a dotted path) with `message`. */
DLX_KERNEL(raise_kind, "kind: str, message: str = 'boom'") {
  const char *kind, *msg;
  if (dlx_arg_str(call, 0, &kind, NULL) || dlx_arg_str(call, 1, &msg, NULL)) return -1;
  return dlx_error(call, kind, "%s", msg);
}

/* ---- nogil ----------------------------------------------------------------------- */

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Marks flags[me] and waits (up to timeout_ms) to see flags[1 - me]: 1 when it did, that
 * is, when the other thread's kernel ran while this one was running. */
static int handshake(dlx_call *call) {
  DLTensor *flags;
  int64_t me, timeout;
  if (dlx_arg_tensor(call, 0, &flags) || dlx_arg_int(call, 1, &me) ||
      dlx_arg_int(call, 2, &timeout))
    return -1;
  int64_t *f = (int64_t *)((char *)flags->data + flags->byte_offset);
  __atomic_store_n(&f[me & 1], 1, __ATOMIC_SEQ_CST);
  double end = now_ms() + (double)timeout;
  int seen = 0;
  while (!(seen = __atomic_load_n(&f[(me + 1) & 1], __ATOMIC_SEQ_CST) != 0) && now_ms() < end) {
  }
  return dlx_return_int(call, seen);
}

DLX_KERNEL(handshake_nogil, "flags: i64[2] mut contig, me: int, timeout_ms: int -> int; nogil") {
  return handshake(call);
}
DLX_KERNEL(handshake_gil, "flags: i64[2] mut contig, me: int, timeout_ms: int -> int") {
  return handshake(call);
}

/* flags[0] = 1, waits (up to timeout_ms) for flags[1], then flags[0] = 2 as it returns:
 * another thread sees when this kernel started and when it ended. No result: nothing in
 * it takes the GIL. */
DLX_KERNEL(await_flag_nogil, "flags: i64[2] mut contig, timeout_ms: int; nogil") {
  DLTensor *flags;
  int64_t timeout;
  if (dlx_arg_tensor(call, 0, &flags) || dlx_arg_int(call, 1, &timeout)) return -1;
  int64_t *f = (int64_t *)((char *)flags->data + flags->byte_offset);
  __atomic_store_n(&f[0], 1, __ATOMIC_SEQ_CST);
  double end = now_ms() + (double)timeout;
  while (!__atomic_load_n(&f[1], __ATOMIC_SEQ_CST) && now_ms() < end) {
  }
  __atomic_store_n(&f[0], 2, __ATOMIC_SEQ_CST);
  return 0;
}

static int busy(dlx_call *call) {
  int64_t ms;
  if (dlx_arg_int(call, 0, &ms)) return -1;
  double end = now_ms() + (double)ms;
  while (now_ms() < end) {
  }
  return 0;
}
DLX_KERNEL(busy_nogil, "ms: int; nogil") { return busy(call); }
DLX_KERNEL(busy_gil, "ms: int") { return busy(call); }

/* Runtime services called without the GIL: they take it themselves. */
DLX_KERNEL(nogil_services, "n: int, fail: bool = False, like: tensor? = None -> (tensor, int, "
                           "float); nogil") {
  int64_t n, failing;
  DLTensor *out;
  if (dlx_arg_int(call, 0, &n) || dlx_arg_int(call, 1, &failing)) return -1;
  if (dlx_return_new_tensor(call, (DLDevice){kDLCPU, 0}, 1, &n, (DLDataType){kDLFloat, 32, 1}, &out))
    return -1;
  for (int64_t i = 0; i < n; ++i) f32(out)[i] = (float)i;
  if (failing) return dlx_error(call, "KeyError", "failed without the GIL after allocating");
  return dlx_return_int(call, n) || dlx_return_float(call, 0.5) ? -1 : 0;
}

/* Services called from a worker thread the kernel starts while it runs without the GIL (as
 * an OpenMP or std::thread pool would): a thread Python has never seen. */
typedef struct worker_job {
  dlx_call *call;
  int64_t failing;
  const char *kind;
} worker_job;

static void *worker_main(void *p) {
  worker_job *job = p;
  dlx_call *call = job->call;
  if (job->failing) {
    dlx_error(call, job->kind, "raised on a worker thread");
    return NULL;
  }
  int64_t n = 3;
  DLTensor *out;
  if (dlx_return_new_tensor(call, (DLDevice){kDLCPU, 0}, 1, &n, (DLDataType){kDLFloat, 32, 1},
                            &out))
    return NULL;
  for (int64_t i = 0; i < n; ++i) f32(out)[i] = (float)i;
  dlx_return_int(call, 42);
  return NULL;
}

DLX_KERNEL(nogil_worker, "fail: bool, kind: str = 'KeyError' -> (tensor, int); nogil") {
  worker_job job = {call, 0, NULL};
  int64_t len;
  if (dlx_arg_int(call, 0, &job.failing) || dlx_arg_str(call, 1, &job.kind, &len)) return -1;
  pthread_t t;
  if (pthread_create(&t, NULL, worker_main, &job))
    return dlx_error(call, "OSError", "pthread_create failed");
  pthread_join(t, NULL);
  return job.failing ? -1 : 0;
}

/* ---- unsigned kernels and the new accessors -------------------------------------- */

/* seq(x) -> (kind, length, sum): str, ints (sum of ints), floats (sum of floats). */
DLX_KERNEL(seq) {
  const char *s;
  int64_t len;
  const int64_t *iv;
  const double *fv;
  int32_t n;
  int32_t kind = dlx_num_args(call) ? call->args[0].kind : -1;
  if (kind == DLX_ARG_STR) {
    if (dlx_arg_str(call, 0, &s, &len)) return -1;
    return dlx_return_int(call, kind) || dlx_return_int(call, len) ||
           dlx_return_int(call, (int64_t)strlen(s));
  }
  if (kind == DLX_ARG_INTS) {
    if (dlx_arg_ints(call, 0, &iv, &n)) return -1;
    int64_t sum = 0;
    for (int32_t i = 0; i < n; ++i) sum += iv[i];
    return dlx_return_int(call, kind) || dlx_return_int(call, n) || dlx_return_int(call, sum);
  }
  if (dlx_arg_floats(call, 0, &fv, &n)) return -1;
  double sum = 0;
  for (int32_t i = 0; i < n; ++i) sum += fv[i];
  return dlx_return_int(call, kind) || dlx_return_int(call, n) || dlx_return_float(call, sum);
}

/* floats_of(x): dlx_arg_floats accepts ints too (converted); twice, same answer. */
DLX_KERNEL(floats_of) {
  const double *a, *b;
  int32_t n, m;
  if (dlx_arg_floats(call, 0, &a, &n) || dlx_arg_floats(call, 0, &b, &m)) return -1;
  if (a != b || n != m) return dlx_error(call, "AssertionError", "converted twice");
  double sum = 0;
  for (int32_t i = 0; i < n; ++i) sum += a[i] * (double)(i + 1);
  return dlx_return_float(call, sum);
}

DLX_KERNEL(ints_of) {
  const int64_t *v;
  int32_t n;
  return dlx_arg_ints(call, 0, &v, &n) ? -1 : dlx_return_int(call, n);
}

DLX_KERNEL(str_of) {
  const char *s;
  return dlx_arg_str(call, 0, &s, NULL) ? -1 : dlx_return_int(call, (int64_t)strlen(s));
}

DLX_KERNEL(none_at) {
  int64_t i;
  return dlx_arg_int(call, 0, &i) ? -1 : dlx_return_int(call, dlx_arg_is_none(call, (int32_t)i));
}

DLX_KERNEL(size_unsigned) {
  int64_t v;
  return dlx_size(call, "n", &v);
}
