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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_schema), cmocka_unit_test(test_schema_refused),
      cmocka_unit_test(test_results), cmocka_unit_test(test_results_refused),
      cmocka_unit_test(test_limits),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
