/* dlx_locked_build.c - lock, check, compile to a temp file, publish atomically. */
#include "dlx_locked_build.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dlx_cache_dir.h"
#include "dlx_seal.h"

/* A trusted, whole file is there and it is not the one the caller failed to load:
 * the loader's own check (dlx_cache_open_trusted), on the file's descriptor. */
static int usable(const char *path, uint64_t known_bad_ino) {
  char folder[4096], why[512];
  const char *slash = strrchr(path, '/');
  const char *name = slash ? slash + 1 : path;
  size_t len = !slash ? 0 : slash == path ? 1 : (size_t)(slash - path);
  if (len >= sizeof folder) return 0;
  if (len) {
    memcpy(folder, path, len);
    folder[len] = '\0';
  } else {
    snprintf(folder, sizeof folder, ".");
  }
  int dirfd = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirfd < 0) return 0;
  int fd = -1;
  int trusted = dlx_cache_open_trusted(dirfd, name, &fd, why, sizeof why);
  close(dirfd);
  if (trusted != 1) return 0;
  struct stat st;
  int ok = fstat(fd, &st) == 0 && (known_bad_ino == 0 || (uint64_t)st.st_ino != known_bad_ino);
  close(fd);
  return ok;
}

typedef struct waiting_ctx {
  const char *final_path;
  void (*progress)(void *ctx, const char *line);
  void *ctx;
  double timeout_s;
} waiting_ctx;

/* Said once, so a user whose import seems stuck knows why. */
static void say_waiting(void *p) {
  const waiting_ctx *w = p;
  if (!w->progress) return;
  char line[4300];
  if (w->timeout_s > 0)
    snprintf(line, sizeof line,
             "dlx: waiting for another build of %s (another thread or process holds its lock; "
             "giving up after %g s, DLX_BUILD_TIMEOUT)",
             w->final_path, w->timeout_s);
  else
    snprintf(line, sizeof line,
             "dlx: waiting for another build of %s (another thread or process holds its lock)",
             w->final_path);
  w->progress(w->ctx, line);
}

int dlx_build_lock(const char *final_path, const char *lock_path, double timeout_s,
                   void (*progress)(void *ctx, const char *line), void *ctx, dlx_lock *lock,
                   char *err, size_t errlen) {
  waiting_ctx wctx = {final_path, progress, ctx, timeout_s};
  char why[4400];
  if (dlx_lock_acquire_timeout(lock_path, timeout_s, say_waiting, &wctx, lock, why,
                               sizeof why)) {
    snprintf(err, errlen, "%s%s", why,
             timeout_s > 0 ? " (another build of that file; DLX_BUILD_TIMEOUT)" : "");
    return -1;
  }
  return 0;
}

int dlx_build_step(char *const *argv, double timeout_s, void (*tick)(void *ctx), void *ctx,
                   char **output, int *status, char *err, size_t errlen) {
  char why[4400];
  int timed_out = 0;
  if (dlx_run_capture_ticking(argv, timeout_s, tick, ctx, output, status, &timed_out, why,
                              sizeof why)) {
    if (timed_out)
      snprintf(err, errlen, "the compiler timed out (DLX_BUILD_TIMEOUT=%g s): %s", timeout_s,
               why);
    else
      snprintf(err, errlen, "%s", why);
    return -1;
  }
  if (*status != 0) {
    snprintf(err, errlen, "compiler exited with status %d", *status);
    return -1;
  }
  return 0;
}

int dlx_addon_build(const char *final_path, const dlx_compile_spec *spec, uint64_t known_bad_ino,
                    void (*progress)(void *ctx, const char *line), void *ctx,
                    dlx_build_result *res, char *err, size_t errlen) {
  res->built = 0;
  res->output = NULL;
  res->status = 0;
  char lock_path[4096], temp[4096];
  if (snprintf(lock_path, sizeof lock_path, "%s.lock", final_path) >= (int)sizeof lock_path ||
      dlx_temp_path(final_path, temp, sizeof temp) != 0) {
    snprintf(err, errlen, "path too long: %s", final_path);
    return -1;
  }
  dlx_lock lock;
  if (dlx_build_lock(final_path, lock_path, spec->timeout_s, progress, ctx, &lock, err, errlen))
    return -1;
  int rc = -1;
  char **argv = NULL;
  int argc = 0;
  /* Whoever held the lock before us may have built it already. */
  if (usable(final_path, known_bad_ino)) {
    rc = 0;
    goto done;
  }
  dlx_compile_spec s = *spec;
  s.output = temp;
  if (dlx_compile_argv(&s, &argv, &argc, err, errlen)) goto done;
  if (progress) {
    char line[4200];
    snprintf(line, sizeof line, "dlx: building %s (one time; later imports load it)", final_path);
    progress(ctx, line);
  }
  if (dlx_build_step(argv, s.timeout_s, NULL, NULL, &res->output, &res->status, err, errlen)) {
    unlink(temp);
    goto done;
  }
  if (dlx_seal_file(temp, err, errlen) || dlx_publish(temp, final_path, err, errlen)) {
    unlink(temp);
    goto done;
  }
  res->built = 1;
  rc = 0;
done:
  if (argv) dlx_argv_free(argv, argc);
  dlx_lock_release(&lock);
  return rc;
}
