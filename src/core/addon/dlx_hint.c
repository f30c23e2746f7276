/* dlx_hint.c - which header a compile missed, and the Debian package that provides it.
 * The addon build needs torch's headers, which need pybind11's and Python's; Debian's
 * python3-torch only recommends some of them, so a machine can have torch and still lack
 * them. Naming the package turns a wall of compiler output into one apt-get line. */
#include "dlx_hint.h"

#include <string.h>

/* Copy [start, end) into out[len]; 1 when at least one character was copied. */
static int copy_span(const char *start, const char *end, char *out, size_t len) {
  if (end <= start || !out || len < 2) return 0;
  size_t n = (size_t)(end - start);
  if (n >= len) n = len - 1;
  memcpy(out, start, n);
  out[n] = '\0';
  return 1;
}

/* One line [line, eol): the missing header it names, if any. */
static int header_in_line(const char *line, const char *eol, char *out, size_t len) {
  static const char tag[] = "fatal error: ";
  const char *p = line;
  const char *t = NULL;
  while (p + sizeof tag - 1 <= eol) {
    if (memcmp(p, tag, sizeof tag - 1) == 0) {
      t = p + sizeof tag - 1;
      break;
    }
    ++p;
  }
  if (!t) return 0;
  static const char gcc_tail[] = ": No such file or directory";
  static const char clang_tail[] = "' file not found";
  /* gcc: fatal error: pybind11/pybind11.h: No such file or directory */
  for (const char *q = t; q + sizeof gcc_tail - 1 <= eol; ++q)
    if (memcmp(q, gcc_tail, sizeof gcc_tail - 1) == 0) return copy_span(t, q, out, len);
  /* clang: fatal error: 'pybind11/pybind11.h' file not found */
  if (t < eol && *t == '\'')
    for (const char *q = t + 1; q + sizeof clang_tail - 1 <= eol; ++q)
      if (memcmp(q, clang_tail, sizeof clang_tail - 1) == 0) return copy_span(t + 1, q, out, len);
  return 0;
}

int dlx_missing_header(const char *output, char *header, size_t len) {
  if (!output) return 0;
  const char *line = output;
  while (*line) {
    const char *eol = strchr(line, '\n');
    if (!eol) eol = line + strlen(line);
    if (header_in_line(line, eol, header, len)) return 1;
    line = *eol ? eol + 1 : eol;
  }
  return 0;
}

/* A folder prefix ("torch/") matches every header under it; a plain name only itself. */
static const struct {
  const char *header;
  const char *package;
} known[] = {
    {"pybind11/", "pybind11-dev"},
    {"Python.h", "python3-dev"},
    {"pyconfig.h", "python3-dev"},
    {"numpy/", "python3-numpy"},
    {"torch/", "libtorch-dev"},
    {"ATen/", "libtorch-dev"},
    {"c10/", "libtorch-dev"},
    {"caffe2/", "libtorch-dev"},
    {"cmocka.h", "libcmocka-dev"},
    {"cuda.h", "nvidia-cuda-dev (Debian non-free) or NVIDIA's CUDA toolkit"},
    {"cuda_runtime.h", "nvidia-cuda-dev (Debian non-free) or NVIDIA's CUDA toolkit"},
    {"cuda_runtime_api.h", "nvidia-cuda-dev (Debian non-free) or NVIDIA's CUDA toolkit"},
    {"hip/", "libamdhip64-dev"},
    {"torch_npu/", "torch_npu (pip) with Ascend's CANN toolkit; not in Debian"},
    {"acl/", "Ascend's CANN toolkit; not in Debian"},
    {"dlx/", "dlx itself: pass -I\"$(python -m dlx --include-dir)\""},
    {"stdio.h", "libc6-dev"},
    {"stdlib.h", "libc6-dev"},
    {"string.h", "libc6-dev"},
    {"cstdint", "g++"},
    {"cstring", "g++"},
    {"string", "g++"},
    {"vector", "g++"},
    {"memory", "g++"},
    {"mutex", "g++"},
};

const char *dlx_header_package(const char *header) {
  if (!header) return NULL;
  for (size_t i = 0; i < sizeof known / sizeof known[0]; ++i) {
    size_t n = strlen(known[i].header);
    int folder = known[i].header[n - 1] == '/';
    if (folder ? strncmp(header, known[i].header, n) == 0 : strcmp(header, known[i].header) == 0)
      return known[i].package;
  }
  return NULL;
}
