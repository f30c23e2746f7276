/* dlx_seal.c - seal and check a library's digest trailer. */
#include "dlx_seal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

int dlx_seal_verify(const unsigned char *buf, size_t n, char *err, size_t errlen) {
  if (n < TRAILER_LEN || memcmp(buf + n - TRAILER_LEN, MAGIC, MAGIC_LEN) != 0) {
    snprintf(err, errlen, "carries no seal (truncated, or not built by dlx)");
    return 0;
  }
  char hex[65];
  dlx_digest_hex(buf, n - TRAILER_LEN, hex);
  if (memcmp(hex, buf + n - 64, 64) != 0) {
    snprintf(err, errlen, "does not match its seal (corrupt)");
    return 0;
  }
  return 1;
}

int dlx_seal_check(const char *path, char *err, size_t errlen) {
  size_t n;
  unsigned char *buf = slurp(path, &n, err, errlen);
  if (!buf) return -1;
  char why[128];
  int rc = dlx_seal_verify(buf, n, why, sizeof why);
  if (rc != 1) snprintf(err, errlen, "%s %s", path, why);
  free(buf);
  return rc;
}

int dlx_seal_check_fd(int fd, char *err, size_t errlen) {
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < 0) {
    snprintf(err, errlen, "cannot stat it: %s", strerror(errno));
    return -1;
  }
  size_t n = (size_t)st.st_size, got = 0;
  unsigned char *buf = malloc(n + 1);
  if (!buf) {
    snprintf(err, errlen, "out of memory reading it");
    return -1;
  }
  while (got < n) {
    ssize_t r = pread(fd, buf + got, n - got, (off_t)got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += (size_t)r;
  }
  int rc = got == n ? dlx_seal_verify(buf, n, err, errlen) : -1;
  if (got != n) snprintf(err, errlen, "cannot read it (%zu of %zu bytes)", got, n);
  free(buf);
  return rc;
}
