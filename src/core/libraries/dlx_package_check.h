/*
 * dlx_package_check.h - whether an AOTInductor package's dlx operators are served, in this
 * process, by the libraries it was made with: its metadata carries "dlx.digest.<ns>" ->
 * the sha256 of the library each namespace was registered from when it was compiled
 * (dlx.torch.aoti_compile_and_package), compared with the libraries dlx_torch_register
 * loaded. Pure C over the metadata's strings (untrusted: fuzzed by fuzz_package_check).
 */
#ifndef DLX_PACKAGE_CHECK_H_
#define DLX_PACKAGE_CHECK_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DLX_DIGEST_KEY_PREFIX "dlx.digest."
#define DLX_MANIFEST_KEY "dlx_operators.json"
/* The manifest dlx writes for a program that calls no dlx operator. */
#define DLX_EMPTY_MANIFEST "{\"format\": 1, \"namespaces\": {}}"
#define DLX_NS_MAX 255 /* a longer namespace is not one dlx_torch_register accepts */

/* A namespace this process registered: the library's path and the sha256 (64 lowercase
 * hex) of the file it loaded. */
typedef struct dlx_registered_ns {
  const char *ns;
  const char *sha256;
  const char *path;
} dlx_registered_ns;

/* Checks n metadata pairs keys[i] -> values[i], of key_lens[i] and value_lens[i] bytes (a
 * NULL lengths array: the strings are NUL-terminated). 0 when every "dlx.digest.<ns>" key
 * names a namespace of regs registered from a library of exactly that digest (pairs with
 * other keys are not dlx's and pass), and the package does not carry a dlx manifest naming
 * operators without digests. -1 with a message in err otherwise: a key whose <ns> is not an
 * identifier, a value that is not 64 lowercase hex digits (a NUL or any other byte in it),
 * a namespace not registered, or registered from a library of another digest (the message
 * names the namespace, both digests and the registered library's path). */
int dlx_package_check(const char *const *keys, const size_t *key_lens,
                      const char *const *values, const size_t *value_lens, size_t n,
                      const dlx_registered_ns *regs, size_t nregs, char *err, size_t errlen);

/* Whether s[0..len) is 64 lowercase hex digits. */
int dlx_is_sha256_hex(const char *s, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* DLX_PACKAGE_CHECK_H_ */
