/* dlx_seal.c: a sealed file checks whole; truncation, corruption and no seal do not. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "dlx_seal.h"

static void write_file(const char *path, const char *data, size_t n) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(data, 1, n, f), n);
  fclose(f);
}

static void test_seal_round_trip_and_damage(void **state) {
  (void)state;
  char dir[] = "/tmp/dlx-seal-XXXXXX", path[64], err[256];
  assert_non_null(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/lib.so", dir);
  char body[300];
  for (size_t i = 0; i < sizeof body; ++i) body[i] = (char)(i * 7);
  write_file(path, body, sizeof body);
  assert_int_equal(dlx_seal_check(path, err, sizeof err), 0);
  assert_non_null(strstr(err, "no seal"));
  assert_int_equal(dlx_seal_file(path, err, sizeof err), 0);
  assert_int_equal(dlx_seal_check(path, err, sizeof err), 1);
  /* one flipped byte in the body */
  FILE *f = fopen(path, "r+b");
  fseek(f, 10, SEEK_SET);
  fputc(body[10] ^ 1, f);
  fclose(f);
  assert_int_equal(dlx_seal_check(path, err, sizeof err), 0);
  assert_non_null(strstr(err, "corrupt"));
  /* truncated */
  assert_int_equal(dlx_seal_file(path, err, sizeof err), 0); /* reseal the damaged one */
  assert_int_equal(dlx_seal_check(path, err, sizeof err), 1);
  assert_int_equal(truncate(path, 200), 0);
  assert_int_equal(dlx_seal_check(path, err, sizeof err), 0);
  assert_int_equal(truncate(path, 3), 0);
  assert_int_equal(dlx_seal_check(path, err, sizeof err), 0);
  unlink(path);
  assert_int_equal(dlx_seal_check(path, err, sizeof err), -1);
  rmdir(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_seal_round_trip_and_damage)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
