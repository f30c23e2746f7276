/* dlx_package_check: an AOTInductor package's "dlx.digest.<ns>" metadata against the
 * libraries this process registered (dlx_torch_check_package's decision). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "dlx_package_check.h"

#define A64 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define B64 "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

static const dlx_registered_ns kRegs[] = {{"ops", A64, "/lib/libops.so"},
                                          {"other", B64, "/lib/libother.so"}};

static int check1(const char *key, const char *value, char *err, size_t errlen) {
  const char *keys[] = {"AOTI_DEVICE_KEY", key}, *values[] = {"cpu", value};
  return dlx_package_check(keys, NULL, values, NULL, 2, kRegs, 2, err, errlen);
}

static void test_matching_digests_pass(void **state) {
  (void)state;
  char err[512];
  const char *keys[] = {"dlx.digest.ops", "dlx.digest.other", DLX_MANIFEST_KEY, "AOTI_DEVICE_KEY"};
  const char *values[] = {A64, B64, "{...}", "cpu"};
  assert_int_equal(dlx_package_check(keys, NULL, values, NULL, 4, kRegs, 2, err, sizeof err), 0);
  assert_string_equal(err, "");
}

static void test_plain_package_passes(void **state) {
  (void)state;
  char err[64];
  const char *keys[] = {"AOTI_DEVICE_KEY", "dlx.digestive", DLX_MANIFEST_KEY};
  const char *values[] = {"cpu", "x", DLX_EMPTY_MANIFEST};
  assert_int_equal(dlx_package_check(keys, NULL, values, NULL, 3, NULL, 0, err, sizeof err), 0);
  assert_int_equal(dlx_package_check(NULL, NULL, NULL, NULL, 0, NULL, 0, err, sizeof err), 0);
}

static void test_other_library_is_refused_naming_both(void **state) {
  (void)state;
  char err[512];
  assert_int_equal(check1("dlx.digest.ops", B64, err, sizeof err), -1);
  assert_non_null(strstr(err, "namespace 'ops'"));
  assert_non_null(strstr(err, "sha256 " B64));
  assert_non_null(strstr(err, "/lib/libops.so (sha256 " A64 ")"));
}

static void test_unregistered_namespace_is_refused(void **state) {
  (void)state;
  char err[512];
  assert_int_equal(check1("dlx.digest.op", A64, err, sizeof err), -1); /* a prefix is not it */
  assert_non_null(strstr(err, "no library is registered under 'op'"));
  assert_int_equal(dlx_package_check((const char *[]){"dlx.digest.ops"}, NULL,
                                     (const char *[]){A64}, NULL, 1, NULL, 0, err, sizeof err),
                   -1);
}

static void test_malformed_values_are_refused(void **state) {
  (void)state;
  char err[512];
  const char *bad[] = {"", "unknown", A64 "a",
                       "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
                       "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaag"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; ++i) {
    assert_int_equal(check1("dlx.digest.ops", bad[i], err, sizeof err), -1);
    assert_non_null(strstr(err, "not a sha256"));
  }
  assert_int_equal(check1("dlx.digest.ops", NULL, err, sizeof err), -1);
  /* a NUL inside the value (lengths given): refused, not read as its first 64 bytes */
  char nul[66];
  memcpy(nul, A64, 64);
  nul[64] = '\0', nul[65] = 'x';
  const char *keys[] = {"dlx.digest.ops"}, *values[] = {nul};
  size_t klen[] = {14}, vlen[] = {66};
  assert_int_equal(dlx_package_check(keys, klen, values, vlen, 1, kRegs, 2, err, sizeof err), -1);
  vlen[0] = 64;
  assert_int_equal(dlx_package_check(keys, klen, values, vlen, 1, kRegs, 2, err, sizeof err), 0);
  /* a huge value: refused, its message bounded and printable */
  static char huge[1 << 20];
  memset(huge, 'a', sizeof huge - 1);
  huge[100] = '\n';
  assert_int_equal(check1("dlx.digest.ops", huge, err, sizeof err), -1);
  assert_true(strlen(err) < 400 && !strchr(err, '\n'));
}

static void test_malformed_keys_are_refused(void **state) {
  (void)state;
  char err[512];
  const char *bad[] = {"dlx.digest.", "dlx.digest.1ops", "dlx.digest.o-ps", "dlx.digest.ops\x01"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; ++i) {
    assert_int_equal(check1(bad[i], A64, err, sizeof err), -1);
    assert_non_null(strstr(err, "does not name a namespace"));
    assert_null(strchr(err, '\x01'));
  }
  char longns[300] = "dlx.digest.";
  memset(longns + 11, 'o', 280);
  assert_int_equal(check1(longns, A64, err, sizeof err), -1);
  const char *keys[] = {"dlx.digest.ops"}, *values[] = {A64};
  size_t klen[] = {15}, vlen[] = {64}; /* the key's NUL inside its length */
  assert_int_equal(dlx_package_check(keys, klen, values, vlen, 1, kRegs, 2, err, sizeof err), -1);
  assert_int_equal(dlx_package_check(NULL, NULL, values, NULL, 1, kRegs, 2, err, sizeof err), -1);
}

static void test_manifest_without_digests_is_refused(void **state) {
  (void)state;
  char err[512];
  const char *keys[] = {DLX_MANIFEST_KEY};
  const char *values[] = {"{\"format\": 1, \"namespaces\": {\"ops\": {}}}"};
  assert_int_equal(dlx_package_check(keys, NULL, values, NULL, 1, kRegs, 2, err, sizeof err), -1);
  assert_non_null(strstr(err, "no dlx.digest.<namespace> entries"));
}

static void test_small_err_buffers(void **state) {
  (void)state;
  char err[8];
  assert_int_equal(check1("dlx.digest.ops", B64, err, sizeof err), -1);
  assert_int_equal(strlen(err), 7);
  assert_int_equal(check1("dlx.digest.ops", B64, NULL, 0), -1);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_matching_digests_pass),
                                     cmocka_unit_test(test_plain_package_passes),
                                     cmocka_unit_test(test_other_library_is_refused_naming_both),
                                     cmocka_unit_test(test_unregistered_namespace_is_refused),
                                     cmocka_unit_test(test_malformed_values_are_refused),
                                     cmocka_unit_test(test_malformed_keys_are_refused),
                                     cmocka_unit_test(test_manifest_without_digests_is_refused),
                                     cmocka_unit_test(test_small_err_buffers)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
