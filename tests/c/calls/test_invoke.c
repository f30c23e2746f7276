/* test_invoke.c - dlx_invoke_run: a kernel called without Python, checked on its plan. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "dlx_invoke.h"
#include "dlx_sig.h"

static int ran; /* kernels count their runs: a refused call never reaches them */

/* x: f32[n], a: float = 2.0 -> f32[n]: y = a * x, n read back with dlx_size */
static int scale(dlx_call *call) {
  ++ran;
  DLTensor *x, *y;
  double a;
  int64_t n;
  if (dlx_arg_tensor(call, 0, &x) || dlx_arg_float(call, 1, &a) || dlx_size(call, "n", &n))
    return -1;
  if (dlx_return_new_tensor(call, x->device, 1, &n, x->dtype, &y)) return -1;
  for (int64_t i = 0; i < n; ++i) ((float *)y->data)[i] = (float)a * ((float *)x->data)[i];
  return 0;
}

/* x: f32[n] mut, w: floats: x += sum(w); the stream is recorded */
static void *seen_stream;
static int add_sum(dlx_call *call) {
  ++ran;
  DLTensor *x;
  const double *w;
  int32_t nw;
  if (dlx_arg_tensor(call, 0, &x) || dlx_arg_floats(call, 1, &w, &nw)) return -1;
  seen_stream = dlx_call_stream(call);
  double s = 0;
  for (int32_t i = 0; i < nw; ++i) s += w[i];
  for (int64_t i = 0; i < x->shape[0]; ++i) ((float *)x->data)[i] += (float)s;
  return 0;
}

static int scalar_kernel(dlx_call *call) { return dlx_return_int(call, 3); }
static int failing(dlx_call *call) { return dlx_error(call, "KeyError", "no such %s", "thing"); }
static int silent_failure(dlx_call *call) { (void)call; return 7; }

/* -> (f32[2], f32[2]) but makes `how_many` results */
static int how_many;
static int some_results(dlx_call *call) {
  int64_t two = 2;
  DLTensor *t;
  for (int i = 0; i < how_many; ++i)
    if (dlx_return_new_tensor(call, (DLDevice){kDLCPU, 0}, 1, &two,
                              (DLDataType){kDLFloat, 32, 1}, &t))
      return -1;
  return 0;
}

static const DLDataType f32 = {kDLFloat, 32, 1}, i32 = {kDLInt, 32, 1};

static DLTensor tensor(void *data, int64_t *shape, int32_t ndim, DLDataType dt) {
  return (DLTensor){.data = data, .device = {kDLCPU, 0}, .ndim = ndim, .dtype = dt,
                    .shape = shape, .strides = NULL, .byte_offset = 0};
}

static dlx_sig *plan(const char *text) {
  char err[256];
  int32_t col;
  dlx_sig *s = dlx_sig_parse(text, err, sizeof err, &col);
  assert_non_null(s);
  return s;
}

static void test_preallocated_result(void **state) {
  (void)state;
  dlx_sig *s = plan("x: f32[n], a: float = 2.0 -> f32[n]");
  float xd[3] = {1, 2, 3}, yd[3] = {0};
  int64_t n3 = 3;
  DLTensor x = tensor(xd, &n3, 1, f32), y = tensor(yd, &n3, 1, f32), *out[1] = {&y};
  dlx_arg args[2] = {{.kind = DLX_ARG_TENSOR, .value.tensor = &x},
                     {.kind = DLX_ARG_FLOAT, .value.f = 0.5}};
  dlx_invoke inv = {.fn = scale, .plan = s, .name = "scale", .args = args, .nargs = 2,
                    .out = out, .nout = 1};
  assert_int_equal(dlx_invoke_run(&inv), 0);
  assert_int_equal(inv.produced, 1);
  assert_true(yd[0] == 0.5f && yd[1] == 1.0f && yd[2] == 1.5f);
  /* an int for a float parameter is taken, as in Python */
  args[1] = (dlx_arg){.kind = DLX_ARG_INT, .value.i = 3};
  assert_int_equal(dlx_invoke_run(&inv), 0);
  assert_true(yd[2] == 9.0f);
  /* a preallocated result of another shape: the kernel's request is refused, named */
  int64_t n2 = 2;
  y.shape = &n2;
  assert_int_equal(dlx_invoke_run(&inv), -1);
  assert_string_equal(inv.error_kind, "ValueError");
  assert_non_null(strstr(inv.error, "scale(): result 0: the kernel made f32 (3,)"));
  assert_non_null(strstr(inv.error, "declaration gives f32 (2,)"));
  dlx_sig_free(s);
}

