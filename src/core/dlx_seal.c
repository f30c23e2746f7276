/* dlx_seal.c - seal and check a library's digest trailer. */
#include "dlx_seal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlx_identity.h"

#define MAGIC "DLXSEAL1"
#define MAGIC_LEN 8
#define TRAILER_LEN (MAGIC_LEN + 64)

/* The whole file in memory (a library is a few MB at most); NULL with `err`. */
static unsigned char *slurp(const char *path, size_t *n, char *err, size_t errlen) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, errlen, "cannot open %s", path);
    return NULL;
  }
  unsigned char *buf = NULL;
  long size = -1;
  if (fseek(f, 0, SEEK_END) == 0) size = ftell(f);
  if (size >= 0 && fseek(f, 0, SEEK_SET) == 0) buf = malloc((size_t)size + 1);
  if (!buf || fread(buf, 1, (size_t)size, f) != (size_t)size) {
    snprintf(err, errlen, "cannot read %s", path);
    free(buf);
    buf = NULL;
  }
  fclose(f);
  *n = buf ? (size_t)size : 0;
  return buf;
}

int dlx_seal_file(const char *path, char *err, size_t errlen) {
  size_t n;
  unsigned char *buf = slurp(path, &n, err, errlen);
  if (!buf) return -1;
  char trailer[TRAILER_LEN + 1];
  memcpy(trailer, MAGIC, MAGIC_LEN);
  dlx_digest_hex(buf, n, trailer + MAGIC_LEN);
  free(buf);
  FILE *f = fopen(path, "ab");
  int ok = f && fwrite(trailer, 1, TRAILER_LEN, f) == TRAILER_LEN;
  if (f && fclose(f) != 0) ok = 0;
  if (!ok) snprintf(err, errlen, "cannot seal %s", path);
  return ok ? 0 : -1;
}

int dlx_seal_check(const char *path, char *err, size_t errlen) {
  size_t n;
  unsigned char *buf = slurp(path, &n, err, errlen);
  if (!buf) return -1;
  int rc = 0;
  if (n < TRAILER_LEN || memcmp(buf + n - TRAILER_LEN, MAGIC, MAGIC_LEN) != 0) {
    snprintf(err, errlen, "%s carries no seal (truncated, or not built by dlx)", path);
  } else {
    char hex[65];
    dlx_digest_hex(buf, n - TRAILER_LEN, hex);
    if (memcmp(hex, buf + n - 64, 64) != 0)
      snprintf(err, errlen, "%s does not match its seal (corrupt)", path);
    else
      rc = 1;
  }
  free(buf);
  return rc;
}
