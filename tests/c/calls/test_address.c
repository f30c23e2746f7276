/* dlx_address.c: legacy table addresses are checked before they are dereferenced. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include <cmocka.h>

#include "dlx_core.h"

static void test_implausible_addresses(void **state) {
  (void)state;
  char err[160];
  assert_int_equal(dlx_address_plausible(0, 8, 4096, err, sizeof err), -1);
  assert_non_null(strstr(err, "NULL"));
  assert_int_equal(dlx_address_plausible(1, 8, 4096, err, sizeof err), -1);
  assert_non_null(strstr(err, "first page"));
  assert_int_equal(dlx_address_plausible(4088, 8, 4096, err, sizeof err), -1);
  assert_int_equal(dlx_address_plausible(UINT64_MAX, 8, 4096, err, sizeof err), -1);
  assert_non_null(strstr(err, "aligned"));
  assert_int_equal(dlx_address_plausible(0x7f0000001001ull, 8, 4096, err, sizeof err), -1);
  assert_int_equal(dlx_address_plausible(0x7f0000001000ull, 8, 4096, err, sizeof err), 0);
}

static void test_readable_probe(void **state) {
  (void)state;
  static const char data[32] = "mapped";
  assert_int_equal(dlx_address_readable(data, sizeof data), 1);
  assert_int_equal(dlx_address_readable((const void *)(uintptr_t)8, 16), 0);
  /* a page that was mapped and given back */
  void *p = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(p != MAP_FAILED);
  assert_int_equal(dlx_address_readable(p, 64), 1);
  munmap(p, 4096);
  assert_int_equal(dlx_address_readable(p, 64), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_implausible_addresses),
                                     cmocka_unit_test(test_readable_probe)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
