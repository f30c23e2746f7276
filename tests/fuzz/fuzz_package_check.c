/* fuzz_package_check.c - dlx_package_check over an AOTInductor package's metadata as a
 * forged package may carry it (any keys and values, NULs inside them, any lengths) against
 * a small registry: it returns 0 or -1, the message fits and is printable, and 0 only when
 * every digest entry matched a registered library. */
#include <string.h>

#include "dlx_package_check.h"
#include "fuzz_input.h"

#define N_PAIRS 6

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_in in = {data, size};
  static const dlx_registered_ns regs[] = {
      {"ops", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "/lib/a.so"},
      {"ns2", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "/lib/b.so"}};
  char *keys[N_PAIRS] = {0}, *values[N_PAIRS] = {0};
  size_t klen[N_PAIRS], vlen[N_PAIRS];
  size_t n = fuzz_byte(&in) % (N_PAIRS + 1);
  uint8_t how = fuzz_byte(&in);
  for (size_t i = 0; i < n; ++i) {
    keys[i] = fuzz_str(&in);
    values[i] = fuzz_str(&in);
    klen[i] = keys[i] ? strlen(keys[i]) : 0;
    vlen[i] = values[i] ? strlen(values[i]) : 0;
    /* a length past the string's NUL takes the terminator in (as a std::string may) */
    if (how & (1u << i) && values[i]) ++vlen[i];
  }
  char err[600];
  size_t errlen = 1 + fuzz_byte(&in) % sizeof err;
  int with_lens = how & 0x80;
  int rc = dlx_package_check((const char *const *)keys, with_lens ? klen : NULL,
                             (const char *const *)values, with_lens ? vlen : NULL, n, regs,
                             (size_t)(fuzz_byte(&in) % 3), err, errlen);
  FUZZ_CHECK(rc == 0 || rc == -1);
  FUZZ_CHECK(strlen(err) < errlen);
  for (const char *p = err; *p; ++p) FUZZ_CHECK(*p >= 0x20 && *p < 0x7f);
  if (rc == 0)
    for (size_t i = 0; i < n; ++i)
      if (keys[i] && strncmp(keys[i], DLX_DIGEST_KEY_PREFIX, 11) == 0 &&
          (!with_lens || klen[i] == strlen(keys[i])))
        FUZZ_CHECK(values[i] && strlen(values[i]) == 64);
  for (size_t i = 0; i < n; ++i) free(keys[i]), free(values[i]);
  return 0;
}
