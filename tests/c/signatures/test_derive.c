/* dlx_derive.c: torch schemas from declarations, result rules (dtype and per-dimension
 * origin), the equalities size symbols impose, and the reasons for what cannot be derived. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dlx_derive.h"

static dlx_sig *parse(const char *text) {
  char err[256] = "";
  int32_t col = -1;
  dlx_sig *s = dlx_sig_parse(text, err, sizeof err, &col);
  if (!s) fail_msg("'%s' refused at column %d: %s", text, col, err);
  return s;
}

static void schema(const char *text, const char *want) {
  dlx_sig *s = parse(text);
  char buf[1024], why[256] = "";
  if (dlx_derive_schema(s, "k", buf, sizeof buf, why, sizeof why))
    fail_msg("'%s' refused: %s", text, why);
  assert_string_equal(buf, want);
  dlx_sig_free(s);
}

static void no_schema(const char *text, const char *why_part) {
  dlx_sig *s = parse(text);
  char buf[1024], why[256] = "";
  assert_int_equal(dlx_derive_schema(s, "k", buf, sizeof buf, why, sizeof why), -1);
  if (!strstr(why, why_part)) fail_msg("'%s': why is '%s', wanted '%s'", text, why, why_part);
  dlx_sig_free(s);
}

static void test_schema(void **state) {
  (void)state;
  schema("x: f32[n] mut, a: float = 2.0", "k(Tensor(a!) x, float a=2.) -> ()");
  schema("x: f32[m, n] -> f32[m, n]", "k(Tensor x) -> Tensor");
  schema("x: tensor, y: f64 mut, z: i32 mut -> (f32[2], i64[3])",
         "k(Tensor x, Tensor(a!) y, Tensor(b!) z) -> (Tensor, Tensor)");
  schema("n: int = 3, a: float = 0.5, b: bool = True, s: str = 'x', d: ints = (1, 2), "
         "f: floats = (), o: f32? = None, i: int? = None, g: floats = (1.5,)",
         "k(SymInt n=3, float a=0.5, bool b=True, str s=\"x\", SymInt[] d=[1, 2], "
         "float[] f=[], Tensor? o=None, SymInt? i=None, float[] g=[1.5]) -> ()");
  schema("a: float = -3, e: float = 1e300", "k(float a=-3., float e=1e+300) -> ()");
  schema("", "k() -> ()");
  schema("out: f32 mut? = None", "k(Tensor(a!)? out=None) -> ()");
}

static void test_schema_refused(void **state) {
  (void)state;
  no_schema("x: f32 -> int", "result 0 is a scalar");
  no_schema("x: f32, out: f32[n] mut? = None -> f32[n]", "'out' is an optional mut tensor");
  no_schema("s: str = 'it\"s'", "'s' has a string default");
  no_schema("s: str = \"a'b\"", "'s' has a string default");
  dlx_sig *s = parse("x: f32[n] -> f32[n]");
  char small[8], why[128];
  assert_int_equal(dlx_derive_schema(s, "kernel", small, sizeof small, why, sizeof why), -1);
  assert_non_null(strstr(why, "longer than 8"));
  dlx_sig_free(s);
}

static dlx_sig *derive(const char *text, dlx_derived *d) {
  dlx_sig *s = parse(text);
  char why[256] = "";
  if (dlx_derive_results(s, d, why, sizeof why)) fail_msg("'%s' refused: %s", text, why);
  return s;
}

static void no_derive(const char *text, const char *why_part) {
  dlx_sig *s = parse(text);
  static dlx_derived d;
  char why[256] = "";
  assert_int_equal(dlx_derive_results(s, &d, why, sizeof why), -1);
  if (!strstr(why, why_part)) fail_msg("'%s': why is '%s', wanted '%s'", text, why, why_part);
  dlx_sig_free(s);
}

static void dim_is(const dlx_derived *d, int32_t r, int32_t k, int kind, int param, int dim,
                   int back) {
  const dlx_derived_dim *x = &d->dims[d->results[r].dim0 + k];
  assert_int_equal(x->kind, kind);
  if (kind == DLX_DERIVE_DIM || kind == DLX_DERIVE_BATCH) assert_int_equal(x->at.param, param);
  if (kind == DLX_DERIVE_DIM) {
    assert_int_equal(x->at.dim, dim);
    assert_int_equal(x->at.from_back, back);
  }
}

static void test_results(void **state) {
  (void)state;
  static dlx_derived d;
  dlx_sig *s = derive("x: f32[m, n], k: int = 2 -> (f32[n, m], i64[m, 3])", &d);
  assert_int_equal(d.nresults, 2);
  assert_int_equal(d.results[0].dtype_param, -1);
  assert_int_equal(d.results[0].dtype.code, kDLFloat);
  assert_int_equal(d.results[0].dtype.bits, 32);
  assert_int_equal(d.results[1].dtype.code, kDLInt);
  assert_int_equal(d.results[1].dtype.bits, 64);
  assert_int_equal(d.results[0].ndims, 2);
  dim_is(&d, 0, 0, DLX_DERIVE_DIM, 0, 1, 0);
  dim_is(&d, 0, 1, DLX_DERIVE_DIM, 0, 0, 0);
  dim_is(&d, 1, 0, DLX_DERIVE_DIM, 0, 0, 0);
  dim_is(&d, 1, 1, DLX_DERIVE_FIXED, 0, 0, 0);
  assert_int_equal(d.dims[d.results[1].dim0 + 1].extent, 3);
  assert_int_equal(d.neqs, 0);
  dlx_sig_free(s);

  /* open dtype: the first required parameter with the same set; "..." and from-the-back */
  s = derive("o: f32|f64[n]?, x: f32|f64[..., n], y: f32|f64[n] -> f32|f64[..., n, _, k]", &d);
  assert_int_equal(d.results[0].dtype_param, 1);
  assert_int_equal(d.results[0].ndims, 4);
  dim_is(&d, 0, 0, DLX_DERIVE_BATCH, 1, 0, 0);
  dim_is(&d, 0, 1, DLX_DERIVE_DIM, 1, 0, 1); /* n: the last of x, not the optional o */
  dim_is(&d, 0, 2, DLX_DERIVE_FRESH, 0, 0, 0);
  dim_is(&d, 0, 3, DLX_DERIVE_FRESH, 0, 0, 0);
  assert_int_equal(d.dims[d.results[0].dim0 + 2].sym, -1);
  assert_int_equal(d.dims[d.results[0].dim0 + 3].sym, dlx_sig_symbol_index(s, "k"));
  /* n declared three times: two equalities against o's first dimension */
  assert_int_equal(d.neqs, 2);
  assert_int_equal(d.eqs[0].first.param, 0);
  assert_int_equal(d.eqs[0].other.param, 1);
  assert_int_equal(d.eqs[0].other.from_back, 1);
  assert_int_equal(d.eqs[0].other.dim, 0);
  assert_int_equal(d.eqs[1].other.param, 2);
  assert_int_equal(d.eqs[1].other.dim, 0);
  dlx_sig_free(s);

  s = derive("x: f32[n] mut, a: float = 2.0", &d); /* no results */
  assert_int_equal(d.nresults, 0);
  dlx_sig_free(s);
  s = derive("x: f32[n], y: f32[n]", &d);
  assert_int_equal(d.neqs, 1);
  assert_int_equal(d.eqs[0].sym, 0);
  dlx_sig_free(s);
}

