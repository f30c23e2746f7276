/* fuzz_seal.c - the seal check over arbitrary file contents (a cached library may be
 * truncated, corrupt or planted): on bytes, on a descriptor and on a path, which must
 * agree; and sealing any contents makes them check whole. */
#include "dlx_seal.h"
#include "fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[64], err[256];
  err[0] = '\0';
  int rc = dlx_seal_verify(data, size, err, sizeof err);
  FUZZ_CHECK(rc == 0 || rc == 1);
  if (rc == 0) FUZZ_CHECK(err[0] != '\0');
  int fd = fuzz_file(data, size, path);
  if (fd < 0) return 0;
  FUZZ_CHECK(dlx_seal_check_fd(fd, err, sizeof err) == rc);
  FUZZ_CHECK(dlx_seal_check(path, err, sizeof err) == rc);
  if (dlx_seal_file(path, err, sizeof err) == 0)
    FUZZ_CHECK(dlx_seal_check_fd(fd, err, sizeof err) == 1);
  return 0;
}
