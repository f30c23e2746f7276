/* dlx_hint.c: missing headers found in real compilers' words, mapped to Debian packages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "dlx_hint.h"

static void test_gcc_and_clang_wording(void **state) {
  (void)state;
  char h[64];
  const char *gcc =
      "In file included from /x/dlx_torch_addon.cc:24:\n"
      "/usr/lib/python3/dist-packages/torch/include/torch/csrc/autograd/python_variable.h:8:10: "
      "fatal error: pybind11/pybind11.h: No such file or directory\n"
      "    8 | #include <pybind11/pybind11.h>\n"
      "compilation terminated.\n";
  assert_int_equal(dlx_missing_header(gcc, h, sizeof h), 1);
  assert_string_equal(h, "pybind11/pybind11.h");
  const char *clang = "k.c:1:10: fatal error: 'Python.h' file not found\n#include <Python.h>\n";
  assert_int_equal(dlx_missing_header(clang, h, sizeof h), 1);
  assert_string_equal(h, "Python.h");
  /* the last line without a newline */
  assert_int_equal(dlx_missing_header("a.c:1:1: fatal error: numpy/arrayobject.h: No such file "
                                      "or directory", h, sizeof h), 1);
  assert_string_equal(h, "numpy/arrayobject.h");
}

static void test_other_failures_name_no_header(void **state) {
  (void)state;
  char h[64] = "unchanged";
  assert_int_equal(dlx_missing_header(NULL, h, sizeof h), 0);
  assert_int_equal(dlx_missing_header("", h, sizeof h), 0);
  assert_int_equal(dlx_missing_header("k.c:3:1: error: expected ';' before '}' token\n", h, sizeof h), 0);
  /* a missing file on one line, the fatal error on another: not one message */
  assert_int_equal(dlx_missing_header("fatal error: \nx.h: No such file or directory\n", h, sizeof h), 0);
  assert_int_equal(dlx_missing_header("fatal error: 'x.h\n' file not found", h, sizeof h), 0);
  assert_int_equal(dlx_missing_header("fatal error: ", h, sizeof h), 0);
  assert_int_equal(dlx_missing_header("ld: fatal error: no input files\n", h, sizeof h), 0);
  assert_string_equal(h, "unchanged");
}

static void test_first_missing_header_wins_and_is_truncated(void **state) {
  (void)state;
  char h[8];
  const char *out = "a.c:1: fatal error: torch/extension.h: No such file or directory\n"
                    "b.c:1: fatal error: Python.h: No such file or directory\n";
  assert_int_equal(dlx_missing_header(out, h, sizeof h), 1);
  assert_string_equal(h, "torch/e");
  /* no room for a name: nothing found rather than an empty one */
  char one[1] = {'z'};
  assert_int_equal(dlx_missing_header(out, one, sizeof one), 0);
  assert_int_equal(one[0], 'z');
}

static void test_packages_for_well_known_headers(void **state) {
  (void)state;
  assert_string_equal(dlx_header_package("pybind11/pybind11.h"), "pybind11-dev");
  assert_string_equal(dlx_header_package("Python.h"), "python3-dev");
  assert_string_equal(dlx_header_package("torch/csrc/autograd/python_variable.h"), "libtorch-dev");
  assert_string_equal(dlx_header_package("ATen/ATen.h"), "libtorch-dev");
  assert_string_equal(dlx_header_package("c10/core/Device.h"), "libtorch-dev");
  assert_string_equal(dlx_header_package("numpy/arrayobject.h"), "python3-numpy");
  assert_string_equal(dlx_header_package("hip/hip_runtime.h"), "libamdhip64-dev");
  assert_non_null(strstr(dlx_header_package("cuda_runtime.h"), "nvidia-cuda-dev"));
  /* a plain name matches only itself; a folder only its own files */
  assert_null(dlx_header_package("Python.hpp"));
  assert_null(dlx_header_package("torch"));
  assert_null(dlx_header_package("mytorch/x.h"));
  assert_null(dlx_header_package("unknown.h"));
  assert_null(dlx_header_package(NULL));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gcc_and_clang_wording),
      cmocka_unit_test(test_other_failures_name_no_header),
      cmocka_unit_test(test_first_missing_header_wins_and_is_truncated),
      cmocka_unit_test(test_packages_for_well_known_headers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
