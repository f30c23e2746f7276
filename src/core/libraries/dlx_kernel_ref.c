/*
 * dlx_kernel_ref.c - a staged call's kernel by content (dlx_kernel_ref.h).
 */
#include "dlx_kernel_ref.h"

#include "dlx_identifier.h"

#include <stdio.h>
#include <string.h>

int dlx_kernel_ref_valid_name(const char *s, size_t len) {
  return dlx_is_identifier(s, len, DLX_REF_NAME_MAX);
}

static int is_digest(const char *s, int64_t len) {
  if (len != 64) return 0;
  for (int i = 0; i < 64; ++i)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
  return 1;
}

/* Printable ASCII of untrusted text (at most max bytes, "..." past it) into out. */
static void shown(char *out, size_t cap, const char *s, size_t len, size_t max) {
  size_t n = 0;
  for (size_t i = 0; i < len && i < max && n + 1 < cap; ++i) {
    char c = s[i];
    out[n++] = c >= 0x20 && c < 0x7f ? c : '?';
  }
  if (len > max && n + 4 < cap) {
    memcpy(out + n, "...", 3);
    n += 3;
  }
  out[n] = 0;
}

static int named(const dlx_attr *a, const char *name) {
  size_t len = strlen(name);
  return a->name_len == len && memcmp(a->name, name, len) == 0;
}

int dlx_kernel_ref_decode(const dlx_attr *attrs, int32_t nattrs, dlx_kernel_ref *ref,
                          char *err, size_t errlen) {
  static const char *const keys[4] = {"dlx_lib", "dlx_name", "dlx_decl", "dlx_from"};
  const dlx_attr *found[4] = {NULL, NULL, NULL, NULL};
  int old = 0;
  memset(ref, 0, sizeof *ref);
  for (int32_t i = 0; i < nattrs; ++i) {
    const dlx_attr *a = &attrs[i];
    if (!a->name) continue;
    if (named(a, "dlx_id")) old = 1;
    for (int k = 0; k < 4; ++k) {
      if (!named(a, keys[k])) continue;
      if (found[k]) {
        snprintf(err, errlen, "dlx: the call names its kernel twice (attribute %s): not a "
                 "program dlx staged, or one altered since", keys[k]);
        return -1;
      }
      found[k] = a;
    }
  }
  /* the name first: every later message names the kernel */
  const dlx_attr *nm = found[1];
  if (!nm || nm->type != DLX_ATTR_STR || nm->len < 0 || !nm->data ||
      !dlx_kernel_ref_valid_name(nm->data, (size_t)nm->len)) {
    char text[64] = "";
    if (nm && nm->type == DLX_ATTR_STR && nm->len >= 0 && nm->data)
      shown(text, sizeof text, nm->data, (size_t)nm->len, 40);
    snprintf(err, errlen, "dlx: the call's kernel name (attribute dlx_name) is %s%s%s%s",
             !nm ? "missing" : nm->type != DLX_ATTR_STR ? "not a str" : "'",
             nm && nm->type == DLX_ATTR_STR ? text : "",
             nm && nm->type == DLX_ATTR_STR ? "', not a kernel name" : "",
             old ? " (a program staged by an older dlx, which named kernels by a process-local "
                   "dlx_id: stage it again)"
                 : ": not a program dlx staged, or one altered since");
    return -1;
  }
  ref->name = nm->data;
  ref->name_len = (size_t)nm->len;
  char name[DLX_REF_NAME_MAX + 1];
  memcpy(name, ref->name, ref->name_len);
  name[ref->name_len] = 0;

  const dlx_attr *lib = found[0];
  if (!lib || lib->type != DLX_ATTR_STR || !lib->data || !is_digest(lib->data, lib->len)) {
    snprintf(err, errlen, "%s(): the call's library digest (attribute dlx_lib) is %s%s", name,
             !lib ? "missing" : "not a sha256 (64 lowercase hex digits)",
             old ? " (a program staged by an older dlx, which named kernels by a process-local "
                   "dlx_id: stage it again)"
                 : ": not a program dlx staged, or one altered since");
    return -1;
  }
  ref->digest = lib->data;

  const dlx_attr *decl = found[2];
  if (!decl || decl->type != DLX_ATTR_STR || decl->len <= 0 || !decl->data ||
      decl->len > DLX_REF_DECL_MAX) {
    snprintf(err, errlen, "%s(): the call's declaration (attribute dlx_decl) is %s: not a "
             "program dlx staged, or one altered since", name,
             !decl ? "missing" : decl->type != DLX_ATTR_STR ? "not a str"
                               : decl->len <= 0 ? "empty" : "too long");
    return -1;
  }
  for (int64_t i = 0; i < decl->len; ++i) {
    unsigned char c = ((const unsigned char *)decl->data)[i];
    if (c < 0x20 && c != '\t' && c != '\n') {
      snprintf(err, errlen, "%s(): the call's declaration (attribute dlx_decl) holds the "
               "control byte 0x%02x: not a program dlx staged, or one altered since", name, c);
      return -1;
    }
  }
  ref->decl = decl->data;
  ref->decl_len = (size_t)decl->len;

  const dlx_attr *from = found[3];
  if (from) {
    if (from->type != DLX_ATTR_STR || from->len < 0 || from->len > DLX_REF_FROM_MAX ||
        (from->len && (!from->data || memchr(from->data, 0, (size_t)from->len)))) {
      snprintf(err, errlen, "%s(): the call's traced-from path (attribute dlx_from) is not a "
               "path: not a program dlx staged, or one altered since", name);
      return -1;
    }
    ref->from = from->data;
    ref->from_len = (size_t)from->len;
  }
  return 0;
}

