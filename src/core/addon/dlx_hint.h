/* dlx_hint.h - turn a failed compile into "install this package". */
#ifndef DLX_HINT_H_
#define DLX_HINT_H_

#include <stddef.h>

/* The header a compile failed for, from the compiler's output: the first
 * "fatal error: X: No such file or directory" (gcc) or "fatal error: 'X' file not found"
 * (clang). Copies X into header[len] (truncated, NUL-terminated) and returns 1; 0 when the
 * output names no missing header, output is NULL or len < 2 (no room for a name). */
int dlx_missing_header(const char *output, char *header, size_t len);

/* The Debian package that provides a well-known header (as written in the #include:
 * "pybind11/pybind11.h", "Python.h", "torch/extension.h", ...), or NULL when the header
 * is not one dlx knows. A few entries are not Debian packages; they read as advice. */
const char *dlx_header_package(const char *header);

#endif
