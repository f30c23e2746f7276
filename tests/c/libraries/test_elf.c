/* dlx_elf.c: kernel records are found in a real shared object's dynamic symbols. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "dlx/dlx.h"
#include "dlx_core.h"

#define KERNELS DLX_BINARY_DIR "/kernels/test_kernels.so"

typedef struct {
  int n;
  int saw_noop, saw_not_a_kernel;
} seen;

static void note(void *ctx, const char *name) {
  seen *s = ctx;
  ++s->n;
  if (strcmp(name, "dlx_kernel__noop") == 0) s->saw_noop = 1;
  if (strstr(name, "not_a_kernel")) s->saw_not_a_kernel = 1;
}

static void test_lists_kernel_records(void **state) {
  (void)state;
  seen s = {0};
  char err[256];
  int n = dlx_elf_each_symbol(KERNELS, DLX_KERNEL_RECORD_PREFIX, note, &s, err, sizeof err);
  assert_true(n >= 10);
  assert_int_equal(n, s.n);
  assert_true(s.saw_noop);
  assert_false(s.saw_not_a_kernel); /* exported, but without a record */
}

/* Records are data objects: a function whose name has the prefix is not listed. */
static void test_lists_only_data_objects(void **state) {
  (void)state;
  seen s = {0};
  char err[256];
  assert_int_equal(dlx_elf_each_symbol(KERNELS, "noop", note, &s, err, sizeof err), 0);
  assert_int_equal(dlx_elf_each_symbol(KERNELS, "not_a_kernel", note, &s, err, sizeof err), 0);
  assert_int_equal(dlx_elf_each_symbol(KERNELS, "dlx_kernel__noop", note, &s, err, sizeof err), 1);
}

/* Not a regular file: refused from fstat, never read (a FIFO would block in open). */
static void test_rejects_fifo_and_folder(void **state) {
  (void)state;
  seen s = {0};
  char err[256];
  char dir[] = "/tmp/dlx-elf-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char fifo[64];
  snprintf(fifo, sizeof fifo, "%s/k.so", dir);
  assert_int_equal(mkfifo(fifo, 0600), 0);
  assert_int_equal(dlx_elf_each_symbol(fifo, "x", note, &s, err, sizeof err), -1);
  assert_non_null(strstr(err, "not a regular file (a FIFO)"));
  assert_int_equal(dlx_elf_each_symbol(dir, "x", note, &s, err, sizeof err), -1);
  assert_non_null(strstr(err, "not a regular file (a folder)"));
  unlink(fifo);
  rmdir(dir);
}

static void test_rejects_non_elf_and_missing(void **state) {
  (void)state;
  seen s = {0};
  char err[256];
  char path[] = "/tmp/dlx-elf-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, "#!/bin/sh\nnot elf at all, but long enough to read a header from"
                             "..............................", 94), 94);
  close(fd);
  assert_int_equal(dlx_elf_each_symbol(path, "x", note, &s, err, sizeof err), -1);
  assert_non_null(strstr(err, "not a 64-bit ELF"));
  unlink(path);
  assert_int_equal(dlx_elf_each_symbol("/nonexistent/k.so", "x", note, &s, err, sizeof err), -1);
  assert_non_null(strstr(err, "cannot open"));
}

static void test_truncated_elf(void **state) {
  (void)state;
  /* The first 200 bytes of a real library: a valid header, no section table. */
  FILE *in = fopen(KERNELS, "rb");
  assert_non_null(in);
  char buf[200];
  assert_int_equal(fread(buf, 1, sizeof buf, in), sizeof buf);
  fclose(in);
  char path[] = "/tmp/dlx-elf-XXXXXX";
  int fd = mkstemp(path);
  assert_int_equal(write(fd, buf, sizeof buf), (ssize_t)sizeof buf);
  close(fd);
  seen s = {0};
  char err[256];
  assert_int_equal(dlx_elf_each_symbol(path, "x", note, &s, err, sizeof err), -1);
  assert_non_null(strstr(err, "truncated"));
  unlink(path);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_lists_kernel_records),
                                     cmocka_unit_test(test_rejects_non_elf_and_missing),
                                     cmocka_unit_test(test_truncated_elf),
                                     cmocka_unit_test(test_lists_only_data_objects),
                                     cmocka_unit_test(test_rejects_fifo_and_folder)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
