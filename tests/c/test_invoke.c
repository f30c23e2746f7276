/* test_invoke.c - dlx_invoke_run: a kernel called without Python, checked on its plan. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "dlx_invoke.h"

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

static void test_api_struct(void **state) {
  (void)state;
  assert_int_equal(dlx_invoke_api_v1.version, DLX_INVOKE_API_VERSION);
  assert_int_equal(dlx_invoke_api_v1.size, sizeof(dlx_invoke_api));
  assert_ptr_equal(dlx_invoke_api_v1.run, dlx_invoke_run);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_preallocated_result),
      cmocka_unit_test(test_checked_before_the_kernel),
      cmocka_unit_test(test_mut_floats_of_ints_and_stream),
      cmocka_unit_test(test_scalar_results_and_errors),
      cmocka_unit_test(test_result_counts),
      cmocka_unit_test(test_api_struct),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
