/* dlx_identity.c - addon identity strings and file names, with a small SHA-256
 * (FIPS 180-4) so the core needs no crypto library. */
#include "dlx_identity.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* ---- SHA-256 ------------------------------------------------------------- */

static const uint32_t kK[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2};

static uint32_t ror(uint32_t x, unsigned n) { return (x >> n) | (x << (32 - n)); }

static void sha256_block(uint32_t h[8], const unsigned char *p) {
  uint32_t w[64];
  for (int i = 0; i < 16; ++i)
    w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
           (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
  for (int i = 16; i < 64; ++i) {
    uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
  for (int i = 0; i < 64; ++i) {
    uint32_t t1 = k + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) + kK[i] + w[i];
    uint32_t t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    k = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += k;
}

void dlx_digest_hex(const void *data, size_t n, char out[65]) {
  uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  const unsigned char *p = data;
  size_t left = n;
  for (; left >= 64; left -= 64, p += 64) sha256_block(h, p);
  /* Padding: 0x80, zeros, then the bit length big-endian; one or two blocks. */
  unsigned char tail[128] = {0};
  if (left) memcpy(tail, p, left);
  tail[left] = 0x80;
  size_t tlen = left < 56 ? 64 : 128;
  uint64_t bits = (uint64_t)n * 8u;
  for (int i = 0; i < 8; ++i) tail[tlen - 1 - i] = (unsigned char)(bits >> (8 * i));
  for (size_t off = 0; off < tlen; off += 64) sha256_block(h, tail + off);
  static const char hex[] = "0123456789abcdef";
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j) out[i * 8 + j] = hex[(h[i] >> (28 - 4 * j)) & 0xf];
  out[64] = '\0';
}

/* ---- identity ------------------------------------------------------------ */

static int field_ok(const char *s) {
  if (!s || !s[0]) return 0;
  for (const unsigned char *p = (const unsigned char *)s; *p; ++p)
    if (*p == ';' || *p < 0x20 || *p == 0x7f) return 0;
  return 1;
}

int dlx_addon_identity(const dlx_addon_facts *f, char *out, size_t outlen) {
  if (!f || !out || outlen == 0) return -1;
  out[0] = '\0';
  if (!field_ok(f->torch_version) || !field_ok(f->python_abi_tag) ||
      !field_ok(f->source_digest) || (unsigned)f->backend >= DLX_BACKEND_COUNT)
    return -1;
  /* The flags are hashed: they can hold anything (';', quotes, newlines) and
   * would make the identity long. */
  const char *flags = f->flags ? f->flags : "";
  char flags_hex[65];
  dlx_digest_hex(flags, strlen(flags), flags_hex);
  int n = snprintf(out, outlen,
                   "dlx-torch-addon;torch=%s;cxx11abi=%d;backend=%s;python=%s;dlpack=%d.%d;"
                   "source=%s;flags=%s",
                   f->torch_version, f->cxx11_abi ? 1 : 0, dlx_backend_name(f->backend),
                   f->python_abi_tag, f->dlpack_major, f->dlpack_minor, f->source_digest,
                   flags_hex);
  if (n < 0 || (size_t)n >= outlen) {
    out[0] = '\0';
    return -1;
  }
  return 0;
}

/* "<digits>.<digits>" at the start of a version; -1 otherwise. */
static int major_minor(const char *v, unsigned long *major, unsigned long *minor) {
  unsigned long a = 0, b = 0;
  const char *p = v;
  if (*p < '0' || *p > '9') return -1;
  for (; *p >= '0' && *p <= '9'; ++p) {
    if (a > 100000) return -1;
    a = a * 10 + (unsigned long)(*p - '0');
  }
  if (*p++ != '.' || *p < '0' || *p > '9') return -1;
  for (; *p >= '0' && *p <= '9'; ++p) {
    if (b > 100000) return -1;
    b = b * 10 + (unsigned long)(*p - '0');
  }
  *major = a;
  *minor = b;
  return 0;
}

int dlx_addon_filename(const dlx_addon_facts *f, char *out, size_t outlen) {
  if (!out || outlen == 0) return -1;
  out[0] = '\0';
  char id[4096];
  unsigned long major, minor;
  if (dlx_addon_identity(f, id, sizeof id) != 0) return -1;
  if (major_minor(f->torch_version, &major, &minor) != 0) return -1;
  char hex[65];
  dlx_digest_hex(id, strlen(id), hex);
  int n = snprintf(out, outlen, "libdlx_torch_%lu.%lu_%s_%.12s.so", major, minor,
                   dlx_backend_name(f->backend), hex);
  if (n < 0 || (size_t)n >= outlen) {
    out[0] = '\0';
    return -1;
  }
  return 0;
}
