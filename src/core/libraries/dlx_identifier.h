/*
 * dlx_identifier.h - whether untrusted bytes are a C identifier: a kernel's name in a saved
 * XLA call (dlx_kernel_ref.c), an operator namespace in an AOTInductor package
 * (dlx_package_check.c). Static inline so it ships, header only, beside each file that
 * compiles it into an addon (dlx/addon/).
 */
#ifndef DLX_IDENTIFIER_H_
#define DLX_IDENTIFIER_H_

#include <stddef.h>

/* 1 when s[len] (not NUL-terminated) is 1 to max bytes of [A-Za-z0-9_], not starting with a
 * digit; 0 otherwise, and for a NULL s. */
static inline int dlx_is_identifier(const char *s, size_t len, size_t max) {
  if (!s || len == 0 || len > max || (s[0] >= '0' && s[0] <= '9')) return 0;
  for (size_t i = 0; i < len; ++i) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
          c == '_'))
      return 0;
  }
  return 1;
}

#endif /* DLX_IDENTIFIER_H_ */
