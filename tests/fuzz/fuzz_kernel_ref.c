/* fuzz_kernel_ref.c - dlx_kernel_ref_decode over a call's attributes as a deserialized
 * program may carry them (any names, types, lengths and bytes), then dlx_kernel_ref_find
 * against a small registry: every message fits, a found index is in range and matches. A
 * type byte's top bit makes a STR value carry a NUL and raw bytes after its string. */
#include <string.h>

#include "dlx_kernel_ref.h"
#include "fuzz_input.h"

#define N_ATTRS 8

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_in in = {data, size};
  dlx_attr attrs[N_ATTRS];
  char *owned[2 * N_ATTRS] = {0};
  int32_t n = fuzz_byte(&in) % (N_ATTRS + 1);
  for (int32_t i = 0; i < n; ++i) {
    char *name = fuzz_str(&in), *value = fuzz_str(&in);
    owned[2 * i] = name;
    owned[2 * i + 1] = value;
    uint8_t how = fuzz_byte(&in), type = (how & 0x7f) % 6;
    size_t vlen = value ? strlen(value) : 0;
    if (how & 0x80 && value) { /* the string, a NUL, then raw bytes: a STR holds any byte */
      size_t extra = fuzz_byte(&in);
      char *more = realloc(value, vlen + 1 + extra);
      if (!more) abort();
      owned[2 * i + 1] = value = more;
      for (size_t j = 0; j < extra; ++j) value[vlen + 1 + j] = (char)fuzz_byte(&in);
      vlen += 1 + extra;
    }
    /* a STR's bytes as given (exact allocation); other types point at the same bytes,
     * with a length that fits them */
    attrs[i] = (dlx_attr){name, name ? strlen(name) : 0, type, value,
                          type == DLX_ATTR_STR ? (int64_t)vlen
                          : type == DLX_ATTR_I64S || type == DLX_ATTR_F64S ? (int64_t)(vlen / 8)
                                                                            : (vlen >= 8)};
  }
  dlx_kernel_ref ref;
  char err[600];
  err[0] = 0;
  size_t errlen = 1 + fuzz_byte(&in) % sizeof err;
  if (dlx_kernel_ref_decode(attrs, n, &ref, err, errlen) == 0) {
    FUZZ_CHECK(dlx_kernel_ref_valid_name(ref.name, ref.name_len));
    FUZZ_CHECK(ref.decl_len > 0 && ref.decl_len <= DLX_REF_DECL_MAX);
    dlx_kernel_key keys[3] = {
        {"", "square", 6, "x: f32[n] -> f32[n]", 19, "/tmp/libsq.so"},
        {"", "square", 6, "x: f32[n] -> f32[n]", 19, NULL},
        {"", "neg", 3, "x: f32[n] -> f32[n]", 19, "/tmp/libneg.so"},
    };
    memset(keys[0].digest, 'a', 64);
    memcpy(keys[1].digest, ref.digest, 64); /* the call's library: its name may match */
    /* a byte past the seeds' ends: keys[1] of another library (the not-loaded messages are
     * reached too), keys[0] loaded from the traced-from path (the changed-library one) */
    uint8_t pick = fuzz_byte(&in);
    if (pick & 1) keys[1].digest[0] = keys[1].digest[0] == 'c' ? 'd' : 'c';
    char from[DLX_REF_FROM_MAX + 1];
    if (pick & 2 && ref.from_len) {
      memcpy(from, ref.from, ref.from_len);
      from[ref.from_len] = 0;
      keys[0].path = from;
    }
    memset(keys[2].digest, 'b', 64);
    int64_t k = dlx_kernel_ref_find(&ref, keys, 3, err, errlen);
    FUZZ_CHECK(k == DLX_REF_NOT_LOADED || k == DLX_REF_MISMATCH || (k >= 0 && k < 3));
    if (k >= 0)
      FUZZ_CHECK(memcmp(keys[k].digest, ref.digest, 64) == 0 &&
                 keys[k].name_len == ref.name_len && keys[k].decl_len == ref.decl_len);
  }
  FUZZ_CHECK(memchr(err, 0, errlen) != NULL);
  for (int i = 0; i < 2 * N_ATTRS; ++i) free(owned[i]);
  return 0;
}
