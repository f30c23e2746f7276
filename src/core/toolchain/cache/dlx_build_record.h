/*
 * dlx_build_record.h - what a cached kernel library was built from, written beside it
 * ("<name>-<key1>.build"): the sources, every header the compile read with its digest,
 * the compilers (with a stat signature that says their recorded version still holds),
 * and the commands. The warm path reads it to re-check the headers without running a
 * compiler; `python -m dlx cache list` shows it. Read back as untrusted text.
 */
#ifndef DLX_BUILD_RECORD_H_
#define DLX_BUILD_RECORD_H_

#include <stddef.h>

#include "dlx_build_plan.h"

typedef struct dlx_manifest_tool {
  const char *path;           /* resolved compiler path; NULL: that language unused */
  const char *sig;            /* "<dev>:<ino>:<size>:<mtime ns>" of that file */
  const char *version_digest; /* digest of its --version output */
  const char *version;        /* that output on one line, for people */
} dlx_manifest_tool;

typedef struct dlx_manifest_file {
  const char *digest; /* 64 hex */
  const char *path;
} dlx_manifest_file;

typedef struct dlx_manifest {
  const char *name, *key1, *lib, *arch; /* arch: the verbose sentence; NULL without CUDA */
  dlx_manifest_tool tools[DLX_LANG_COUNT];
  dlx_manifest_file *sources, *deps;
  size_t n_sources, n_deps;
  const char **commands;
  size_t n_commands;
  char *text_; /* parse: the owned copy the strings point into */
} dlx_manifest;

/* Lines "dlx-build 1", then "name N", "key HEX", "lib FILE", "tool LANG SIG VDIGEST PATH",
 * "version LANG TEXT", "source HEX PATH", "dep HEX PATH", "arch TEXT", "command TEXT".
 * Malloc'd text, or NULL (out of memory, or a field holding a newline or missing). */
char *dlx_manifest_format(const dlx_manifest *m);

/* The reverse. Strict: the first line, every known line's fields (hex digests, language
 * names, no empty path), name/key/lib present and at most 65536 sources or deps;
 * unknown keywords are skipped (a newer dlx may add some). 0, or -1 with err. Free with
 * dlx_manifest_free (also after a failure). */
int dlx_manifest_parse(const char *text, size_t len, dlx_manifest *m, char *err, size_t errlen);
void dlx_manifest_free(dlx_manifest *m);

/* 1 when s is 64 lowercase hex digits. */
int dlx_is_digest(const char *s);

#endif /* DLX_BUILD_RECORD_H_ */
