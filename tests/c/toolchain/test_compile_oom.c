/* test_compile_oom.c - running a program when allocations fail (issue 7, item 10).
 * Linked with -Wl,--wrap for malloc/calloc/realloc/free (CMakeLists.txt), so every
 * allocation of dlx's core in this executable can be made to fail, one at a time:
 * each run must then either succeed or report "out of memory", never crash, never
 * exec from a list missing its NULL, and leave nothing allocated. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dlx_compile_command.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);

static long live;     /* allocations not yet freed */
static long fail_at;  /* the allocation (1-based) that fails; 0: none */
static long counted;  /* allocations attempted since the last reset */

static int should_fail(void) { return fail_at && ++counted == fail_at; }

void *__wrap_malloc(size_t n) {
  if (should_fail()) return NULL;
  void *p = __real_malloc(n);
  if (p) ++live;
  return p;
}

void *__wrap_calloc(size_t n, size_t size) {
  if (should_fail()) return NULL;
  void *p = __real_calloc(n, size);
  if (p) ++live;
  return p;
}

void *__wrap_realloc(void *old, size_t n) {
  if (should_fail()) return NULL;
  void *p = __real_realloc(old, n);
  if (p && !old) ++live;
  return p;
}

void __wrap_free(void *p) {
  if (p) --live;
  __real_free(p);
}

static void run_with_each_allocation_failing(char *const *argv) {
  char err[512];
  int succeeded = 0;
  for (long k = 1; k < 200 && !succeeded; ++k) {
    long before = live;
    counted = 0;
    fail_at = k;
    char *out = NULL;
    int status = -1;
    err[0] = '\0';
    int rc = dlx_run_capture(argv, &out, &status, err, sizeof err);
    int injected = counted >= k;
    fail_at = 0;
    if (rc == 0) {
      assert_int_equal(status, 0);
      assert_non_null(out);
      assert_non_null(strstr(out, "ran-ok"));
      free(out);
      succeeded = !injected; /* every allocation point has been tried */
    } else {
      assert_null(out);
      assert_non_null(strstr(err, "out of memory"));
    }
    assert_int_equal(live, before); /* nothing leaked */
  }
  assert_true(succeeded);
}

static void test_oom_searching_path(void **state) {
  (void)state;
  /* several PATH entries before the one that holds sh: each is an allocation */
  setenv("PATH", "/nonexistent/a:/nonexistent/b::/usr/bin:/bin", 1);
  char *argv[] = {"sh", "-c", "echo ran-ok", NULL};
  run_with_each_allocation_failing(argv);
}

static void test_oom_with_a_path(void **state) {
  (void)state;
  char *argv[] = {"/bin/sh", "-c", "echo ran-ok", NULL};
  run_with_each_allocation_failing(argv);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_oom_searching_path),
      cmocka_unit_test(test_oom_with_a_path),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
