/*
 * dlx_identity.h - what a torch addon binary was built for, as one string, and
 * the cache file name derived from it. Any fact that changes the binary is in
 * the identity, so a stale addon is never loaded: a mismatch means rebuild.
 */
#ifndef DLX_IDENTITY_H_
#define DLX_IDENTITY_H_

#include <stddef.h>

#include "dlx_backend.h"

typedef struct dlx_addon_facts {
  const char *torch_version;  /* torch.__version__ incl. build tag, e.g. "2.11.0+cu130" */
  int cxx11_abi;              /* torch._C._GLIBCXX_USE_CXX11_ABI (any non-zero is 1) */
  dlx_backend backend;
  const char *python_abi_tag; /* e.g. "cpython-311-x86_64-linux-gnu" */
  int dlpack_major, dlpack_minor;
  const char *source_digest;  /* dlx_digest_hex of the addon source text */
  const char *flags;          /* compiler flags that affect the binary; NULL is "" */
} dlx_addon_facts;

/* SHA-256 of data[0..n), 64 lowercase hex digits and a NUL. */
void dlx_digest_hex(const void *data, size_t n, char out[65]);
/* The same without the CPU's SHA instructions (for tests comparing the two), and whether
 * dlx_digest_hex uses them on this CPU (x86 SHA-NI). */
void dlx_digest_hex_portable(const void *data, size_t n, char out[65]);
int dlx_digest_uses_sha_ni(void);

/* "dlx-torch-addon;torch=V;cxx11abi=0|1;backend=B;python=T;dlpack=M.m;source=HEX;
 * flags=SHA256(flags)" on one line. 0, or -1 if it does not fit in outlen or a
 * field is missing, empty, or holds ';' or a control character (which would make
 * the string ambiguous or multi-line). */
int dlx_addon_identity(const dlx_addon_facts *f, char *out, size_t outlen);

/* "libdlx_torch_<major>.<minor>_<backend>_<first 12 hex of sha256(identity)>.so",
 * major.minor from torch_version. 0, or -1 (identity failed, torch_version does
 * not start with "<digits>.<digits>", or it does not fit). */
int dlx_addon_filename(const dlx_addon_facts *f, char *out, size_t outlen);

#endif /* DLX_IDENTITY_H_ */