static void test_checked_before_the_kernel(void **state) {
  (void)state;
  dlx_sig *s = plan("x: f32[n], a: float = 2.0 -> f32[n]");
  int32_t xd[3] = {0};
  float yd[3];
  int64_t n3 = 3;
  DLTensor x = tensor(xd, &n3, 1, i32), y = tensor(yd, &n3, 1, f32), *out[1] = {&y};
  dlx_arg args[2] = {{.kind = DLX_ARG_TENSOR, .value.tensor = &x},
                     {.kind = DLX_ARG_FLOAT, .value.f = 1}};
  dlx_invoke inv = {.fn = scale, .plan = s, .name = "scale", .args = args, .nargs = 2,
                    .out = out, .nout = 1};
  ran = 0;
  assert_int_equal(dlx_invoke_run(&inv), -1);
  assert_int_equal(ran, 0);
  assert_string_equal(inv.error_kind, "TypeError");
  assert_non_null(strstr(inv.error, "scale(): 'x'"));
  /* a missing required tensor, a wrong kind, a wrong count */
  x.dtype = f32;
  args[0].kind = DLX_ARG_NONE;
  assert_int_equal(dlx_invoke_run(&inv), -1);
  assert_string_equal(inv.error, "scale(): 'x' must not be None");
  args[0] = (dlx_arg){.kind = DLX_ARG_TENSOR, .value.tensor = &x};
  args[1].kind = DLX_ARG_STR;
  assert_int_equal(dlx_invoke_run(&inv), -1);
  assert_string_equal(inv.error, "scale(): 'a' must be float, got str");
  inv.nargs = 1;
  assert_int_equal(dlx_invoke_run(&inv), -1);
  assert_string_equal(inv.error, "scale(): takes 2 argument(s), 1 given");
  /* the caller's result count must be the declared one */
  args[1].kind = DLX_ARG_FLOAT;
  inv.nargs = 2;
  inv.nout = 0;
  assert_int_equal(dlx_invoke_run(&inv), -1);
  assert_non_null(strstr(inv.error, "provides 0 result(s) where the signature declares 1"));
  assert_int_equal(ran, 0);
  dlx_sig_free(s);
}

static void test_mut_floats_of_ints_and_stream(void **state) {
  (void)state;
  dlx_sig *s = plan("x: f32[n] mut, w: floats");
  float xd[2] = {1, 2};
  int64_t n2 = 2, ints[3] = {1, 2, 3};
  dlx_arg_seq seq = {ints, 3};
  DLTensor x = tensor(xd, &n2, 1, f32);
  dlx_arg args[2] = {{.kind = DLX_ARG_TENSOR, .value.tensor = &x},
                     {.kind = DLX_ARG_INTS, .value.seq = &seq}};
  int stream;
  dlx_invoke inv = {.fn = add_sum, .plan = s, .name = "add_sum", .args = args, .nargs = 2,
                    .stream = &stream};
  assert_int_equal(dlx_invoke_run(&inv), 0);
  assert_true(xd[0] == 7.0f && xd[1] == 8.0f);
  assert_ptr_equal(seen_stream, &stream);
  assert_int_equal(inv.produced, 0);
  /* a read-only tensor for a mut parameter is refused */
  args[0].readonly = 1;
  assert_int_equal(dlx_invoke_run(&inv), -1);
  assert_string_equal(inv.error_kind, "ValueError");
  assert_true(xd[0] == 7.0f);
  dlx_sig_free(s);
}

static void test_scalar_results_and_errors(void **state) {
  (void)state;
  dlx_invoke inv = {.fn = scalar_kernel, .name = "k"};
  assert_int_equal(dlx_invoke_run(&inv), -1);
  assert_string_equal(inv.error_kind, "TypeError");
  assert_string_equal(inv.error, "k(): dlx_return_int: a traced or compiled call takes tensor "
                                 "results only");
  inv.fn = failing;
  assert_int_equal(dlx_invoke_run(&inv), -1);
  assert_string_equal(inv.error_kind, "KeyError");
  assert_string_equal(inv.error, "k(): no such thing");
  inv.fn = silent_failure;
  assert_int_equal(dlx_invoke_run(&inv), -1);
  assert_string_equal(inv.error, "k(): the kernel failed (returned 7) without setting an error");
}

