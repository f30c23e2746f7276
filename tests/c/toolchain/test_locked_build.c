/* test_locked_build.c - dlx_locked_build.c: lock, keep a valid library, rebuild a known-bad one, publish
 * sealed, surface compiler output. The "compiler" is a shell one-liner that copies a
 * real ELF to its -o argument, so no C++ toolchain time is spent. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "dlx_locked_build.h"
#include "dlx_seal.h"

/* Copies /bin/true to the path after -o and counts runs in $dir/runs. */
#define FAKE_CXX                                                                        \
  "sh -c 'while [ \"$1\" != -o ]; do shift; done; cp /bin/true \"$2\"; echo ran >> %s/runs' --"

static char dir[64];
static char cxx[512];

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/dlx-build-XXXXXX");
  assert_non_null(mkdtemp(dir));
  snprintf(cxx, sizeof cxx, FAKE_CXX, dir);
  return 0;
}

static int runs(void) {
  char path[128], line[16];
  snprintf(path, sizeof path, "%s/runs", dir);
  FILE *f = fopen(path, "r");
  int n = 0;
  while (f && fgets(line, sizeof line, f)) ++n;
  if (f) fclose(f);
  return n;
}

static int lines;
static void count_line(void *ctx, const char *line) {
  (void)ctx;
  assert_non_null(strstr(line, "building"));
  ++lines;
}

static void test_build_keep_and_rebuild(void **state) {
  (void)state;
  char final[128], err[512];
  snprintf(final, sizeof final, "%s/libx.so", dir);
  dlx_compile_spec s = {.cxx = cxx, .source = "/dev/null"};
  dlx_build_result r;
  assert_int_equal(dlx_addon_build(final, &s, 0, count_line, NULL, &r, err, sizeof err), 0);
  free(r.output);
  assert_int_equal(r.built, 1);
  assert_int_equal(runs(), 1);
  assert_int_equal(lines, 1);
  assert_int_equal(dlx_seal_check(final, err, sizeof err), 1);
  struct stat st;
  assert_int_equal(lstat(final, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0755);
  /* valid: kept */
  assert_int_equal(dlx_addon_build(final, &s, 0, count_line, NULL, &r, err, sizeof err), 0);
  free(r.output);
  assert_int_equal(r.built, 0);
  assert_int_equal(runs(), 1);
  /* the caller could not load that very file: rebuilt */
  assert_int_equal(dlx_addon_build(final, &s, (uint64_t)st.st_ino, NULL, NULL, &r, err,
                                   sizeof err), 0);
  free(r.output);
  assert_int_equal(r.built, 1);
  assert_int_equal(runs(), 2);
  /* truncated: rebuilt */
  assert_int_equal(truncate(final, 100), 0);
  assert_int_equal(dlx_addon_build(final, &s, 0, NULL, NULL, &r, err, sizeof err), 0);
  free(r.output);
  assert_int_equal(r.built, 1);
  assert_int_equal(runs(), 3);
}

static void test_compiler_failure(void **state) {
  (void)state;
  char final[128], err[512];
  snprintf(final, sizeof final, "%s/liby.so", dir);
  dlx_compile_spec s = {.cxx = "sh -c 'echo bad-flag-x >&2; exit 4' --", .source = "/dev/null"};
  dlx_build_result r;
  assert_int_equal(dlx_addon_build(final, &s, 0, NULL, NULL, &r, err, sizeof err), -1);
  assert_int_equal(r.status, 4);
  assert_non_null(r.output);
  assert_non_null(strstr(r.output, "bad-flag-x"));
  assert_non_null(strstr(err, "status 4"));
  free(r.output);
  assert_int_equal(access(final, F_OK), -1); /* nothing published */
}

static int teardown(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  return system(cmd) == 0 ? 0 : -1;
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_build_keep_and_rebuild),
                                     cmocka_unit_test(test_compiler_failure)};
  return cmocka_run_group_tests(tests, setup, teardown);
}
