/* dlx_layout.c - element types and strides: the arithmetic every exporter shares. */
#include <stdio.h>
#include <string.h>

#include "dlx_core.h"

int64_t dlx_dtype_itemsize(DLDataType dtype) {
  int64_t bits = (int64_t)dtype.bits * (int64_t)dtype.lanes;
  if (bits <= 0 || bits % 8 != 0) return 0;
  return bits / 8;
}

int dlx_compact_strides(int32_t ndim, const int64_t *shape, int64_t *strides) {
  /* Checked products: a producer's shape is untrusted and a wrapped int64 is UB.
   * Past an overflow the strides saturate; they only matter (and the call fails)
   * when the tensor has elements, since nothing of an empty tensor is ever stepped. */
  int64_t s = 1;
  int overflow = 0, empty = 0;
  for (int32_t i = ndim - 1; i >= 0; --i) {
    strides[i] = s;
    if (shape[i] == 0) empty = 1;
    /* A zero extent must not zero the outer strides: keep them well-formed. */
    if (i > 0 && __builtin_mul_overflow(s, shape[i] > 0 ? shape[i] : 1, &s)) {
      overflow = 1;
      s = INT64_MAX;
    }
  }
  return overflow && !empty ? -1 : 0;
}

const char *dlx_device_type_name(int32_t device_type) {
  static const char *const names[] = {
      [kDLCPU] = "cpu",         [kDLCUDA] = "cuda",         [kDLCUDAHost] = "cuda_host",
      [kDLOpenCL] = "opencl",   [kDLVulkan] = "vulkan",     [kDLMetal] = "metal",
      [kDLVPI] = "vpi",         [kDLROCM] = "rocm",         [kDLROCMHost] = "rocm_host",
      [kDLExtDev] = "ext_dev",  [kDLCUDAManaged] = "cuda_managed", [kDLOneAPI] = "oneapi",
      [kDLWebGPU] = "webgpu",   [kDLHexagon] = "hexagon",   [kDLMAIA] = "maia",
      [kDLTrn] = "trn",         [kDLTPU] = "tpu",           [kDLTPUHost] = "tpu_host",
  };
  if (device_type < 0 || (size_t)device_type >= sizeof names / sizeof names[0]) return NULL;
  return names[device_type];
}

static int is_little_endian(void) {
  const uint16_t one = 1;
  return *(const uint8_t *)&one == 1;
}

int dlx_dtype_from_buffer_format(const char *format, int64_t itemsize, DLDataType *out,
                                 char *err, size_t errlen) {
  const char *f = format ? format : "B"; /* PEP 3118: NULL means unsigned bytes */
  int native_sizes = 1;
  if (*f == '@') {
    ++f;
  } else if (*f == '=' || *f == '<' || *f == '>' || *f == '!') {
    int little = *f == '<';
    int big = *f == '>' || *f == '!';
    if ((little && !is_little_endian()) || (big && is_little_endian())) {
      /* One-byte items have no byte order to get wrong. */
      if (itemsize != 1) {
        snprintf(err, errlen, "non-native byte order in buffer format '%s'", format);
        return -1;
      }
    }
    native_sizes = 0;
    ++f;
  }
  (void)native_sizes; /* sizes are checked against itemsize below either way */
  int complex = 0;
  if (*f == 'Z') {
    complex = 1;
    ++f;
  }
  if (f[0] == '\0' || f[1] != '\0') {
    snprintf(err, errlen, "unsupported buffer format '%s' (only single scalar items)",
             format);
    return -1;
  }
  uint8_t code;
  switch (f[0]) {
    case 'b': case 'h': case 'i': case 'l': case 'q': case 'n':
      code = kDLInt; break;
    case 'B': case 'H': case 'I': case 'L': case 'Q': case 'N': case 'c':
      code = kDLUInt; break;
    case 'e': case 'f': case 'd':
      code = complex ? kDLComplex : kDLFloat; break;
    case '?':
      code = kDLBool; break;
    default:
      snprintf(err, errlen, "unsupported buffer format '%s'", format);
      return -1;
  }
  if (complex && code != kDLComplex) {
    snprintf(err, errlen, "unsupported buffer format '%s'", format);
    return -1;
  }
  if (itemsize <= 0 || itemsize > 16 || (itemsize & (itemsize - 1)) != 0) {
    snprintf(err, errlen, "unsupported item size %lld for format '%s'", (long long)itemsize,
             format);
    return -1;
  }
  out->code = code;
  out->bits = (uint8_t)(itemsize * 8);
  out->lanes = 1;
  return 0;
}
