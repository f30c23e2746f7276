/*
 * dlx_core.h - dlx's pure-C core: decisions and file-level facts, no Python.
 * Each concern lives in its own dlx_<concern>.c, in src/core's folders by concern
 * (docs/development.md, "Layout"); this header declares the small ones, each section
 * naming its file. Everything here is unit-tested from tests/c without an interpreter.
 */
#ifndef DLX_CORE_H_
#define DLX_CORE_H_

#include <stddef.h>
#include <stdint.h>

#include "dlx/dlpack.h"

/* ---- dlx_error.c: the error text behind the core's -1 returns --------------- */

/* printf into err[errlen] (when err is non-NULL); always returns -1. */
__attribute__((format(printf, 3, 4))) int dlx_set_err(char *err, size_t errlen,
                                                      const char *fmt, ...);

/* ---- calls/dlx_layout.c: dtypes, strides, buffer formats ---------------- */

/* Bytes per element of `dtype` (bits * lanes rounded up), 0 for sub-byte or invalid. */
int64_t dlx_dtype_itemsize(DLDataType dtype);

/* Row-major element strides for `shape`: 0, or -1 when a stride of a tensor that has
 * elements does not fit in int64 (the strides are then saturated, never wrapped). */
int dlx_compact_strides(int32_t ndim, const int64_t *shape, int64_t *strides);

/* Byte strides to element strides; -1 (and `*bad_dim`) when one is not a multiple.
 * A dimension of extent 0 or 1 is never stepped, so its stride is not checked
 * (numpy leaves arbitrary values there) and becomes the compact one.
 * Inline: it runs on every numpy argument of every call. */
static inline int dlx_strides_from_bytes(int32_t ndim, const int64_t *shape, const int64_t *byte_strides,
                           int64_t itemsize, int64_t *strides, int32_t *bad_dim) {
  if (itemsize <= 0) {
    if (bad_dim) *bad_dim = 0;
    return -1;
  }
  /* Item sizes are powers of two in practice: mask and shift instead of two divisions
   * per dimension (this runs on every numpy argument of every call). */
  int pow2 = (itemsize & (itemsize - 1)) == 0;
  int shift = pow2 ? __builtin_ctzll((unsigned long long)itemsize) : 0;
  for (int32_t i = 0; i < ndim; ++i) {
    int64_t b = byte_strides[i];
    int exact = pow2 ? (b & (itemsize - 1)) == 0 : b % itemsize == 0;
    if (exact) {
      strides[i] = pow2 ? b >> shift : b / itemsize; /* exact: the shift rounds nothing */
    } else if (shape[i] <= 1) {
      /* never stepped (numpy leaves arbitrary values here): the compact stride */
      int64_t s = 1;
      for (int32_t j = i + 1; j < ndim; ++j)
        if (__builtin_mul_overflow(s, shape[j] > 0 ? shape[j] : 1, &s)) s = INT64_MAX;
      strides[i] = s;
    } else {
      if (bad_dim) *bad_dim = i;
      return -1;
    }
  }
  return 0;
}


/* DLPack's name of a device type ("cuda", "rocm", "ext_dev"), NULL when it has none. */
const char *dlx_device_type_name(int32_t device_type);

/* A PEP 3118 struct format of one item (as in Py_buffer.format) to a DLDataType.
 * Returns 0, or -1 with a reason in `err` (non-native byte order, unsupported). */
int dlx_dtype_from_buffer_format(const char *format, int64_t itemsize, DLDataType *out,
                                 char *err, size_t errlen);

/* ---- calls/dlx_address.c: raw addresses from producers ------------------- */

/* 0 when `addr` could point at an object aligned to `align`; -1 with the reason in
 * `err` when it is 0, inside the first `page` bytes or misaligned. */
int dlx_address_plausible(uint64_t addr, uint64_t align, uint64_t page, char *err,
                          size_t errlen);

/* 1 when the `n` bytes at `p` can be read, 0 when they are not mapped, -1 when it
 * cannot be told (no pipe). Never faults. */
int dlx_address_readable(const void *p, size_t n);

/* ---- libraries/dlx_elf.c: kernel discovery --------------------------------- */

/* Calls `fn(ctx, name)` for each defined dynamic symbol of the ELF shared object at
 * `path` whose name starts with `prefix` (the prefix is not stripped). Returns the
 * number of matches, or -1 with a reason in `err`. */
int dlx_elf_each_symbol(const char *path, const char *prefix,
                        void (*fn)(void *ctx, const char *name), void *ctx, char *err,
                        size_t errlen);

#endif /* DLX_CORE_H_ */