static int allocated;
static float pool[2][2];
static DLTensor pooled[2];
static int64_t pooled_shape[2][1];
static int take(void *ctx, int32_t index, DLDevice dev, int32_t ndim, const int64_t *shape,
                DLDataType dtype, DLTensor **out) {
  assert_ptr_equal(ctx, &allocated);
  pooled_shape[index][0] = shape[0];
  pooled[index] = (DLTensor){pool[index], dev, ndim, dtype, pooled_shape[index], NULL, 0};
  *out = &pooled[index];
  ++allocated;
  return 0;
}

static void test_result_counts(void **state) {
  (void)state;
  dlx_sig *s = plan("-> (f32[2], f32[2])");
  dlx_invoke inv = {.fn = some_results, .plan = s, .name = "two", .allocate = take,
                    .allocate_ctx = &allocated};
  how_many = 2;
  allocated = 0;
  assert_int_equal(dlx_invoke_run(&inv), 0);
  assert_int_equal(inv.produced, 2);
  assert_int_equal(allocated, 2);
  how_many = 1;
  assert_int_equal(dlx_invoke_run(&inv), -1);
  assert_string_equal(inv.error, "two(): returned 1 of the 2 result(s) its signature declares");
  how_many = 3;
  assert_int_equal(dlx_invoke_run(&inv), -1);
  assert_string_equal(inv.error,
                      "two(): returned more than the 2 result(s) its signature declares");
  /* undeclared with preallocated results: exactly those */
  float a[2], b[2];
  int64_t two = 2;
  DLTensor ta = tensor(a, &two, 1, f32), tb = tensor(b, &two, 1, f32), *out[2] = {&ta, &tb};
  dlx_invoke raw = {.fn = some_results, .name = "raw", .out = out, .nout = 2};
  how_many = 2;
  assert_int_equal(dlx_invoke_run(&raw), 0);
  how_many = 1;
  assert_int_equal(dlx_invoke_run(&raw), -1);
  assert_string_equal(raw.error, "raw(): returned 1 of the 2 result(s) the caller provides");
  dlx_sig_free(s);
}

static dlx_attr attr(const char *name, int32_t type, const void *data, int64_t len) {
  return (dlx_attr){name, strlen(name), type, data, len};
}

