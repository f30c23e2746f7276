/*
 * dlx_cache_lock.h - a lock so concurrent processes build a cached library once, and
 * atomic publishing (temp file in the same folder, renamed over the final name).
 */
#ifndef DLX_CACHE_LOCK_H_
#define DLX_CACHE_LOCK_H_

#include <stddef.h>

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

#endif /* DLX_CACHE_LOCK_H_ */