static void test_results_refused(void **state) {
  (void)state;
  no_derive("x: f32 -> int", "result 0 is not a tensor");
  no_derive("x: f32[n] -> f32", "result 0 declares no shape");
  no_derive("x: f32[n] -> f32|f64[n]", "result 0's dtype is open");
  no_derive("x: f32|f64[n]? = None -> f32|f64[n]", "result 0's dtype is open");
  no_derive("x: f32[n] -> f32[...]", "no tensor parameter declares \"...\"");
}

/* The bound: every dimension entry the grammar allows is a repeated size symbol. */
static void test_limits(void **state) {
  (void)state;
  char text[DLX_SIG_MAX_LEN];
  size_t n = 0;
  n += (size_t)snprintf(text + n, sizeof text - n, "x: f32[a, b, c, d, e, f, g, h]");
  for (int i = 1; i < DLX_SIG_MAX_DIMS / 8; ++i)
    n += (size_t)snprintf(text + n, sizeof text - n, ", y%d: f32[a, b, c, d, e, f, g, h]", i);
  dlx_sig *s = parse(text);
  static dlx_derived d;
  char why[256];
  assert_int_equal(dlx_derive_results(s, &d, why, sizeof why), 0);
  assert_int_equal(d.neqs, DLX_SIG_MAX_DIMS - 8);
  assert_int_equal(d.eqs[d.neqs - 1].other.param, DLX_SIG_MAX_DIMS / 8 - 1);
  assert_int_equal(d.eqs[d.neqs - 1].other.dim, 7);
  assert_int_equal(d.eqs[d.neqs - 1].first.param, 0);
  char buf[4096];
  assert_int_equal(dlx_derive_schema(s, "k", buf, sizeof buf, why, sizeof why), 0);
  dlx_sig_free(s);
}

