/* test_stream.c - which source gives a call's stream, and DLPack's stream integers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "dlx_stream.h"

static dlx_stream_source choose(int has_device, int override_active, int table, int deferred,
                                int provider) {
  dlx_stream_facts f = {has_device, override_active, table, deferred, provider};
  return dlx_stream_choose(&f);
}

static void test_order_of_sources(void **state) {
  (void)state;
  /* every combination: the CPU has no stream; then override > table > provider > default,
   * the last two only for a producer waiting for its stream */
  for (int bits = 0; bits < 16; ++bits) {
    int o = bits & 1, t = (bits >> 1) & 1, d = (bits >> 2) & 1, p = (bits >> 3) & 1;
    assert_int_equal(choose(0, o, t, d, p), DLX_STREAM_NONE);
    dlx_stream_source want = o   ? DLX_STREAM_OVERRIDE
                             : t ? DLX_STREAM_TABLE
                             : !d ? DLX_STREAM_NONE
                             : p ? DLX_STREAM_PROVIDER
                                 : DLX_STREAM_DEFAULT;
    assert_int_equal(choose(1, o, t, d, p), want);
  }
}

static void test_source_names(void **state) {
  (void)state;
  assert_string_equal(dlx_stream_source_name(DLX_STREAM_NONE), "none");
  assert_string_equal(dlx_stream_source_name(DLX_STREAM_OVERRIDE), "override");
  assert_string_equal(dlx_stream_source_name(DLX_STREAM_TABLE), "table");
  assert_string_equal(dlx_stream_source_name(DLX_STREAM_PROVIDER), "provider");
  assert_string_equal(dlx_stream_source_name(DLX_STREAM_DEFAULT), "default");
  assert_string_equal(dlx_stream_source_name((dlx_stream_source)99), "unknown");
}

static void test_default_handles(void **state) {
  (void)state;
  assert_int_equal(dlx_stream_default_handle(kDLCUDA), 2); /* cudaStreamPerThread */
  assert_int_equal(dlx_stream_default_handle(kDLCUDAManaged), 2);
  assert_int_equal(dlx_stream_default_handle(kDLROCM), 0); /* DLPack: no per-thread one */
  assert_int_equal(dlx_stream_default_handle(kDLExtDev), 0);
  assert_int_equal(dlx_stream_default_handle(kDLCPU), 0);
}

static int arg(DLDeviceType t, uintptr_t handle, uint64_t *out) {
  *out = 12345;
  return dlx_stream_dlpack_arg(t, handle, out);
}

static void test_cuda_integers(void **state) {
  (void)state;
  uint64_t v;
  assert_int_equal(arg(kDLCUDA, 0, &v), DLX_DLPACK_STREAM);
  assert_int_equal(v, 1); /* NULL: the legacy default stream; 0 is not allowed */
  assert_int_equal(arg(kDLCUDA, 1, &v), DLX_DLPACK_STREAM);
  assert_int_equal(v, 1);
  assert_int_equal(arg(kDLCUDA, 2, &v), DLX_DLPACK_STREAM);
  assert_int_equal(v, 2);
  assert_int_equal(arg(kDLCUDA, 0x7f0012345600u, &v), DLX_DLPACK_STREAM);
  assert_int_equal(v, 0x7f0012345600);
  assert_int_equal(arg(kDLCUDAManaged, 0, &v), DLX_DLPACK_STREAM);
  assert_int_equal(v, 1);
  /* handles >= 2**63 stay unsigned: negative, DLPack's -1 would mean "no synchronization" */
  assert_int_equal(arg(kDLCUDA, UINTPTR_MAX, &v), DLX_DLPACK_STREAM);
  assert_true(v == UINT64_MAX);
  assert_int_equal(arg(kDLROCM, (uintptr_t)1 << 63, &v), DLX_DLPACK_STREAM);
  assert_true(v == (uint64_t)1 << 63);
}

static void test_rocm_integers(void **state) {
  (void)state;
  uint64_t v;
  assert_int_equal(arg(kDLROCM, 0, &v), DLX_DLPACK_STREAM);
  assert_int_equal(v, 0); /* ROCm's default stream */
  assert_int_equal(arg(kDLROCM, 1, &v), DLX_DLPACK_BAD_STREAM);
  assert_int_equal(arg(kDLROCM, 2, &v), DLX_DLPACK_BAD_STREAM);
  assert_int_equal(arg(kDLROCM, 3, &v), DLX_DLPACK_STREAM);
  assert_int_equal(v, 3);
}

static void test_no_stream_for_host_memory(void **state) {
  (void)state;
  uint64_t v;
  DLDeviceType host[] = {kDLCPU, kDLCUDAHost, kDLROCMHost};
  for (size_t i = 0; i < sizeof host / sizeof host[0]; ++i) {
    assert_int_equal(arg(host[i], 0, &v), DLX_DLPACK_NO_STREAM);
    assert_int_equal(arg(host[i], 0x1000, &v), DLX_DLPACK_NO_STREAM);
    assert_int_equal(v, 12345); /* untouched */
  }
}

static void test_other_devices_pass_the_handle(void **state) {
  (void)state;
  uint64_t v;
  assert_int_equal(arg(kDLExtDev, 0, &v), DLX_DLPACK_NO_STREAM);
  assert_int_equal(arg(kDLExtDev, 0xabc0, &v), DLX_DLPACK_STREAM);
  assert_int_equal(v, 0xabc0);
  assert_int_equal(arg(kDLOneAPI, 1, &v), DLX_DLPACK_STREAM);
  assert_int_equal(v, 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_order_of_sources),    cmocka_unit_test(test_source_names),
      cmocka_unit_test(test_default_handles),     cmocka_unit_test(test_cuda_integers),
      cmocka_unit_test(test_rocm_integers),       cmocka_unit_test(test_no_stream_for_host_memory),
      cmocka_unit_test(test_other_devices_pass_the_handle),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
