/* dlx_kernel_ref.c: a staged call's kernel by content (library sha256, name, declaration),
 * decoded from attributes a saved program carries and matched against registered kernels. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "dlx_kernel_ref.h"

#define LIB_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define LIB_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define DECL "x: f32[n] -> f32[n]"

static dlx_attr str(const char *name, const char *value) {
  return (dlx_attr){name, strlen(name), DLX_ATTR_STR, value, (int64_t)strlen(value)};
}

static int decode(const dlx_attr *a, int32_t n, dlx_kernel_ref *ref, char *err) {
  return dlx_kernel_ref_decode(a, n, ref, err, 600);
}

static const dlx_kernel_key keys[] = {
    {LIB_B, "square", 6, DECL, sizeof DECL - 1, "/tmp/libother.so"}, /* another library's */
    {LIB_A, "neg", 3, DECL, sizeof DECL - 1, NULL},
    {LIB_A, "square", 6, DECL, sizeof DECL - 1, "/tmp/libsq.so"},
};

static void test_decodes_and_finds_by_content(void **state) {
  (void)state;
  dlx_attr a[] = {str("p_k", "1"), str("dlx_lib", LIB_A), str("dlx_name", "square"),
                  str("dlx_decl", DECL), str("dlx_from", "/tmp/libsq.so")};
  dlx_kernel_ref ref;
  char err[600];
  assert_int_equal(decode(a, 5, &ref, err), 0);
  assert_int_equal(ref.name_len, 6);
  assert_int_equal(ref.from_len, 13);
  assert_int_equal(dlx_kernel_ref_find(&ref, keys, 3, err, sizeof err), 2); /* never 0 */
  /* dlx_from is optional (messages only) */
  assert_int_equal(decode(a, 4, &ref, err), 0);
  assert_int_equal(ref.from_len, 0);
}

static void test_not_loaded_and_mismatch(void **state) {
  (void)state;
  dlx_attr a[] = {str("dlx_lib", LIB_A), str("dlx_name", "square"),
                  str("dlx_decl", "x: f64[n] -> f64[n]"), str("dlx_from", "/tmp/libsq.so")};
  dlx_kernel_ref ref;
  char err[600];
  assert_int_equal(decode(a, 4, &ref, err), 0);
  assert_int_equal(dlx_kernel_ref_find(&ref, keys, 3, err, sizeof err), DLX_REF_MISMATCH);
  assert_non_null(strstr(err, "square(): the program was staged with the declaration "
                              "\"x: f64[n] -> f64[n]\""));
  /* the library is registered, not that kernel: maybe registered in part, so the caller
   * may find the rest (NOT_LOADED); the message says what is missing */
  a[1] = str("dlx_name", "cube");
  assert_int_equal(decode(a, 4, &ref, err), 0);
  assert_int_equal(dlx_kernel_ref_find(&ref, keys, 3, err, sizeof err), DLX_REF_NOT_LOADED);
  assert_non_null(strstr(err, "has no declared kernel of that name"));
  a[0] = str("dlx_lib", "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc");
  a[1] = str("dlx_name", "square");
  a[3] = str("dlx_from", "/tmp/elsewhere.so");
  assert_int_equal(decode(a, 4, &ref, err), 0);
  assert_int_equal(dlx_kernel_ref_find(&ref, keys, 3, err, sizeof err), DLX_REF_NOT_LOADED);
  assert_non_null(strstr(err, "(traced from /tmp/elsewhere.so), which this process has not "
                              "loaded"));
  assert_non_null(strstr(err, "a kernel of that name from another library is loaded"));
  /* traced from the file another library was loaded from: it changed since */
  a[3] = str("dlx_from", "/tmp/libother.so");
  assert_int_equal(decode(a, 4, &ref, err), 0);
  assert_int_equal(dlx_kernel_ref_find(&ref, keys, 3, err, sizeof err), DLX_REF_NOT_LOADED);
  assert_non_null(strstr(err, "but /tmp/libother.so, the file it was traced from, is loaded "
                              "here with other content (sha256 " LIB_B "): the library changed"));
  char tiny[8]; /* cut, still terminated */
  assert_int_equal(dlx_kernel_ref_find(&ref, keys, 3, tiny, sizeof tiny), DLX_REF_NOT_LOADED);
  assert_int_equal(strlen(tiny), 7);
}

static void test_bad_attributes_refused(void **state) {
  (void)state;
  dlx_kernel_ref ref;
  char err[600];
  int64_t one = 1;
  dlx_attr a[4] = {str("dlx_lib", LIB_A), str("dlx_name", "square"), str("dlx_decl", DECL)};
  struct {
    int index;
    dlx_attr attr;
    const char *words;
  } cases[] = {
      {0, str("dlx_lib", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"),
       "square(): the call's library digest (attribute dlx_lib) is not a sha256"},
      {0, str("dlx_lib", "abc"), "is not a sha256"},
      {0, str("dlx_other", LIB_A), "dlx_lib) is missing"},
      {1, str("dlx_name", "9lives"), "(attribute dlx_name) is '9lives', not a kernel name"},
      {1, str("dlx_name", ""), "is '', not a kernel name"},
      {1, (dlx_attr){"dlx_name", 8, DLX_ATTR_I64, &one, 1}, "dlx_name) is not a str"},
      {2, str("dlx_decl", ""), "square(): the call's declaration (attribute dlx_decl) is empty"},
      {2, str("dlx_decl", "x\x7f\x01"), "control byte 0x01"},
      {2, str("dlx_name", "square"), "names its kernel twice (attribute dlx_name)"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    dlx_attr b[3];
    memcpy(b, a, sizeof b);
    b[cases[i].index] = cases[i].attr;
    assert_int_equal(decode(b, 3, &ref, err), -1);
    if (!strstr(err, cases[i].words)) fail_msg("case %zu: %s", i, err);
  }
  /* an older dlx's program: said so */
  dlx_attr old[] = {{"dlx_id", 6, DLX_ATTR_I64, &one, 1}, str("dlx_name", "square")};
  assert_int_equal(decode(old, 2, &ref, err), -1);
  assert_non_null(strstr(err, "staged by an older dlx"));
  /* a path with a NUL byte */
  a[3] = (dlx_attr){"dlx_from", 8, DLX_ATTR_STR, "a\0b", 3};
  assert_int_equal(decode(a, 4, &ref, err), -1);
  assert_non_null(strstr(err, "dlx_from) is not a path"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_decodes_and_finds_by_content),
      cmocka_unit_test(test_not_loaded_and_mismatch),
      cmocka_unit_test(test_bad_attributes_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
