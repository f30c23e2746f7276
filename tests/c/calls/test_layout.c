/* dlx_layout.c: itemsizes, compact strides, byte→element strides, buffer formats. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "dlx_core.h"

static void test_itemsize(void **state) {
  (void)state;
  assert_int_equal(dlx_dtype_itemsize((DLDataType){kDLFloat, 32, 1}), 4);
  assert_int_equal(dlx_dtype_itemsize((DLDataType){kDLFloat, 32, 4}), 16);
  assert_int_equal(dlx_dtype_itemsize((DLDataType){kDLBool, 8, 1}), 1);
  assert_int_equal(dlx_dtype_itemsize((DLDataType){kDLFloat4_e2m1fn, 4, 1}), 0);
  assert_int_equal(dlx_dtype_itemsize((DLDataType){kDLFloat, 0, 1}), 0);
}

static void test_compact_strides(void **state) {
  (void)state;
  int64_t shape[3] = {2, 3, 4}, s[3];
  dlx_compact_strides(3, shape, s);
  assert_int_equal(s[0], 12);
  assert_int_equal(s[1], 4);
  assert_int_equal(s[2], 1);
  int64_t empty[3] = {2, 0, 4};
  dlx_compact_strides(3, empty, s);
  assert_int_equal(s[0], 4); /* a zero extent does not zero the outer strides */
  assert_int_equal(s[1], 4);
}

/* A producer's shape is untrusted: a stride past int64 is refused, never wrapped (UB). */
static void test_compact_strides_overflow(void **state) {
  (void)state;
  int64_t huge[3] = {2, INT64_C(1) << 40, INT64_C(1) << 40}, s[3];
  assert_int_equal(dlx_compact_strides(3, huge, s), -1);
  assert_int_equal(s[2], 1);
  assert_int_equal(s[1], INT64_C(1) << 40);
  assert_int_equal(s[0], INT64_MAX); /* saturated */
  /* the outermost extent is never multiplied in: these strides all fit */
  int64_t wide[2] = {INT64_MAX, 3};
  assert_int_equal(dlx_compact_strides(2, wide, s), 0);
  assert_int_equal(s[0], 3);
  /* an empty tensor is never stepped: saturated strides are harmless */
  int64_t empty[3] = {0, INT64_C(1) << 40, INT64_C(1) << 40};
  assert_int_equal(dlx_compact_strides(3, empty, s), 0);
  int64_t one[3] = {1, INT64_C(1) << 62, 8}, b[3] = {3, 8, 8};
  int32_t bad = -1;
  assert_int_equal(dlx_strides_from_bytes(3, one, b, 8, s, &bad), 0);
  assert_int_equal(s[0], INT64_MAX); /* 3 % 8: the compact stride, saturated */
}

static void test_strides_from_bytes(void **state) {
  (void)state;
  int64_t shape[2] = {3, 4}, bytes[2] = {32, -8}, s[2];
  int32_t bad = -1;
  assert_int_equal(dlx_strides_from_bytes(2, shape, bytes, 8, s, &bad), 0);
  assert_int_equal(s[0], 4);
  assert_int_equal(s[1], -1);
  int64_t odd[2] = {32, 6};
  assert_int_equal(dlx_strides_from_bytes(2, shape, odd, 4, s, &bad), -1);
  assert_int_equal(bad, 1);
  /* extent 1: never stepped, an arbitrary stride is replaced by the compact one */
  int64_t one[2] = {1, 4}, junk[2] = {3, 8};
  assert_int_equal(dlx_strides_from_bytes(2, one, junk, 8, s, &bad), 0);
  assert_int_equal(s[0], 4);
  assert_int_equal(s[1], 1);
  assert_int_equal(dlx_strides_from_bytes(2, shape, bytes, 0, s, &bad), -1);
}

static void test_device_type_names(void **state) {
  (void)state;
  assert_string_equal(dlx_device_type_name(kDLCUDA), "cuda");
  assert_string_equal(dlx_device_type_name(kDLExtDev), "ext_dev");
  assert_string_equal(dlx_device_type_name(kDLTPUHost), "tpu_host");
  assert_null(dlx_device_type_name(5)); /* unassigned */
  assert_null(dlx_device_type_name(0));
  assert_null(dlx_device_type_name(-1));
  assert_null(dlx_device_type_name(1000));
}

static void check_format(const char *fmt, int64_t itemsize, int code, int bits) {
  DLDataType t;
  char err[128];
  assert_int_equal(dlx_dtype_from_buffer_format(fmt, itemsize, &t, err, sizeof err), 0);
  assert_int_equal(t.code, code);
  assert_int_equal(t.bits, bits);
  assert_int_equal(t.lanes, 1);
}

static void test_buffer_formats(void **state) {
  (void)state;
  check_format(NULL, 1, kDLUInt, 8);
  check_format("B", 1, kDLUInt, 8);
  check_format("b", 1, kDLInt, 8);
  check_format("<i", 4, kDLInt, 32);
  check_format("@q", 8, kDLInt, 64);
  check_format("f", 4, kDLFloat, 32);
  check_format("e", 2, kDLFloat, 16);
  check_format("Zd", 16, kDLComplex, 128);
  check_format("?", 1, kDLBool, 8);
  check_format(">B", 1, kDLUInt, 8); /* one byte has no byte order */
  DLDataType t;
  char err[128];
  assert_int_equal(dlx_dtype_from_buffer_format(">i", 4, &t, err, sizeof err), -1);
  assert_non_null(strstr(err, "non-native byte order"));
  assert_int_equal(dlx_dtype_from_buffer_format("T{i:a:}", 4, &t, err, sizeof err), -1);
  assert_non_null(strstr(err, "unsupported"));
  assert_int_equal(dlx_dtype_from_buffer_format("ii", 8, &t, err, sizeof err), -1);
  assert_int_equal(dlx_dtype_from_buffer_format("Zi", 8, &t, err, sizeof err), -1);
  assert_int_equal(dlx_dtype_from_buffer_format("O", 8, &t, err, sizeof err), -1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_itemsize), cmocka_unit_test(test_compact_strides),
      cmocka_unit_test(test_compact_strides_overflow),
      cmocka_unit_test(test_strides_from_bytes), cmocka_unit_test(test_buffer_formats),
      cmocka_unit_test(test_device_type_names)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
