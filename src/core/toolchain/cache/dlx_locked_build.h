/*
 * dlx_locked_build.h - build one library into its final place, safely with any
 * number of concurrent builders: under a file lock, into a temp file in the same
 * folder, sealed, published by an atomic rename. The addon's build is this step
 * whole (dlx_addon_build); dlx.build (dlx_kernel_build.c) uses its lock and compiler
 * step.
 */
#ifndef DLX_LOCKED_BUILD_H_
#define DLX_LOCKED_BUILD_H_

#include <stdint.h>

#include "dlx_cache_dir.h"
#include "dlx_cache_lock.h"
#include "dlx_compile_command.h"

typedef struct dlx_build_result {
  int built;    /* 1: this call compiled it; 0: a valid library was already there */
  char *output; /* the compiler's output (malloc'd, may be NULL); caller frees */
  int status;   /* the compiler's exit status when it ran */
} dlx_build_result;

/* Make `final_path` a trusted library built from `spec` (whose `output` is ignored).
 * Under the lock `final_path`.lock: a trusted file already there is kept unless it is
 * the file `known_bad_ino` names (one the caller failed to load); otherwise compile to
 * a temp file and publish it. `progress` (may be NULL) gets one line before compiling.
 * Returns 0, or -1 with `err` set (and res->output holding the compiler's words). */
int dlx_addon_build(const char *final_path, const dlx_compile_spec *spec, uint64_t known_bad_ino,
                    void (*progress)(void *ctx, const char *line), void *ctx,
                    dlx_build_result *res, char *err, size_t errlen);

/* What every build dlx runs shares (the addon's and dlx.build's). */

/* Takes the build lock `lock_path` of `final_path` within timeout_s (DLX_BUILD_TIMEOUT;
 * <= 0 waits forever). When another process holds it, `progress` (may be NULL) is told
 * once what this one waits for. 0, or -1 with err saying it gave up. */
int dlx_build_lock(const char *final_path, const char *lock_path, double timeout_s,
                   void (*progress)(void *ctx, const char *line), void *ctx, dlx_lock *lock,
                   char *err, size_t errlen);

/* Runs one compiler command (dlx_run_capture_ticking) within timeout_s. 0 when it ran and
 * exited 0; -1 with err: it timed out (naming DLX_BUILD_TIMEOUT; its process group was
 * killed), could not be started, or exited with a status (*status). *output (caller
 * frees; may be NULL) holds what it printed either way. */
int dlx_build_step(char *const *argv, double timeout_s, void (*tick)(void *ctx), void *ctx,
                   char **output, int *status, char *err, size_t errlen);

#endif /* DLX_LOCKED_BUILD_H_ */
