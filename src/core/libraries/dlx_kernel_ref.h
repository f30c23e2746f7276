/*
 * dlx_kernel_ref.h - which kernel a staged XLA call names, by content: the sha256 of its
 * library's file, its name and its declaration (jax.md, "Saved programs"). A serialized
 * program is data from anywhere: its attributes are decoded and checked here, then looked
 * up among the kernels dlx registered, never trusted to pick anything else.
 *
 * Pure C over plain structs (no allocation); shipped beside the XLA handler's source and
 * compiled with it, like dlx_invoke.h.
 */
#ifndef DLX_KERNEL_REF_H_
#define DLX_KERNEL_REF_H_

#include <stddef.h>
#include <stdint.h>

#include "dlx_invoke.h"

#define DLX_REF_NAME_MAX 127   /* a kernel name's bytes (a C identifier) */
#define DLX_REF_DECL_MAX 8192  /* a declaration's bytes */
#define DLX_REF_FROM_MAX 4096  /* the traced-from path's bytes (messages only) */

/* The call's reference; the pointers are into the attributes (not NUL-terminated). */
typedef struct dlx_kernel_ref {
  const char *digest; /* 64 lowercase hex: "dlx_lib" */
  const char *name;   /* "dlx_name" */
  size_t name_len;
  const char *decl;   /* "dlx_decl" */
  size_t decl_len;
  const char *from;   /* "dlx_from", may be empty: where it was traced from, for messages */
  size_t from_len;
} dlx_kernel_ref;

/* A registered kernel as the lookup sees it (NUL-terminated strings). */
typedef struct dlx_kernel_key {
  char digest[65];
  const char *name;
  size_t name_len;
  const char *decl;
  size_t decl_len;
  const char *path; /* the file it was loaded from (NULL: unknown), for messages */
} dlx_kernel_key;

/* Decode the reference from a call's attributes: "dlx_lib" (STR, a sha256 in hex),
 * "dlx_name" (STR, a C identifier), "dlx_decl" (STR, no NUL or control byte but tab and
 * newline), "dlx_from" (optional STR, no NUL). Each at most once. 0, or -1 with why in err
 * (the kernel's name in it when the name is valid; an older dlx's "dlx_id" said so). */
int dlx_kernel_ref_decode(const dlx_attr *attrs, int32_t nattrs, dlx_kernel_ref *ref,
                          char *err, size_t errlen);

#define DLX_REF_NOT_LOADED (-1) /* no such kernel registered: the caller may find it */
#define DLX_REF_MISMATCH (-2)   /* the kernel is there, its declaration is not as staged */

/* The index of the key with the ref's digest, name and declaration among keys[0..n), or
 * DLX_REF_NOT_LOADED / DLX_REF_MISMATCH with a message in err naming the kernel, the
 * library (digest and traced-from path) and what to do. */
int64_t dlx_kernel_ref_find(const dlx_kernel_ref *ref, const dlx_kernel_key *keys, int64_t n,
                            char *err, size_t errlen);

/* 1 when s[0..len) is a kernel name dlx declares (a C identifier, at most
 * DLX_REF_NAME_MAX bytes). */
int dlx_kernel_ref_valid_name(const char *s, size_t len);

#endif /* DLX_KERNEL_REF_H_ */
