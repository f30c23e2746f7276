/* dlx_discover.c: a library's declared kernels without Python (dlx_torch_register's input),
 * found, parsed and given the schema the Python path derives. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "dlx_discover.h"
#include "dlx_identity.h"

#define KDIR DLX_BINARY_DIR "/kernels/"

static const dlx_found_kernel *find(const dlx_found_library *lib, const char *name) {
  for (int32_t i = 0; i < lib->n; ++i)
    if (strcmp(lib->kernels[i].handle.name, name) == 0) return &lib->kernels[i];
  return NULL;
}

static void test_finds_sorted_kernels_with_schemas(void **state) {
  (void)state;
  dlx_found_library lib;
  char err[256];
  assert_int_equal(dlx_discover(KDIR "compile_kernels.so", &lib, err, sizeof err), 0);
  assert_int_equal(lib.n, 13);
  for (int32_t i = 1; i < lib.n; ++i)
    assert_true(strcmp(lib.kernels[i - 1].handle.name, lib.kernels[i].handle.name) < 0);
  const dlx_found_kernel *k = find(&lib, "outer");
  assert_non_null(k);
  assert_non_null(k->handle.fn);
  assert_non_null(k->handle.plan);
  assert_string_equal(k->schema, "outer(Tensor x, Tensor y) -> Tensor");
  assert_int_equal(k->nresults, 1);
  k = find(&lib, "minmax");
  assert_string_equal(k->schema, "minmax(Tensor x) -> (Tensor, Tensor, Tensor)");
  assert_int_equal(k->nresults, 3);
  k = find(&lib, "raw"); /* undeclared: found, no schema, says why */
  assert_null(k->handle.plan);
  assert_null(k->schema);
  assert_non_null(strstr(k->why, "no declared signature"));
  dlx_discover_free(&lib);
  assert_int_equal(lib.n, 0);
}

static void test_refuses_what_dlx_load_refuses(void **state) {
  (void)state;
  dlx_found_library lib;
  char err[256];
  assert_int_equal(dlx_discover(KDIR "bad_signature.so", &lib, err, sizeof err), -1);
  assert_non_null(strstr(err, "malformed signature"));
  assert_int_equal(dlx_discover(KDIR "future_abi.so", &lib, err, sizeof err), -1);
  assert_non_null(strstr(err, "ABI 1.99"));
  assert_int_equal(dlx_discover(KDIR "no_such_file.so", &lib, err, sizeof err), -1);
  assert_non_null(strstr(err, "no_such_file.so"));
  assert_int_equal(dlx_discover(DLX_SOURCE_DIR "/README.md", &lib, err, sizeof err), -1);
  assert_null(lib.kernels);
}

/* The digest is the library file's sha256 (what a package names it by). */
static void test_digest_is_the_files(void **state) {
  (void)state;
  dlx_found_library lib;
  char err[256], want[65];
  FILE *f = fopen(KDIR "compile_kernels.so", "rb");
  assert_non_null(f);
  static unsigned char buf[1 << 24];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  assert_true(n > 0 && n < sizeof buf);
  dlx_digest_hex(buf, n, want);
  assert_int_equal(dlx_discover(KDIR "compile_kernels.so", &lib, err, sizeof err), 0);
  assert_string_equal(lib.sha256, want);
  dlx_discover_free(&lib);
}

static void test_records_only(void **state) {
  (void)state;
  dlx_found_library lib;
  char err[256];
  assert_int_equal(dlx_discover(KDIR "test_kernels.so", &lib, err, sizeof err), 0);
  assert_int_equal(lib.n, 20); /* as dlx.load: an export without a record is no kernel */
  assert_null(find(&lib, "not_a_kernel"));
  dlx_discover_free(&lib);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_finds_sorted_kernels_with_schemas),
                                     cmocka_unit_test(test_refuses_what_dlx_load_refuses),
                                     cmocka_unit_test(test_digest_is_the_files),
                                     cmocka_unit_test(test_records_only)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
