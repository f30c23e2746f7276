/*
 * dlx_cache.h - the addon cache folder: where it is, whether what is in it may
 * be loaded (a library is code: only the user's own, unwritable-by-others files
 * qualify), a lock so concurrent processes build once, and atomic publishing.
 */
#ifndef DLX_CACHE_H_
#define DLX_CACHE_H_

#include <stddef.h>

/* DLX_CACHE_DIR, else $XDG_CACHE_HOME/dlx, else $HOME/.cache/dlx. Empty strings
 * count as unset, and so does a relative XDG_CACHE_HOME (the XDG spec says to
 * ignore it). Trailing slashes of the base are dropped. 0, or -1 with err. */
int dlx_cache_dir_resolve(const char *env_dlx_cache_dir, const char *env_xdg_cache_home,
                          const char *env_home, char *out, size_t outlen, char *err,
                          size_t errlen);

/* mkdir -p `dir` (folders it creates are 0700), then refuse the final folder if it
 * is a symlink, not a directory, not owned by the effective uid, or writable by
 * group or others. 0, or -1 with err. */
int dlx_cache_dir_ensure(const char *dir, char *err, size_t errlen);

/* 1 trusted, 0 missing, -1 refused with the reason in err. Trusted: not a symlink
 * (never followed), a regular file, owned by geteuid(), not group/other writable,
 * at least 64 bytes and starting with the ELF magic. Deeper corruption is the
 * loader's to find. */
int dlx_cache_file_trusted(const char *path, char *err, size_t errlen);

/* An exclusive advisory lock (flock) on `lock_path`, created 0600 if missing; a
 * symlink there is refused. Blocks until acquired. 0, or -1 with err (fd -1). */
typedef struct dlx_lock {
  int fd;
} dlx_lock;
int dlx_lock_acquire(const char *lock_path, dlx_lock *lock, char *err, size_t errlen);
/* Unlocks and closes; safe to call twice. */
void dlx_lock_release(dlx_lock *lock);
/* The same with a deadline: when another process holds the lock, `waiting` (may be
 * NULL) is called once, then the lock is retried until it is free or timeout_s
 * seconds (> 0; <= 0 waits forever) have passed: -1 with err saying it gave up. */
int dlx_lock_acquire_timeout(const char *lock_path, double timeout_s, void (*waiting)(void *ctx),
                             void *ctx, dlx_lock *lock, char *err, size_t errlen);

/* "<final>.tmp.<pid>.<counter>": same folder (so rename is atomic), unique per
 * process and call. 0, or -1 if it does not fit. */
int dlx_temp_path(const char *final_path, char *out, size_t outlen);

/* Makes the finished temp file mode 0755, fsyncs it, renames it over final_path
 * (atomic: readers see the old file or the new one, never a partial one), and
 * fsyncs the folder. On failure the temp file is removed. 0, or -1 with err. */
int dlx_publish(const char *temp_path, const char *final_path, char *err, size_t errlen);

#endif /* DLX_CACHE_H_ */
