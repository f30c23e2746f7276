/* dlx_arg_is_readonly (include/dlx/dlx.h, inline in every kernel) across runtime ABIs: a
 * 1.2 runtime is asked only for a tensor not known read-only; an older runtime, whose
 * dlx_runtime ends before arg_readonly, is never asked (nor is that field read). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "dlx/dlx.h"

static int asked; /* the argument the runtime was last asked about, or -1 */

static int fake_arg_readonly(const dlx_call *call, int32_t i) {
  (void)call;
  asked = i;
  return 1;
}

/* A runtime block of `size` bytes; past `size` it holds a pointer that must not be called. */
static void run(uint32_t size, int expect_read_only_unknown) {
  dlx_runtime rt;
  memset(&rt, 0, sizeof rt);
  rt.abi_version = DLX_ABI_VERSION;
  rt.size = size;
  rt.arg_readonly = fake_arg_readonly; /* an old runtime's bytes past its end: never read */
  DLTensor t = {0};
  dlx_arg args[4] = {
      {.kind = DLX_ARG_TENSOR, .readonly = 0, .value.tensor = &t}, /* flags unknown */
      {.kind = DLX_ARG_TENSOR, .readonly = 1, .value.tensor = &t}, /* known read-only */
      {.kind = DLX_ARG_INT, .readonly = 0, .value.i = 3},
      {.kind = DLX_ARG_NONE},
  };
  dlx_call call = {.rt = &rt, .args = args, .num_args = 4};
  asked = -1;
  assert_int_equal(dlx_arg_is_readonly(&call, 0), expect_read_only_unknown);
  assert_int_equal(asked, expect_read_only_unknown ? 0 : -1);
  asked = -1;
  assert_int_equal(dlx_arg_is_readonly(&call, 1), 1);
  assert_int_equal(dlx_arg_is_readonly(&call, 2), 0);
  assert_int_equal(dlx_arg_is_readonly(&call, 3), 0);
  assert_int_equal(dlx_arg_is_readonly(&call, -1), 0);
  assert_int_equal(dlx_arg_is_readonly(&call, 4), 0);
  assert_int_equal(asked, -1); /* none of those asked the runtime */
}

static void test_a_1_2_runtime_is_asked_for_unknown_flags(void **state) {
  (void)state;
  run((uint32_t)sizeof(dlx_runtime), 1);
}

static void test_a_1_1_runtime_is_never_asked(void **state) {
  (void)state;
  run((uint32_t)offsetof(dlx_runtime, arg_readonly), 0);
}

static void test_a_runtime_without_the_service_is_never_asked(void **state) {
  (void)state;
  dlx_runtime rt;
  memset(&rt, 0, sizeof rt);
  rt.size = sizeof rt; /* 1.2 layout, arg_readonly NULL */
  DLTensor t = {0};
  dlx_arg a = {.kind = DLX_ARG_TENSOR, .value.tensor = &t};
  dlx_call call = {.rt = &rt, .args = &a, .num_args = 1};
  assert_int_equal(dlx_arg_is_readonly(&call, 0), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_a_1_2_runtime_is_asked_for_unknown_flags),
      cmocka_unit_test(test_a_1_1_runtime_is_never_asked),
      cmocka_unit_test(test_a_runtime_without_the_service_is_never_asked),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