/* ---- the real results' check ---------------------------------------------------------- */

static const DLDataType F32 = {kDLFloat, 32, 1}, F64 = {kDLFloat, 64, 1}, I64 = {kDLInt, 64, 1};
static const DLDevice CPU = {kDLCPU, 0}, CUDA1 = {kDLCUDA, 1};

static DLTensor tensor(DLDataType dt, int32_t ndim, int64_t *shape) {
  DLTensor t = {.data = NULL, .device = CPU, .ndim = ndim, .dtype = dt, .shape = shape};
  return t;
}

/* The parameters' check binds the symbols (as each path does before the kernel runs),
 * then results res[0..nres) are checked in order. -1 when all pass, else the failing
 * result's index with its message in msg and its fault code in *code. */
static int check_results(const char *text, DLTensor *const *in, DLTensor *const *res,
                         int32_t nres, DLDevice device, char *msg, size_t len, int *code) {
  dlx_sig *s = parse(text);
  dlx_arg args[DLX_SIG_MAX_PARAMS];
  dlx_sig_bindings b;
  dlx_sig_bindings_init(&b, s);
  for (int32_t i = 0; i < s->nparams; ++i) {
    args[i].kind = in[i] ? DLX_ARG_TENSOR : DLX_ARG_NONE;
    args[i].readonly = 0;
    args[i].value.tensor = in[i];
    dlx_sig_fault f;
    if (in[i] && dlx_sig_check_tensor(s, i, in[i], 0, &b, &f))
      fail_msg("'%s': argument %d refused", text, (int)i);
  }
  int at = -1;
  for (int32_t r = 0; r < nres && at < 0; ++r) {
    dlx_sig_fault f;
    if (dlx_derive_check_result(s, r, res[r], args, device, &b, &f)) {
      dlx_derive_result_message(s, r, res[r], NULL, args, device, &b, &f, msg, len);
      *code = f.code;
      at = r;
    }
  }
  dlx_sig_free(s);
  return at;
}

static void result_ok(const char *text, DLTensor *const *in, DLTensor *const *res,
                      int32_t nres) {
  char msg[512] = "";
  int code = 0;
  if (check_results(text, in, res, nres, CPU, msg, sizeof msg, &code) >= 0)
    fail_msg("'%s' refused: %s", text, msg);
}

static void result_refused(const char *text, DLTensor *const *in, DLTensor *const *res,
                           int32_t nres, int want_at, int want_code, const char *want) {
  char msg[512] = "";
  int code = 0;
  int at = check_results(text, in, res, nres, CPU, msg, sizeof msg, &code);
  assert_int_equal(at, want_at);
  assert_int_equal(code, want_code);
  assert_string_equal(msg, want);
}

