/*
 * dlx_kernel_build.h - dlx.build: kernel libraries from C, C++ and CUDA sources in the
 * trusted cache (<cache>/kernels). The facts (compilers found in PATH, file digests, the
 * build record) are gathered here; the decisions are dlx_build_plan.h's; the lock, the
 * compiler runs, sealing and publishing are the locked build step's (dlx_locked_build.h).
 *
 * Warm path: resolve and stat the compilers, hash the sources, read the build record,
 * hash every header it lists, open the library checked (owner, mode, seal). No process
 * is started. Anything different (a header edited, a compiler upgraded, the library
 * missing or tampered with) rebuilds, under a lock, so concurrent builders compile once.
 */
#ifndef DLX_KERNEL_BUILD_H_
#define DLX_KERNEL_BUILD_H_

#include <stddef.h>

#include "dlx_build_plan.h"

typedef struct dlx_kernel_build_spec {
  const char *cache_dir; /* created and checked like the addon's; libraries go in kernels/ */
  const char *name;      /* dlx_build_name_ok */
  size_t n_sources;
  const char *const *sources; /* absolute paths; none when inline_text is given */
  const char *inline_text;    /* source text (dlx.load_inline), written to the cache */
  size_t inline_len;
  int lang_given;             /* 1: every source is `lang`; 0: from each file's extension */
  dlx_lang lang;
  dlx_compiler_env env;
  const char *path_env;       /* $PATH, for finding compilers */
  const char *dlx_include_dir;
  dlx_strs include_dirs, cflags, ldflags, libraries; /* include dirs absolute */
  const char *cuda_arch;      /* NULL: visible, else default */
  int visible_arch;           /* 0: none could be asked */
  const char *visible_from;   /* who answered, or why nobody could */
  double timeout_s;           /* DLX_BUILD_TIMEOUT for the lock wait and for the whole build */
  int verbose;                /* say the decisions and every command */
  void (*say)(void *ctx, const char *line); /* progress, waiting and verbose lines; NULL */
  void *ctx;
} dlx_kernel_build_spec;

typedef struct dlx_kernel_build_result {
  char path[4096]; /* the library in the cache */
  int fd;          /* opened and checked as the addon's (dlx_cache_open_trusted): load
                    * through it (dlx_cache_dlopen); -1 on failure. Caller closes. */
  int built;       /* 1: this call compiled it */
  char *log;       /* the failing compiler's whole output (malloc'd, may be NULL) */
  char *command;   /* the failing command, shell-quoted (malloc'd, may be NULL) */
} dlx_kernel_build_result;

/* 0, or -1 with err (a missing compiler names its Debian package; a compiler failure
 * says how it ended, with res->command and res->log). Free res with
 * dlx_kernel_build_result_free. */
int dlx_kernel_build(const dlx_kernel_build_spec *spec, dlx_kernel_build_result *res, char *err,
                     size_t errlen);
void dlx_kernel_build_result_free(dlx_kernel_build_result *res);

/* The resolved path of `cmd`'s first word (searched in path_env like execvp when it has
 * no '/'), symlinks resolved: 0, or -1 when not found or not executable. */
int dlx_which(const char *cmd, const char *path_env, char *out, size_t outlen);

#endif /* DLX_KERNEL_BUILD_H_ */
