/* dlx_package_check.c - a package's dlx digests against the libraries this process
 * registered (dlx_package_check.h). */
#include "dlx_package_check.h"

#include "dlx_identifier.h"

#include <stdio.h>
#include <string.h>

int dlx_is_sha256_hex(const char *s, size_t len) {
  if (!s || len != 64) return 0;
  for (size_t i = 0; i < len; ++i)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
  return 1;
}

/* s[0..len) for a message: at most 64 bytes, anything not printable ASCII as '?' (the
 * metadata is untrusted: no control bytes, no unbounded copy). */
static void shown(const char *s, size_t len, char out[72]) {
  size_t n = len < 64 ? len : 64, i;
  for (i = 0; i < n; ++i) out[i] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
  if (len > n) out[i++] = '.', out[i++] = '.', out[i++] = '.';
  out[i] = '\0';
}

int dlx_package_check(const char *const *keys, const size_t *key_lens,
                      const char *const *values, const size_t *value_lens, size_t n,
                      const dlx_registered_ns *regs, size_t nregs, char *err, size_t errlen) {
  char scratch[1];
  if (!err || !errlen) err = scratch, errlen = sizeof scratch;
  err[0] = '\0';
  if (n && (!keys || !values)) {
    snprintf(err, errlen, "dlx: no metadata keys or values given for %zu entries", n);
    return -1;
  }
  const size_t plen = sizeof DLX_DIGEST_KEY_PREFIX - 1;
  size_t digests = 0;
  int manifest_names_ops = 0;
  for (size_t i = 0; i < n; ++i) {
    const char *k = keys[i], *v = values[i];
    if (!k) continue;
    size_t klen = key_lens ? key_lens[i] : strlen(k);
    size_t vlen = v ? (value_lens ? value_lens[i] : strlen(v)) : 0;
    if (klen == sizeof DLX_MANIFEST_KEY - 1 && memcmp(k, DLX_MANIFEST_KEY, klen) == 0) {
      manifest_names_ops = !(v && vlen == sizeof DLX_EMPTY_MANIFEST - 1 &&
                             memcmp(v, DLX_EMPTY_MANIFEST, vlen) == 0);
      continue;
    }
    if (klen < plen || memcmp(k, DLX_DIGEST_KEY_PREFIX, plen) != 0) continue;
    ++digests;
    const char *ns = k + plen;
    size_t nslen = klen - plen;
    char a[72], b[72];
    shown(k, klen, a);
    if (!dlx_is_identifier(ns, nslen, DLX_NS_MAX)) {
      snprintf(err, errlen,
               "dlx: the package's metadata key '%s' does not name a namespace (an "
               "identifier after '" DLX_DIGEST_KEY_PREFIX "'): not a package dlx made",
               a);
      return -1;
    }
    if (!dlx_is_sha256_hex(v, vlen)) {
      shown(v ? v : "", vlen, b);
      snprintf(err, errlen,
               "dlx: the package's %s is '%s', not a sha256 (64 lowercase hex digits): "
               "not a package dlx made, or made while namespace '%.*s''s library had "
               "changed on disk",
               a, b, (int)nslen, ns);
      return -1;
    }
    const dlx_registered_ns *r = NULL;
    for (size_t j = 0; j < nregs && !r; ++j)
      if (regs[j].ns && strlen(regs[j].ns) == nslen && memcmp(regs[j].ns, ns, nslen) == 0)
        r = &regs[j];
    if (!r) {
      snprintf(err, errlen,
               "dlx: the package calls dlx operators of namespace '%.*s' (library sha256 "
               "%.64s), and no library is registered under '%.*s' in this process: call "
               "dlx_torch_register(library, \"%.*s\", ...) with the library it was made "
               "with first",
               (int)nslen, ns, v, (int)nslen, ns, (int)nslen, ns);
      return -1;
    }
    if (!r->sha256 || strncmp(r->sha256, v, 64) != 0) {
      snprintf(err, errlen,
               "dlx: the package calls dlx operators of namespace '%.*s' made with a "
               "library of sha256 %.64s, and '%.*s' is registered here from another "
               "library: %s (sha256 %s); its kernels are not the ones the package was "
               "made with",
               (int)nslen, ns, v, (int)nslen, ns, r->path ? r->path : "(unknown)",
               r->sha256 ? r->sha256 : "(unknown)");
      return -1;
    }
  }
  if (manifest_names_ops && digests == 0) {
    snprintf(err, errlen,
             "dlx: the package's " DLX_MANIFEST_KEY " names dlx operators but it carries no "
             DLX_DIGEST_KEY_PREFIX "<namespace> entries to check them by: compile it with "
             "dlx.torch.aoti_compile_and_package of this dlx");
    return -1;
  }
  return 0;
}
