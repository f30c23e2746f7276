/* dlx_error.c - the error text behind the core's -1 returns. */
#include <stdarg.h>
#include <stdio.h>

#include "dlx_core.h"

int dlx_set_err(char *err, size_t errlen, const char *fmt, ...) {
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return -1;
}
