/* fuzz_identity.c - addon identity strings and cache file names from facts torch
 * reports (its version string, the Python ABI tag) and user flags. Fields are
 * NUL-separated; leading bytes pick the numbers and the output size. */
#include <string.h>

#include "dlx_identity.h"
#include "fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_in in = {data, size};
  size_t outlen = fuzz_byte(&in) % 2 ? 4096 : 1 + fuzz_byte(&in); /* roomy, or tight */
  dlx_addon_facts f;
  f.cxx11_abi = (int8_t)fuzz_byte(&in);
  f.backend = (dlx_backend)(int8_t)fuzz_byte(&in); /* out-of-range values included */
  f.dlpack_major = (int)(int32_t)fuzz_i64(&in);
  f.dlpack_minor = (int)(int32_t)fuzz_i64(&in);
  char *torch_version = fuzz_str(&in), *abi = fuzz_str(&in), *digest = fuzz_str(&in),
       *flags = fuzz_str(&in);
  f.torch_version = torch_version;
  f.python_abi_tag = abi;
  f.source_digest = digest;
  f.flags = flags;

  char *out = malloc(outlen); /* exact size: a write past it is caught */
  if (!out) abort();
  if (dlx_addon_identity(&f, out, outlen) == 0) {
    size_t n = strlen(out);
    FUZZ_CHECK(n < outlen && strncmp(out, "dlx-torch-addon;", 16) == 0);
    for (size_t i = 0; i < n; ++i) FUZZ_CHECK((unsigned char)out[i] >= 0x20); /* one line */
  } else {
    FUZZ_CHECK(out[0] == '\0');
  }
  if (dlx_addon_filename(&f, out, outlen) == 0) {
    /* A file name, never a path: nothing in the facts may steer it elsewhere. */
    size_t n = strlen(out);
    FUZZ_CHECK(n < outlen && strncmp(out, "libdlx_torch_", 13) == 0);
    FUZZ_CHECK(strchr(out, '/') == NULL && n > 3 && strcmp(out + n - 3, ".so") == 0);
  } else {
    FUZZ_CHECK(out[0] == '\0');
  }
  char hex[65];
  dlx_digest_hex(data, size, hex);
  FUZZ_CHECK(strlen(hex) == 64 && strspn(hex, "0123456789abcdef") == 64);
  free(out);
  free(torch_version);
  free(abi);
  free(digest);
  free(flags);
  return 0;
}
