/* test_addon_args.c - `python -m dlx build-addon` argument rules. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "dlx_addon_args.h"

#define ARGC(a) ((int)(sizeof(a) / sizeof((a)[0])))

static char err[512];

static int parse(int argc, const char *const *argv, dlx_platform p, dlx_build_args *out) {
  memset(err, 0, sizeof err);
  memset(out, 0x5a, sizeof *out);
  return dlx_build_args_parse(argc, argv, p, out, err, sizeof err);
}

static void expect_ok(int argc, const char *const *argv, dlx_backend want, int given,
                      const char *dir) {
  dlx_build_args a;
  assert_int_equal(parse(argc, argv, DLX_PLATFORM_LINUX, &a), 0);
  assert_int_equal(a.backend, want);
  assert_int_equal(a.backend_given, given);
  if (dir)
    assert_string_equal(a.output_dir, dir);
  else
    assert_null(a.output_dir);
}

/* Fails on `p` with an error containing both `m1` and `m2` (m2 may be NULL). */
static void expect_err(int argc, const char *const *argv, dlx_platform p, const char *m1,
                       const char *m2) {
  dlx_build_args a;
  assert_int_equal(parse(argc, argv, p, &a), -1);
  if (!strstr(err, m1) || (m2 && !strstr(err, m2)))
    fail_msg("error '%s' should mention '%s' and '%s'", err, m1, m2 ? m2 : "");
}

static void test_empty(void **state) {
  (void)state;
  expect_ok(0, NULL, DLX_BACKEND_CPU, 0, NULL);
}

static void test_backend_option(void **state) {
  (void)state;
  static const struct {
    const char *name;
    dlx_backend b;
  } cases[] = {{"cpu", DLX_BACKEND_CPU},          {"cuda", DLX_BACKEND_CUDA},
               {"rocm", DLX_BACKEND_ROCM},        {"torch_npu", DLX_BACKEND_TORCH_NPU},
               {"ascend", DLX_BACKEND_TORCH_NPU}, {"npu", DLX_BACKEND_TORCH_NPU}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    const char *sep[] = {"--backend", cases[i].name};
    expect_ok(2, sep, cases[i].b, 1, NULL);
    char joined[64];
    snprintf(joined, sizeof joined, "--backend=%s", cases[i].name);
    const char *eq[] = {joined};
    expect_ok(1, eq, cases[i].b, 1, NULL);
  }
  const char *bad[] = {"--backend", "metal"};
  expect_err(ARGC(bad), bad, DLX_PLATFORM_LINUX, "'metal'", "cpu, cuda, rocm, torch_npu");
  const char *bad_eq[] = {"--backend=tpu"};
  expect_err(ARGC(bad_eq), bad_eq, DLX_PLATFORM_LINUX, "'tpu'", NULL);
}

static void test_build_with_flags(void **state) {
  (void)state;
  const char *c[] = {"--build-with-cuda"};
  expect_ok(1, c, DLX_BACKEND_CUDA, 1, NULL);
  const char *r[] = {"--build-with-rocm"};
  expect_ok(1, r, DLX_BACKEND_ROCM, 1, NULL);
  const char *n[] = {"--build-with-torch-npu"};
  expect_ok(1, n, DLX_BACKEND_TORCH_NPU, 1, NULL);
  const char *a[] = {"--build-with-ascend"};
  expect_ok(1, a, DLX_BACKEND_TORCH_NPU, 1, NULL);
  /* the very same option twice is not a conflict */
  const char *twice[] = {"--build-with-rocm", "--build-with-rocm"};
  expect_ok(2, twice, DLX_BACKEND_ROCM, 1, NULL);
  const char *twice_b[] = {"--backend", "cuda", "--backend=cuda"};
  expect_ok(3, twice_b, DLX_BACKEND_CUDA, 1, NULL);
}

static void test_mutually_exclusive(void **state) {
  (void)state;
  const char *a[] = {"--build-with-cuda", "--build-with-rocm"};
  expect_err(ARGC(a), a, DLX_PLATFORM_LINUX,
             "--build-with-cuda and --build-with-rocm are mutually exclusive", NULL);
  /* the two spellings of torch_npu still conflict: one option, please */
  const char *b[] = {"--build-with-torch-npu", "--build-with-ascend"};
  expect_err(ARGC(b), b, DLX_PLATFORM_LINUX, "--build-with-torch-npu", "--build-with-ascend");
  /* --build-with-* plus --backend, even when they agree */
  const char *c[] = {"--build-with-cuda", "--backend", "cuda"};
  expect_err(ARGC(c), c, DLX_PLATFORM_LINUX, "--build-with-cuda", "--backend cuda");
  const char *d[] = {"--backend=rocm", "--build-with-rocm"};
  expect_err(ARGC(d), d, DLX_PLATFORM_LINUX, "--backend rocm", "--build-with-rocm");
  const char *e[] = {"--backend", "cpu", "--backend", "cuda"};
  expect_err(ARGC(e), e, DLX_PLATFORM_LINUX, "--backend cpu", "--backend cuda");
  assert_non_null(strstr(err, "mutually exclusive"));
  const char *f[] = {"--build-with-rocm", "--output-dir", "/x", "--build-with-ascend"};
  expect_err(ARGC(f), f, DLX_PLATFORM_LINUX, "--build-with-rocm", "--build-with-ascend");
}