static void test_check_result(void **state) {
  (void)state;
  int64_t s4[] = {4}, s5[] = {5}, s23[] = {2, 3}, s234[] = {2, 3, 4}, s2345[] = {2, 3, 4, 5};
  DLTensor x4 = tensor(F32, 1, s4), x5 = tensor(F32, 1, s5), d4 = tensor(F64, 1, s4),
           d5 = tensor(F64, 1, s5), i4 = tensor(I64, 1, s4);
  /* the case: -> f32[n] given n=4 */
  result_ok("x: f32[n] -> f32[n]", (DLTensor *[]){&x4}, (DLTensor *[]){&x4}, 1);
  result_refused("x: f32[n] -> f32[n]", (DLTensor *[]){&x4}, (DLTensor *[]){&x5}, 1, 0,
                 DLX_FAULT_SYMBOL, "result 0 must be f32[n] with n=4 (from 'x'), got f32[5]");
  result_refused("x: f32[n] -> f32[n]", (DLTensor *[]){&x4}, (DLTensor *[]){&d5}, 1, 0,
                 DLX_FAULT_DTYPE, "result 0 must be f32[n] with n=4 (from 'x'), got f64[5]");
  /* ranks and fixed extents */
  DLTensor m23 = tensor(F32, 2, s23), m234 = tensor(F32, 3, s234);
  result_refused("x: f32[n] -> f32[n]", (DLTensor *[]){&x4}, (DLTensor *[]){&m23}, 1, 0,
                 DLX_FAULT_NDIM, "result 0 must be f32[n] with n=4 (from 'x'), got f32[2, 3]");
  result_ok("x: f32[n] -> f32[2, 3]", (DLTensor *[]){&x4}, (DLTensor *[]){&m23}, 1);
  result_refused("x: f32[n] -> f32[2, 4]", (DLTensor *[]){&x4}, (DLTensor *[]){&m23}, 1, 0,
                 DLX_FAULT_EXTENT, "result 0 must be f32[2, 4], got f32[2, 3]");
  result_ok("x: f32[n] -> f32[_, _]", (DLTensor *[]){&x4}, (DLTensor *[]){&m23}, 1);
  /* two symbols from two parameters, named where they come from */
  DLTensor y3 = tensor(F32, 1, (int64_t[]){3}), y2 = tensor(F32, 1, (int64_t[]){2});
  result_ok("x: f32[m], y: f32[n] -> f32[m, n]", (DLTensor *[]){&y2, &y3},
            (DLTensor *[]){&m23}, 1);
  result_refused("x: f32[m], y: f32[n] -> f32[m, n]", (DLTensor *[]){&y3, &y2},
                 (DLTensor *[]){&m23}, 1, 0, DLX_FAULT_SYMBOL,
                 "result 0 must be f32[m, n] with m=3 (from 'x'), n=2 (from 'y'), got f32[2, 3]");
  /* data-dependent sizes stay allowed; one symbol is one extent across the results */
  result_ok("x: f32[n] -> f32[k]", (DLTensor *[]){&x4}, (DLTensor *[]){&x5}, 1);
  DLTensor i5 = tensor(I64, 1, s5);
  result_ok("x: f32[n] -> (f32[k], i64[k])", (DLTensor *[]){&x4}, (DLTensor *[]){&x5, &i5}, 2);
  result_refused("x: f32[n] -> (f32[k], i64[k])", (DLTensor *[]){&x4},
                 (DLTensor *[]){&x5, &i4}, 2, 1, DLX_FAULT_SYMBOL,
                 "result 1 must be i64[k] with k=5 (from result 0), got i64[4]");
  /* a symbol declared only by an optional parameter given None: bound by the result */
  result_ok("x: f32[n], y: f32[m]? = None -> f32[m]", (DLTensor *[]){&x4, NULL},
            (DLTensor *[]){&x5}, 1);
  result_refused("x: f32[n], y: f32[m]? = None -> f32[m]", (DLTensor *[]){&x4, &x4},
                 (DLTensor *[]){&x5}, 1, 0, DLX_FAULT_SYMBOL,
                 "result 0 must be f32[m] with m=4 (from 'y'), got f32[5]");
  /* an open dtype is the dtype of the first required parameter with the same set */
  result_ok("x: f32|f64[n] -> f32|f64[n]", (DLTensor *[]){&d4}, (DLTensor *[]){&d4}, 1);
  result_refused("x: f32|f64[n] -> f32|f64[n]", (DLTensor *[]){&d4}, (DLTensor *[]){&x4}, 1, 0,
                 DLX_FAULT_DTYPE,
                 "result 0 must be f32|f64[n] with dtype f64 (from 'x'), n=4 (from 'x'), "
                 "got f32[4]");
  /* ... and with no such parameter, any of its set */
  result_ok("x: f32[n] -> f32|f64[n]", (DLTensor *[]){&x4}, (DLTensor *[]){&d4}, 1);
  result_refused("x: f32[n] -> f32|f64[n]", (DLTensor *[]){&x4}, (DLTensor *[]){&i4}, 1, 0,
                 DLX_FAULT_DTYPE, "result 0 must be f32|f64[n] with n=4 (from 'x'), got i64[4]");
  result_ok("x: f32[n] -> tensor", (DLTensor *[]){&x4}, (DLTensor *[]){&m234}, 1);
  /* "...": the dims the first "..." parameter matched */
  DLTensor b234 = tensor(F32, 3, s234), b2345 = tensor(F32, 4, s2345),
           b34 = tensor(F32, 2, (int64_t[]){3, 4}), b334 = tensor(F32, 3, (int64_t[]){3, 3, 4});
  result_ok("x: f32[..., n] -> f32[..., n]", (DLTensor *[]){&b234}, (DLTensor *[]){&b234}, 1);
  result_refused("x: f32[..., n] -> f32[..., n]", (DLTensor *[]){&b234}, (DLTensor *[]){&b34}, 1,
                 0, DLX_FAULT_NDIM,
                 "result 0 must be f32[..., n] with ...=[2, 3] (from 'x'), n=4 (from 'x'), "
                 "got f32[3, 4]");
  result_refused("x: f32[..., n] -> f32[..., n]", (DLTensor *[]){&b234},
                 (DLTensor *[]){&b334}, 1, 0, DLX_FAULT_EXTENT,
                 "result 0 must be f32[..., n] with ...=[2, 3] (from 'x'), n=4 (from 'x'), "
                 "got f32[3, 3, 4]");
  DLTensor b223 = tensor(F32, 3, (int64_t[]){2, 2, 3});
  result_ok("x: f32[..., n] -> f32[2, ...]", (DLTensor *[]){&b234}, (DLTensor *[]){&b223}, 1);
  result_refused("x: f32[...] -> f32[...]", (DLTensor *[]){&b234}, (DLTensor *[]){&b2345}, 1, 0,
                 DLX_FAULT_NDIM, "result 0 must be f32[...] with ...=[2, 3, 4] (from 'x'), "
                                 "got f32[2, 3, 4, 5]");
  /* a scalar result declared where the kernel made a tensor */
  result_refused("x: f32[n] -> int", (DLTensor *[]){&x4}, (DLTensor *[]){&x4}, 1, 0,
                 DLX_FAULT_RESULT_KIND, "result 0 must be int, got a tensor f32[4]");
}