static void test_bind_from_attributes(void **state) {
  (void)state;
  dlx_sig *s = plan("x: f32[n], i: int = 1, f: float = 0.5, b: bool = False, s: str = 'once', "
                    "li: ints = (1, 2), lf: floats = (0.25,), o: f32[n]? = None, "
                    "m: f32[n] mut? = None -> f32[n]");
  float xd[2], md[2];
  int64_t two = 2, i = 3, b = 1, none = 1 << 7, li[2] = {4, 5};
  double f = 1.5, lf[1] = {2.5};
  DLTensor x = tensor(xd, &two, 1, f32), m = tensor(md, &two, 1, f32);
  DLTensor *ins[1] = {&x}, *muts[1] = {&m};
  dlx_attr attrs[8] = {attr("p_i", DLX_ATTR_I64, &i, 1),   attr("p_f", DLX_ATTR_F64, &f, 1),
                       attr("p_b", DLX_ATTR_I64, &b, 1),   attr("p_s", DLX_ATTR_STR, "twice", 5),
                       attr("p_li", DLX_ATTR_I64S, li, 2), attr("p_lf", DLX_ATTR_F64S, lf, 1),
                       attr("dlx_none", DLX_ATTR_I64, &none, 1),
                       attr("dlx_id", DLX_ATTR_I64, &i, 1)};
  dlx_arg args[9];
  dlx_bind_store store;
  char err[256];
  assert_int_equal(dlx_invoke_bind(s, attrs, 8, ins, 1, muts, 1, args, &store, err, sizeof err), 0);
  assert_true(args[0].kind == DLX_ARG_TENSOR && args[0].value.tensor == &x);
  assert_true(args[1].kind == DLX_ARG_INT && args[1].value.i == 3);
  assert_true(args[2].kind == DLX_ARG_FLOAT && args[2].value.f == 1.5);
  assert_true(args[3].kind == DLX_ARG_BOOL && args[3].value.i == 1);
  assert_true(args[4].kind == DLX_ARG_STR);
  assert_string_equal(args[4].value.seq->data, "twice");
  assert_true(args[5].kind == DLX_ARG_INTS && args[5].value.seq->len == 2);
  assert_true(args[6].kind == DLX_ARG_FLOATS && ((const double *)args[6].value.seq->data)[0] == 2.5);
  assert_int_equal(args[7].kind, DLX_ARG_NONE);
  assert_true(args[8].kind == DLX_ARG_TENSOR && args[8].value.tensor == &m);
  /* forged or broken attributes: refused with a reason, never read out of bounds */
  attrs[0] = attr("p_i", DLX_ATTR_F64, &f, 1);
  assert_int_equal(dlx_invoke_bind(s, attrs, 8, ins, 1, muts, 1, args, &store, err, sizeof err), -1);
  assert_string_equal(err, "'i': attribute p_i must be an int64, got a float64");
  attrs[0] = attr("p_j", DLX_ATTR_I64, &i, 1);
  assert_int_equal(dlx_invoke_bind(s, attrs, 8, ins, 1, muts, 1, args, &store, err, sizeof err), -1);
  assert_string_equal(err, "'i': attribute p_i is missing");
  attrs[0] = attr("p_i", DLX_ATTR_I64, &i, 1);
  none = 1; /* x is not optional */
  assert_int_equal(dlx_invoke_bind(s, attrs, 8, ins, 1, muts, 1, args, &store, err, sizeof err), -1);
  assert_string_equal(err, "'x' must not be None");
  none = (int64_t)1 << 20;
  assert_int_equal(dlx_invoke_bind(s, attrs, 8, ins, 1, muts, 1, args, &store, err, sizeof err), -1);
  none = 1 << 7;
  assert_int_equal(dlx_invoke_bind(s, attrs, 8, ins, 1, muts, 0, args, &store, err, sizeof err), -1);
  assert_string_equal(err, "'m': the call has too few aliased outputs");
  DLTensor *two_ins[2] = {&x, &x};
  assert_int_equal(dlx_invoke_bind(s, attrs, 8, two_ins, 2, muts, 1, args, &store, err, sizeof err), -1);
  assert_non_null(strstr(err, "2 input(s)"));
  b = 2;
  assert_int_equal(dlx_invoke_bind(s, attrs, 8, ins, 1, muts, 1, args, &store, err, sizeof err), -1);
  assert_string_equal(err, "'b': a bool must be 0 or 1");
  b = 0;
  attrs[3] = attr("p_s", DLX_ATTR_STR, "a\0b", 3);
  assert_int_equal(dlx_invoke_bind(s, attrs, 8, ins, 1, muts, 1, args, &store, err, sizeof err), -1);
  assert_string_equal(err, "'s': a string with a NUL byte");
  assert_int_equal(dlx_invoke_bind(NULL, attrs, 8, ins, 1, muts, 1, args, &store, err, sizeof err), -1);
  dlx_sig_free(s);
}

/* check once, then run many times without the checks: dlx_size reads the proof's symbols,
 * the kernel's results are still checked */
static void test_check_then_run_checked(void **state) {
  (void)state;
  dlx_sig *s = plan("x: f32[n], a: float = 2.0 -> f32[n]");
  float xd[3] = {1, 2, 3}, yd[3] = {0};
  int64_t n3 = 3;
  DLTensor x = tensor(xd, &n3, 1, f32), y = tensor(yd, &n3, 1, f32), *out[1] = {&y};
  dlx_arg args[2] = {{.kind = DLX_ARG_TENSOR, .value.tensor = &x},
                     {.kind = DLX_ARG_FLOAT, .value.f = 2}};
  dlx_invoke inv = {.fn = scale, .plan = s, .name = "scale", .args = args, .nargs = 2,
                    .out = out, .nout = 1};
  dlx_invoke_proof proof;
  ran = 0;
  assert_int_equal(dlx_invoke_check(&inv, &proof), 0);
  assert_int_equal(ran, 0); /* checked, not run */
  assert_int_equal(proof.value[0], 3);
  assert_int_equal(dlx_invoke_run_checked(&inv, &proof), 0);
  assert_int_equal(ran, 1);
  assert_true(yd[0] == 2.0f && yd[2] == 6.0f);
  /* a check that fails keeps its error, as dlx_invoke_run's */
  x.dtype = i32;
  assert_int_equal(dlx_invoke_check(&inv, &proof), -1);
  assert_string_equal(inv.error_kind, "TypeError");
  assert_int_equal(ran, 1);
  x.dtype = f32;
  /* the results are checked still: a proof whose n disagrees with the preallocated result */
  proof.value[0] = 2;
  assert_int_equal(dlx_invoke_run_checked(&inv, &proof), -1);
  assert_string_equal(inv.error_kind, "ValueError");
  assert_non_null(strstr(inv.error, "scale(): result 0: the kernel made f32 (2,)"));
  /* an undeclared kernel has nothing to prove */
  inv.plan = NULL;
  assert_int_equal(dlx_invoke_check(&inv, &proof), -1);
  assert_int_equal(dlx_invoke_run_checked(&inv, &proof), -1);
  dlx_sig_free(s);
}

