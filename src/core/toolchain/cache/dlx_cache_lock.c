/* dlx_cache_lock.c - the build lock (flock), temp names and atomic publishing. */
#include "dlx_cache_lock.h"
#include "dlx_core.h"
#include "dlx_fork.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int dlx_lock_acquire(const char *lock_path, dlx_lock *lock, char *err, size_t errlen) {
  return dlx_lock_acquire_timeout(lock_path, 0, NULL, NULL, lock, err, errlen);
}

int dlx_lock_acquire_timeout(const char *lock_path, double timeout_s, void (*waiting)(void *ctx),
                             void *ctx, dlx_lock *lock, char *err, size_t errlen) {
  lock->fd = -1;
  /* registered: a child forked while it is held does not keep the lock (dlx_fork.h) */
  int fd = dlx_fork_open(lock_path, O_CREAT | O_RDWR | O_NOFOLLOW, 0600);
  if (fd < 0)
    return dlx_set_err(err, errlen, "cannot open lock file '%s': %s", lock_path,
                   errno == ELOOP ? "it is a symlink" : strerror(errno));
  int rc;
  do rc = flock(fd, LOCK_EX | LOCK_NB);
  while (rc != 0 && errno == EINTR);
  if (rc != 0 && errno == EWOULDBLOCK) {
    if (waiting) waiting(ctx); /* once: the holder may take minutes */
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long nap_ms = 10;
    for (;;) {
      if (timeout_s <= 0) {
        do rc = flock(fd, LOCK_EX);
        while (rc != 0 && errno == EINTR);
        break;
      }
      rc = flock(fd, LOCK_EX | LOCK_NB);
      if (rc == 0 || (errno != EWOULDBLOCK && errno != EINTR)) break;
      clock_gettime(CLOCK_MONOTONIC, &now);
      double left = timeout_s - ((double)(now.tv_sec - t0.tv_sec) +
                                 (double)(now.tv_nsec - t0.tv_nsec) / 1e9);
      if (left <= 0) {
        dlx_fork_close(fd);
        return dlx_set_err(err, errlen,
                           "gave up after %g s waiting for '%s': another process still holds it",
                           timeout_s, lock_path);
      }
      /* Polled, not blocked in flock: a blocking flock has no deadline. */
      double nap = (double)nap_ms / 1000.0 < left ? (double)nap_ms / 1000.0 : left;
      struct timespec ts = {(time_t)nap, (long)((nap - (double)(time_t)nap) * 1e9)};
      nanosleep(&ts, NULL);
      if (nap_ms < 200) nap_ms *= 2;
    }
  }
  if (rc != 0) {
    int e = errno;
    dlx_fork_close(fd);
    return dlx_set_err(err, errlen, "cannot lock '%s': %s", lock_path, strerror(e));
  }
  lock->fd = fd;
  return 0;
}

void dlx_lock_release(dlx_lock *lock) {
  if (!lock || lock->fd < 0) return;
  flock(lock->fd, LOCK_UN);
  dlx_fork_close(lock->fd);
  lock->fd = -1;
}

int dlx_temp_path(const char *final_path, char *out, size_t outlen) {
  /* Atomic: threads of one process may build at once. */
  static atomic_ulong counter;
  unsigned long c = atomic_fetch_add(&counter, 1);
  int n = snprintf(out, outlen, "%s.tmp.%ld.%lu", final_path, (long)getpid(), c);
  if (n < 0 || (size_t)n >= outlen) {
    if (outlen) out[0] = '\0';
    return -1;
  }
  return 0;
}

static void fsync_parent(const char *path) {
  char dir[4096];
  const char *slash = strrchr(path, '/');
  if (!slash) {
    snprintf(dir, sizeof dir, ".");
  } else {
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    if (n >= sizeof dir) return;
    memcpy(dir, path, n);
    dir[n] = '\0';
  }
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  /* Best effort: some filesystems reject fsync on folders; the rename stands. */
  (void)fsync(fd);
  close(fd);
}

int dlx_publish(const char *temp_path, const char *final_path, char *err, size_t errlen) {
  int fd = open(temp_path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return dlx_set_err(err, errlen, "cannot open '%s': %s", temp_path, strerror(errno));
  struct stat st;
  const char *what = NULL;
  int e = 0;
  if (fstat(fd, &st) != 0) what = "stat", e = errno;
  else if (!S_ISREG(st.st_mode)) what = "publish (not a regular file)", e = EINVAL;
  else if (fchmod(fd, 0755) != 0) what = "chmod", e = errno;
  else if (fsync(fd) != 0) what = "fsync", e = errno;
  close(fd);
  if (!what && rename(temp_path, final_path) != 0) what = "rename", e = errno;
  if (what) {
    unlink(temp_path);
    return dlx_set_err(err, errlen, "cannot %s '%s' to '%s': %s", what, temp_path, final_path,
                   strerror(e));
  }
  fsync_parent(final_path);
  return 0;
}
