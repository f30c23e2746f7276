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

/* The CPU's SHA-256 instructions (x86 SHA-NI) where present: ~10x the portable code, which
 * matters for dlx.build's warm path (a CUDA kernel's headers are megabytes) and for the seal
 * check of every cached library. Chosen at run time (valgrind, for one, hides them). */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define DLX_HAVE_SHA_NI 1

__attribute__((target("sha,sse4.1,ssse3"))) static void sha256_blocks_ni(uint32_t h[8],
                                                                        const unsigned char *p,
                                                                        size_t blocks) {
  const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
  /* the instructions keep the state as (A,B,E,F) and (C,D,G,H), high lane first */
  __m128i abcd = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&h[0]), 0xB1);
  __m128i efgh = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&h[4]), 0x1B);
  __m128i abef = _mm_alignr_epi8(abcd, efgh, 8);
  __m128i cdgh = _mm_blend_epi16(efgh, abcd, 0xF0);
  for (; blocks; --blocks, p += 64) {
    __m128i save_abef = abef, save_cdgh = cdgh, m[16];
    for (int g = 0; g < 4; ++g)
      m[g] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * g)), bswap);
    for (int g = 4; g < 16; ++g) /* the message schedule, four words at a time */
      m[g] = _mm_sha256msg2_epu32(
          _mm_add_epi32(_mm_sha256msg1_epu32(m[g - 4], m[g - 3]),
                        _mm_alignr_epi8(m[g - 1], m[g - 2], 4)),
          m[g - 1]);
    for (int g = 0; g < 16; ++g) { /* two rounds per instruction */
      __m128i wk = _mm_add_epi32(m[g], _mm_loadu_si128((const __m128i *)&kK[4 * g]));
      cdgh = _mm_sha256rnds2_epu32(cdgh, abef, wk);
      abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(wk, 0x0E));
    }
    abef = _mm_add_epi32(abef, save_abef);
    cdgh = _mm_add_epi32(cdgh, save_cdgh);
  }
  __m128i feba = _mm_shuffle_epi32(abef, 0x1B), dchg = _mm_shuffle_epi32(cdgh, 0xB1);
  _mm_storeu_si128((__m128i *)&h[0], _mm_blend_epi16(feba, dchg, 0xF0));
  _mm_storeu_si128((__m128i *)&h[4], _mm_alignr_epi8(dchg, feba, 8));
}
#endif

static void sha256_blocks_portable(uint32_t h[8], const unsigned char *p, size_t blocks) {
  for (; blocks; --blocks, p += 64) sha256_block(h, p);
}

int dlx_digest_uses_sha_ni(void) {
#ifdef DLX_HAVE_SHA_NI
  static _Atomic int have = -1; /* a race only computes the same answer twice */
  int v = have;
  if (v < 0) {
    /* CPUID: leaf 1 ECX bit 9 SSSE3, bit 19 SSE4.1; leaf 7 EBX bit 29 SHA */
    unsigned a, b, c, d;
    v = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 9)) && (c & (1u << 19)) &&
        __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 29));
    have = v;
  }
  return v;
#else
  return 0;
#endif
}

static void digest(const void *data, size_t n, char out[65], int accelerated) {
  uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  void (*blocks)(uint32_t *, const unsigned char *, size_t) = sha256_blocks_portable;
#ifdef DLX_HAVE_SHA_NI
  if (accelerated && dlx_digest_uses_sha_ni()) blocks = sha256_blocks_ni;
#else
  (void)accelerated;
#endif
  const unsigned char *p = data;
  size_t full = n / 64, left = n % 64;
  if (full) blocks(h, p, full);
  p += full * 64;
  /* Padding: 0x80, zeros, then the bit length big-endian; one or two blocks. */
  unsigned char tail[128] = {0};
  if (left) memcpy(tail, p, left);
  tail[left] = 0x80;
  size_t tlen = left < 56 ? 64 : 128;
  uint64_t bits = (uint64_t)n * 8u;
  for (int i = 0; i < 8; ++i) tail[tlen - 1 - i] = (unsigned char)(bits >> (8 * i));
  blocks(h, tail, tlen / 64);
  static const char hex[] = "0123456789abcdef";
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j) out[i * 8 + j] = hex[(h[i] >> (28 - 4 * j)) & 0xf];
  out[64] = '\0';
}

void dlx_digest_hex(const void *data, size_t n, char out[65]) { digest(data, n, out, 1); }

void dlx_digest_hex_portable(const void *data, size_t n, char out[65]) {
  digest(data, n, out, 0);
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