/* n + 1 elements where f32[n] is declared */
static int too_long(dlx_call *call) {
  ++ran;
  DLTensor *x, *y;
  int64_t n;
  if (dlx_arg_tensor(call, 0, &x) || dlx_size(call, "n", &n)) return -1;
  ++n;
  return dlx_return_new_tensor(call, x->device, 1, &n, x->dtype, &y);
}

/* too_long's neighbours: the right shape, but f64 (a declaration's dtype), another device,
 * or a second result */
static int as_f64(dlx_call *call) {
  DLTensor *x, *y;
  int64_t n;
  if (dlx_arg_tensor(call, 0, &x) || dlx_size(call, "n", &n)) return -1;
  return dlx_return_new_tensor(call, x->device, 1, &n, (DLDataType){kDLFloat, 64, 1}, &y);
}
static int on_device_1(dlx_call *call) {
  DLTensor *x, *y;
  int64_t n;
  if (dlx_arg_tensor(call, 0, &x) || dlx_size(call, "n", &n)) return -1;
  return dlx_return_new_tensor(call, (DLDevice){kDLCPU, 1}, 1, &n, x->dtype, &y);
}
static int twice(dlx_call *call) {
  DLTensor *x, *y;
  int64_t n;
  if (dlx_arg_tensor(call, 0, &x) || dlx_size(call, "n", &n)) return -1;
  return dlx_return_new_tensor(call, x->device, 1, &n, x->dtype, &y) ||
         dlx_return_new_tensor(call, x->device, 1, &n, x->dtype, &y);
}

/* The proof keeps which out buffers meet their declared result (issue 33): a call on the
 * proof compares the kernel's result with that buffer only, and a result that differs from
 * it still meets the declaration's check, in the declaration's words. */
static void test_proof_results(void **state) {
  (void)state;
  dlx_sig *s = plan("x: f32[n], a: float = 2.0 -> f32[n]");
  float xd[3] = {1, 2, 3}, yd[4] = {0};
  int64_t n3 = 3, n4 = 4;
  DLTensor x = tensor(xd, &n3, 1, f32), y = tensor(yd, &n3, 1, f32), *out[1] = {&y};
  dlx_arg args[2] = {{.kind = DLX_ARG_TENSOR, .value.tensor = &x},
                     {.kind = DLX_ARG_FLOAT, .value.f = 2}};
  dlx_invoke inv = {.fn = scale, .plan = s, .name = "scale", .args = args, .nargs = 2,
                    .out = out, .nout = 1};
  dlx_invoke_proof proof;
  assert_int_equal(dlx_invoke_check(&inv, &proof), 0);
  assert_int_equal(proof.results, 1); /* out[0] is f32[3] with n=3 */
  assert_int_equal(dlx_invoke_run_checked(&inv, &proof), 0);
  assert_true(yd[2] == 6.0f);
  /* proved, but the kernel makes f32[4]: the declaration refuses it, as unproved */
  const char *too_long_words =
      "too_long(): result 0 must be f32[n] with n=3 (from 'x'), got f32[4]";
  inv.fn = too_long;
  inv.name = "too_long";
  assert_int_equal(dlx_invoke_run_checked(&inv, &proof), -1);
  assert_string_equal(inv.error_kind, "ValueError");
  assert_string_equal(inv.error, too_long_words);
  /* nor is one of another dtype or device, or a result more than declared */
  const struct {
    dlx_kernel_fn fn;
    const char *kind, *words;
  } others[] = {
      {as_f64, "TypeError", "result 0 must be f32[n] with n=3 (from 'x'), got f64[3]"},
      {on_device_1, "ValueError", "(the call's device), got f32[3] on cpu:1"},
      {twice, "RuntimeError", "returned more than the 1 result(s) its signature declares"},
  };
  for (size_t k = 0; k < sizeof others / sizeof others[0]; ++k) {
    inv.fn = others[k].fn;
    assert_int_equal(dlx_invoke_run_checked(&inv, &proof), -1);
    assert_string_equal(inv.error_kind, others[k].kind);
    assert_non_null(strstr(inv.error, others[k].words));
  }
  inv.fn = too_long;
  proof.results = 0;
  assert_int_equal(dlx_invoke_run_checked(&inv, &proof), -1);
  assert_string_equal(inv.error, too_long_words);
  /* an out buffer the caller left NULL is refused, proved or not, never read */
  out[0] = NULL;
  inv.fn = scale;
  for (proof.results = 0; proof.results < 2; ++proof.results) {
    assert_int_equal(dlx_invoke_run_checked(&inv, &proof), -1);
    assert_string_equal(inv.error_kind, "RuntimeError");
    assert_non_null(strstr(inv.error, "result 0: the caller's out buffer is NULL"));
  }
  out[0] = &y;
  /* an out buffer that does not meet its result is not proved */
  y.shape = &n4;
  assert_int_equal(dlx_invoke_check(&inv, &proof), 0);
  assert_int_equal(proof.results, 0);
  dlx_sig_free(s);
  /* nor one that binds a symbol (a result-only m): dlx_size(m) stays unbound until then */
  s = plan("x: f32[n] -> f32[m]");
  dlx_invoke inv2 = {.fn = scale, .plan = s, .name = "k", .args = args, .nargs = 1,
                     .out = out, .nout = 1};
  assert_int_equal(dlx_invoke_check(&inv2, &proof), 0);
  assert_int_equal(proof.results, 0);
  dlx_sig_free(s);
}