static void test_npu_only_on_linux(void **state) {
  (void)state;
  const dlx_platform ps[] = {DLX_PLATFORM_WINDOWS, DLX_PLATFORM_MACOS};
  for (size_t i = 0; i < 2; ++i) {
    const char *a[] = {"--build-with-torch-npu"};
    expect_err(1, a, ps[i], "torch_npu is only supported on Linux", "--build-with-torch-npu");
    const char *b[] = {"--build-with-ascend"};
    expect_err(1, b, ps[i], "torch_npu is only supported on Linux", "--build-with-ascend");
    const char *c[] = {"--backend", "torch_npu"};
    expect_err(2, c, ps[i], "torch_npu is only supported on Linux", NULL);
    const char *d[] = {"--backend=ascend"};
    expect_err(1, d, ps[i], "torch_npu is only supported on Linux", "--backend ascend");
    const char *e[] = {"--backend=npu"};
    expect_err(1, e, ps[i], "torch_npu is only supported on Linux", dlx_platform_name(ps[i]));
    /* the others build there */
    dlx_build_args out;
    const char *ok[] = {"--build-with-cuda"};
    assert_int_equal(parse(1, ok, ps[i], &out), 0);
    assert_int_equal(out.backend, DLX_BACKEND_CUDA);
  }
}

static void test_output_dir(void **state) {
  (void)state;
  const char *a[] = {"--output-dir", "/tmp/out"};
  expect_ok(2, a, DLX_BACKEND_CPU, 0, "/tmp/out");
  const char *b[] = {"--output-dir=/tmp/o2"};
  expect_ok(1, b, DLX_BACKEND_CPU, 0, "/tmp/o2");
  /* a folder with a space survives intact, options after it still count */
  const char *d[] = {"--output-dir", "with space", "--build-with-rocm"};
  expect_ok(3, d, DLX_BACKEND_ROCM, 1, "with space");
  /* the pointer is argv's own */
  dlx_build_args out;
  assert_int_equal(parse(2, a, DLX_PLATFORM_LINUX, &out), 0);
  assert_ptr_equal(out.output_dir, a[1]);

  const char *missing[] = {"--output-dir"};
  expect_err(1, missing, DLX_PLATFORM_LINUX, "--output-dir", NULL);
  const char *empty[] = {"--output-dir="};
  expect_err(1, empty, DLX_PLATFORM_LINUX, "--output-dir", NULL);
  /* the next option is not swallowed as the folder */
  const char *swallow[] = {"--output-dir", "--build-with-cuda"};
  expect_err(2, swallow, DLX_PLATFORM_LINUX, "--output-dir needs a folder", NULL);
  const char *twice[] = {"--output-dir", "/a", "--output-dir=/b"};
  expect_err(3, twice, DLX_PLATFORM_LINUX, "'/a'", "'/b'");
}

static void test_unknown_and_missing(void **state) {
  (void)state;
  const char *a[] = {"--build-with-metal"};
  expect_err(1, a, DLX_PLATFORM_LINUX, "unknown option '--build-with-metal'", NULL);
  const char *b[] = {"--output-directory=/x"};
  expect_err(1, b, DLX_PLATFORM_LINUX, "'--output-directory=/x'", NULL);
  const char *c[] = {"--backends=cuda"};
  expect_err(1, c, DLX_PLATFORM_LINUX, "'--backends=cuda'", NULL);
  const char *d[] = {"cuda"};
  expect_err(1, d, DLX_PLATFORM_LINUX, "unexpected argument 'cuda'", NULL);
  const char *e[] = {"--backend"};
  expect_err(1, e, DLX_PLATFORM_LINUX, "--backend needs a value", NULL);
  const char *f[] = {"--backend", "--build-with-cuda"};
  expect_err(2, f, DLX_PLATFORM_LINUX, "--backend needs a value", NULL);
  const char *g[] = {"--backend="};
  expect_err(1, g, DLX_PLATFORM_LINUX, "--backend needs a value", NULL);
  const char *h[] = {"-x"};
  expect_err(1, h, DLX_PLATFORM_LINUX, "unknown option '-x'", NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_empty),
      cmocka_unit_test(test_backend_option),
      cmocka_unit_test(test_build_with_flags),
      cmocka_unit_test(test_mutually_exclusive),
      cmocka_unit_test(test_npu_only_on_linux),
      cmocka_unit_test(test_output_dir),
      cmocka_unit_test(test_unknown_and_missing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