static void test_check_result_device(void **state) {
  (void)state;
  int64_t s4[] = {4};
  DLTensor x4 = tensor(F32, 1, s4), g4 = tensor(F32, 1, s4);
  g4.device = CUDA1;
  char msg[512];
  int code = 0;
  /* the call's device, unless the result declares one */
  assert_int_equal(check_results("x: f32[n] -> f32[n]", (DLTensor *[]){&g4},
                                 (DLTensor *[]){&g4}, 1, CUDA1, msg, sizeof msg, &code), -1);
  assert_int_equal(check_results("x: f32[n] -> f32[n]", (DLTensor *[]){&g4},
                                 (DLTensor *[]){&x4}, 1, CUDA1, msg, sizeof msg, &code), 0);
  assert_int_equal(code, DLX_FAULT_DEVICE);
  assert_string_equal(msg, "result 0 must be f32[n] with n=4 (from 'x') on cuda:1 (the call's "
                           "device), got f32[4] on cpu:0");
  assert_int_equal(check_results("x: f32[n] -> f32[n] cpu", (DLTensor *[]){&g4},
                                 (DLTensor *[]){&x4}, 1, CUDA1, msg, sizeof msg, &code), -1);
  assert_int_equal(check_results("x: f32[n] -> f32[n] cuda", (DLTensor *[]){&x4},
                                 (DLTensor *[]){&x4}, 1, CPU, msg, sizeof msg, &code), 0);
  assert_string_equal(msg, "result 0 must be f32[n] cuda with n=4 (from 'x'), got f32[4] on "
                           "cpu:0");
  /* a message cut short stays a string */
  char tiny[16];
  assert_int_equal(check_results("x: f32[n] -> f32[n]", (DLTensor *[]){&g4},
                                 (DLTensor *[]){&x4}, 1, CUDA1, tiny, sizeof tiny, &code), 0);
  assert_int_equal(strlen(tiny), sizeof tiny - 1);
}