/* x: f32[n] -> f32[m]: a result of 5 elements, then m and n read back */
static int64_t m_read, n_read;
static int result_then_sizes(dlx_call *call) {
  DLTensor *x, *y;
  int64_t five = 5;
  return dlx_arg_tensor(call, 0, &x) ||
         dlx_return_new_tensor(call, x->device, 1, &five, x->dtype, &y) ||
         dlx_size(call, "m", &m_read) || dlx_size(call, "n", &n_read);
}

/* A call on a proof reads the proof's symbols in place (they are not copied per call); a
 * result that binds one binds it in the call alone: the proof, shared by every later call,
 * keeps it unbound. */
static void test_proof_symbols_not_written(void **state) {
  (void)state;
  dlx_sig *s = plan("x: f32[n] -> f32[m]");
  float xd[3] = {1, 2, 3}, yd[5] = {0};
  int64_t n3 = 3, n5 = 5;
  DLTensor x = tensor(xd, &n3, 1, f32), y = tensor(yd, &n5, 1, f32), *out[1] = {&y};
  dlx_arg args[1] = {{.kind = DLX_ARG_TENSOR, .value.tensor = &x}};
  dlx_invoke inv = {.fn = result_then_sizes, .plan = s, .name = "k", .args = args, .nargs = 1,
                    .out = out, .nout = 1};
  dlx_invoke_proof proof;
  assert_int_equal(dlx_invoke_check(&inv, &proof), 0);
  const int32_t m = dlx_sig_symbol_index(s, "m"), n = dlx_sig_symbol_index(s, "n");
  assert_true(m >= 0 && n >= 0);
  assert_int_equal(proof.value[m], -1);
  for (int run = 0; run < 2; ++run) {
    m_read = n_read = 0;
    assert_int_equal(dlx_invoke_run_checked(&inv, &proof), 0);
    assert_int_equal(m_read, 5);
    assert_int_equal(n_read, 3);
    assert_int_equal(proof.value[m], -1); /* the call's, not the proof's */
    assert_int_equal(proof.value[n], 3);
  }
  dlx_sig_free(s);
}

static void test_api_struct(void **state) {
  (void)state;
  assert_int_equal(dlx_invoke_api_v1.version, DLX_INVOKE_API_VERSION);
  assert_int_equal(dlx_invoke_api_v1.size, sizeof(dlx_invoke_api));
  assert_ptr_equal(dlx_invoke_api_v1.run, dlx_invoke_run);
  assert_ptr_equal(dlx_invoke_api_v1.check, dlx_invoke_check);
  assert_ptr_equal(dlx_invoke_api_v1.run_checked, dlx_invoke_run_checked);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_preallocated_result),
      cmocka_unit_test(test_proof_results),
      cmocka_unit_test(test_checked_before_the_kernel),
      cmocka_unit_test(test_mut_floats_of_ints_and_stream),
      cmocka_unit_test(test_scalar_results_and_errors),
      cmocka_unit_test(test_result_counts),
      cmocka_unit_test(test_bind_from_attributes),
      cmocka_unit_test(test_check_then_run_checked),
      cmocka_unit_test(test_proof_symbols_not_written),
      cmocka_unit_test(test_api_struct),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