int64_t dlx_kernel_ref_find(const dlx_kernel_ref *ref, const dlx_kernel_key *keys, int64_t n,
                            char *err, size_t errlen) {
  int64_t same_lib = -1, same_name = -1, same_path = -1;
  for (int64_t i = 0; i < n; ++i) {
    const dlx_kernel_key *k = &keys[i];
    int lib = memcmp(k->digest, ref->digest, 64) == 0;
    int name = k->name_len == ref->name_len && memcmp(k->name, ref->name, ref->name_len) == 0;
    if (lib && name) {
      if (k->decl_len == ref->decl_len && memcmp(k->decl, ref->decl, ref->decl_len) == 0)
        return i;
      char staged[160], now[160];
      shown(staged, sizeof staged, ref->decl, ref->decl_len, 120);
      shown(now, sizeof now, k->decl, k->decl_len, 120);
      snprintf(err, errlen, "%.*s(): the program was staged with the declaration \"%s\", but "
               "library sha256 %.64s declares \"%s\": not run (the program was altered since "
               "it was staged)", (int)ref->name_len, ref->name, staged, k->digest, now);
      return DLX_REF_MISMATCH;
    }
    if (lib && same_lib < 0) same_lib = i;
    if (name && same_name < 0) same_name = i;
    if (name && same_path < 0 && k->path && ref->from_len && strlen(k->path) == ref->from_len &&
        memcmp(k->path, ref->from, ref->from_len) == 0)
      same_path = i;
  }
  char from[DLX_REF_FROM_MAX / 16 + 8];
  shown(from, sizeof from, ref->from, ref->from_len, DLX_REF_FROM_MAX / 16);
  if (same_lib >= 0) {
    /* NOT_LOADED, not MISMATCH: dlx.jax registers a library's kernels as they are staged,
     * so the library may be registered only in part; the caller's finder registers all of
     * it, and this message stands when the kernel is still not there */
    snprintf(err, errlen, "%.*s(): library sha256 %.64s (traced from %s) has no declared kernel "
             "of that name: not a program dlx staged, or one altered since", (int)ref->name_len,
             ref->name, ref->digest, from[0] ? from : "an unnamed file");
    return DLX_REF_NOT_LOADED;
  }
  if (same_path >= 0) { /* the file it was traced from, with other content now */
    snprintf(err, errlen, "%.*s(): the program runs kernel '%.*s' of library sha256 %.64s, "
             "but %s, the file it was traced from, is loaded here with other content (sha256 "
             "%.64s): the library changed since the program was staged; not run (load the "
             "library the program was staged with, or stage the program again)",
             (int)ref->name_len, ref->name, (int)ref->name_len, ref->name, ref->digest, from,
             keys[same_path].digest);
    return DLX_REF_NOT_LOADED;
  }
  snprintf(err, errlen, "%.*s(): the program runs kernel '%.*s' of library sha256 %.64s "
           "(traced from %s), which this process has not loaded and dlx's cache does not "
           "hold%s: load it first (lib = dlx.load(path); dlx.jax.register(lib)), or build it "
           "with dlx.build so the cache holds it", (int)ref->name_len, ref->name,
           (int)ref->name_len, ref->name, ref->digest, from[0] ? from : "an unnamed file",
           same_name >= 0 ? "; a kernel of that name from another library is loaded and is "
                            "not run"
                          : "");
  return DLX_REF_NOT_LOADED;
}
