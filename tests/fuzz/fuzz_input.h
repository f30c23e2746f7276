/*
 * fuzz_input.h - what every fuzz target shares: taking control bytes and
 * NUL-separated strings off the input, and handing bytes to file-reading
 * parsers as a real file (a memfd, reached by its /proc/self/fd path).
 */
#ifndef DLX_FUZZ_INPUT_H_
#define DLX_FUZZ_INPUT_H_

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Stops the run with a message when a parser breaks one of its promises
 * (libFuzzer and the replay driver both report the abort with the input). */
#define FUZZ_CHECK(cond)                                                          \
  do {                                                                            \
    if (!(cond)) {                                                                \
      fprintf(stderr, "%s:%d: broken promise: %s\n", __FILE__, __LINE__, #cond); \
      abort();                                                                    \
    }                                                                             \
  } while (0)

typedef struct {
  const uint8_t *p;
  size_t n;
} fuzz_in;

/* The next byte, 0 once the input is used up. */
static inline uint8_t fuzz_byte(fuzz_in *in) {
  if (!in->n) return 0;
  --in->n;
  return *in->p++;
}

/* The next 8 bytes as an int64 (missing bytes are 0). */
static inline int64_t fuzz_i64(fuzz_in *in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = v << 8 | fuzz_byte(in);
  return (int64_t)v;
}

/* The bytes up to the next NUL (or the end) as a malloc'd string of exactly that
 * length, so a read past its end is caught; NULL when the input is used up. */
static inline char *fuzz_str(fuzz_in *in) {
  if (!in->n) return NULL;
  const uint8_t *end = memchr(in->p, 0, in->n);
  size_t len = end ? (size_t)(end - in->p) : in->n;
  char *s = malloc(len + 1);
  if (!s) abort();
  memcpy(s, in->p, len);
  s[len] = '\0';
  in->p += len + (end ? 1 : 0);
  in->n -= len + (end ? 1 : 0);
  return s;
}

/* `data` as a file: a memfd whose path ("/proc/self/fd/N") goes in path[64].
 * The descriptor is reused across inputs (the file is rewritten); -1 on failure. */
static inline int fuzz_file(const uint8_t *data, size_t size, char path[64]) {
  static int fd = -1;
  if (fd < 0) fd = memfd_create("dlx-fuzz", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, 0) != 0) return -1;
  size_t done = 0;
  while (done < size) {
    ssize_t w = pwrite(fd, data + done, size - done, (off_t)done);
    if (w <= 0) return -1;
    done += (size_t)w;
  }
  snprintf(path, 64, "/proc/self/fd/%d", fd);
  return fd;
}

#endif /* DLX_FUZZ_INPUT_H_ */
