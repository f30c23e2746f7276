/* fuzz_seal.c - dlx_seal_check over arbitrary file contents (a cached library may
 * be truncated or corrupt, or planted), and the promise that sealing makes any
 * contents check whole. */
#include "dlx_seal.h"
#include "fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[64], err[256];
  if (fuzz_file(data, size, path) < 0) return 0;
  err[0] = '\0';
  int rc = dlx_seal_check(path, err, sizeof err);
  FUZZ_CHECK(rc == 0 || rc == 1);
  if (rc == 0) FUZZ_CHECK(err[0] != '\0');
  if (dlx_seal_file(path, err, sizeof err) == 0)
    FUZZ_CHECK(dlx_seal_check(path, err, sizeof err) == 1);
  return 0;
}
