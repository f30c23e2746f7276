/* fuzz_layout.c - the layout arithmetic on what a producer claims: buffer format
 * strings, dtypes, shapes and byte strides (any int64, any ndim the ABI allows). */
#include <string.h>

#include "dlx_core.h"
#include "fuzz_input.h"

#define MAX_NDIM 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_in in = {data, size};
  int32_t ndim = fuzz_byte(&in) % (MAX_NDIM + 1);
  int64_t itemsize = (int8_t)fuzz_byte(&in);
  DLDataType dt = {fuzz_byte(&in), fuzz_byte(&in), (uint16_t)(fuzz_byte(&in) << 8)};
  dt.lanes |= fuzz_byte(&in);
  int64_t is = dlx_dtype_itemsize(dt);
  FUZZ_CHECK(is == 0 || is * 8 == (int64_t)dt.bits * dt.lanes);

  int64_t *shape = malloc(sizeof(int64_t) * (ndim ? ndim : 1)); /* exact: overruns show */
  int64_t *bytes = malloc(sizeof(int64_t) * (ndim ? ndim : 1));
  int64_t *strides = malloc(sizeof(int64_t) * (ndim ? ndim : 1));
  if (!shape || !bytes || !strides) abort();
  for (int32_t i = 0; i < ndim; ++i) {
    shape[i] = fuzz_i64(&in);
    bytes[i] = fuzz_i64(&in);
  }
  int32_t bad = -1;
  if (dlx_strides_from_bytes(ndim, shape, bytes, itemsize, strides, &bad) != 0)
    FUZZ_CHECK(bad >= 0 && bad < (ndim ? ndim : 1));
  dlx_compact_strides(ndim, shape, strides);

  char *format = fuzz_str(&in);
  DLDataType t;
  char err[128];
  err[0] = '\0';
  if (dlx_dtype_from_buffer_format(format, itemsize, &t, err, sizeof err) == 0)
    FUZZ_CHECK(t.lanes == 1 && t.bits == itemsize * 8);
  else
    FUZZ_CHECK(err[0] != '\0');
  free(format);
  free(shape);
  free(bytes);
  free(strides);
  return 0;
}