/* Which dimensions may be split (issue 32). */
static void shard(const char *text, uint32_t independent, int batch) {
  dlx_sig *s = parse(text);
  dlx_shard_rule r;
  dlx_derive_shard(s, &r);
  if (r.independent != independent || r.batch != batch)
    fail_msg("'%s': independent %#x batch %d", text, r.independent, r.batch);
  dlx_sig_free(s);
}

static void test_shard(void **state) {
  (void)state;
  shard("x: f32[..., n], w: f32[n] -> f32[..., n]", 0, 1);
  shard("x: f32[..., n], y: f32[..., n] mut", 0, 1);
  shard("x: f32[..., n] -> f32[n]", 0, 0);            /* a reduction over the batch */
  shard("x: f32[..., n] -> (f32[..., n], f32[])", 0, 0);
  shard("x: f32[..., n], acc: f32[n] mut", 0, 0);     /* accumulates over the batch */
  shard("x: f32[..., n] -> int", 0, 0);
  shard("x: f32[m, n] -> f32[m, n]", 0, 0);           /* nothing marked */
  shard("x: f32[m*, n], w: f32[n] -> f32[m, n]", 1u << 0, 0);
  shard("x: f32[m, n*], s: int -> f32[m, n]", 1u << 1, 0);
  shard("x: f32[..., c*], w: f32[k, c] -> f32[..., c]", 1u << 0, 1);
  shard("x: tensor -> f32[...]", 0, 0);               /* no "..." parameter */
  dlx_sig *s = parse("x: f32[..., 3, m*, _], y: f32, n: int -> f32[m]");
  assert_int_equal(dlx_derive_shard_label(s, &s->params[0].type, 0), DLX_SHARD_BATCH);
  assert_int_equal(dlx_derive_shard_label(s, &s->params[0].type, 1), DLX_SHARD_NONE);
  assert_int_equal(dlx_derive_shard_label(s, &s->params[0].type, 2), 0);
  assert_int_equal(dlx_derive_shard_label(s, &s->params[0].type, 3), DLX_SHARD_NONE);
  assert_int_equal(dlx_derive_shard_label(s, &s->params[0].type, 4), DLX_SHARD_NONE);
  assert_int_equal(dlx_derive_shard_label(s, &s->params[1].type, 0), DLX_SHARD_NONE);
  assert_int_equal(dlx_derive_shard_label(s, &s->params[2].type, 0), DLX_SHARD_NONE);
  assert_int_equal(dlx_derive_shard_label(s, &s->results[0], 0), 0);
  dlx_sig_free(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_schema), cmocka_unit_test(test_schema_refused),
      cmocka_unit_test(test_shard),
      cmocka_unit_test(test_results), cmocka_unit_test(test_results_refused),
      cmocka_unit_test(test_limits), cmocka_unit_test(test_check_result),
      cmocka_unit_test(test_check_result_device),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
