/* Inputs the fuzz targets (tests/fuzz) found, kept as unit tests: each failed, under
 * `make sanitize` or by its value, before its fix. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "dlx_core.h"

/* fuzz_layout: a never-stepped dimension (extent 1) with a stride that is not a multiple
 * of the item size gets the compact stride, the product of the extents after it; claimed
 * extents whose product overflows int64 made that product undefined behaviour. */
static void test_strides_from_bytes_extents_overflow(void **state) {
  (void)state;
  int64_t shape[3] = {1, INT64_C(1) << 40, INT64_C(1) << 40}, bytes[3] = {3, 8, 8}, s[3];
  int32_t bad = -1;
  assert_int_equal(dlx_strides_from_bytes(3, shape, bytes, 8, s, &bad), 0);
  assert_true(s[0] == INT64_MAX); /* saturated: the dimension is never stepped */
  assert_int_equal(s[1], 1);
  assert_int_equal(s[2], 1);
  int64_t fits[3] = {1, 1 << 20, 1 << 20};
  assert_int_equal(dlx_strides_from_bytes(3, fits, bytes, 8, s, &bad), 0);
  assert_true(s[0] == INT64_C(1) << 40); /* unchanged where nothing overflows */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_strides_from_bytes_extents_overflow),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
