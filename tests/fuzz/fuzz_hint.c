/* fuzz_hint.c - dlx_missing_header over a compiler's output (any bytes a compiler, or
 * whatever $CXX names, prints), and the header-to-package table on what it finds. */
#include <string.h>

#include "dlx_hint.h"
#include "fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_in in = {data, size};
  size_t len = fuzz_byte(&in); /* 0..255: no room, tight, roomy */
  char *output = fuzz_str(&in);
  char *header = malloc(len ? len : 1); /* exact size: a write past it is caught */
  if (!header) abort();
  if (dlx_missing_header(output, header, len)) {
    size_t n = strlen(header);
    FUZZ_CHECK(len >= 2 && n > 0 && n < len && !strchr(header, '\n'));
    (void)dlx_header_package(header);
  }
  (void)dlx_header_package(output);
  free(header);
  free(output);
  return 0;
}
