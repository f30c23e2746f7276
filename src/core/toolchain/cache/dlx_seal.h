/*
 * dlx_seal.h - a digest trailer that proves a cached library is whole.
 *
 * The builder appends "DLXSEAL1" and the SHA-256 (hex) of everything before it to a
 * freshly compiled library; the loader checks it before dlopen. Truncation or any
 * corruption is then caught without mapping the file (a truncated ELF can SIGBUS
 * inside dlopen). ELF loaders ignore trailing bytes, so a sealed library loads as is.
 */
#ifndef DLX_SEAL_H_
#define DLX_SEAL_H_

#include <stddef.h>

/* Append the seal to `path`. 0, or -1 with `err`. */
int dlx_seal_file(const char *path, char *err, size_t errlen);

/* 1 when `path` carries a seal matching its contents; 0 when it does not (missing,
 * truncated, corrupt: `err` says which); -1 when it cannot be read. */
int dlx_seal_check(const char *path, char *err, size_t errlen);

/* dlx_seal_check of the file open as `fd` (read with pread: its offset is kept). */
int dlx_seal_check_fd(int fd, char *err, size_t errlen);

/* The check itself, on the file's bytes in memory: 1 valid, 0 not (err says why). */
int dlx_seal_verify(const unsigned char *data, size_t n, char *err, size_t errlen);

#endif /* DLX_SEAL_H_ */
