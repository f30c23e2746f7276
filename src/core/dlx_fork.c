/* dlx_fork.c - descriptors a forked child must not keep (dlx_fork.h). */
#include "dlx_fork.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

/* A handful at most are open at once (a lock and two pipe ends per building thread). */
#define DLX_FORK_SLOTS 256

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int slots[DLX_FORK_SLOTS];
static int used; /* slots[0..used) may hold descriptors; -1 marks a free one */
static _Thread_local int own_fork;

static void prepare(void) { pthread_mutex_lock(&mu); }

static void parent(void) { pthread_mutex_unlock(&mu); }

/* The forking thread held `mu` (prepare): no registration is half done. The registered
 * descriptors are other threads' (or this one's, held across the fork): none is the
 * child's to use. */
static void child(void) {
  if (!own_fork) {
    for (int i = 0; i < used; ++i)
      if (slots[i] >= 0) close(slots[i]);
    used = 0;
  }
  pthread_mutex_unlock(&mu);
}

static void install(void) { (void)pthread_atfork(prepare, parent, child); }

/* With `mu` held. A full table leaves fd unregistered: the child keeps it, as before. */
static void add(int fd) {
  for (int i = 0; i < used; ++i)
    if (slots[i] < 0) {
      slots[i] = fd;
      return;
    }
  if (used < DLX_FORK_SLOTS) slots[used++] = fd;
}

int dlx_fork_open(const char *path, int flags, mode_t mode) {
  pthread_once(&once, install);
  pthread_mutex_lock(&mu);
  int fd;
  do fd = open(path, flags | O_CLOEXEC, mode);
  while (fd < 0 && errno == EINTR);
  int e = errno;
  if (fd >= 0) add(fd);
  pthread_mutex_unlock(&mu);
  errno = e;
  return fd;
}

int dlx_fork_pipe(int fds[2]) {
  pthread_once(&once, install);
  pthread_mutex_lock(&mu);
  int rc = pipe2(fds, O_CLOEXEC), e = errno;
  if (rc == 0) {
    add(fds[0]);
    add(fds[1]);
  }
  pthread_mutex_unlock(&mu);
  errno = e;
  return rc;
}

int dlx_fork_close(int fd) {
  if (fd < 0) return 0;
  pthread_mutex_lock(&mu); /* closed and forgotten together: no fork sees it half done */
  for (int i = 0; i < used; ++i)
    if (slots[i] == fd) slots[i] = -1;
  while (used > 0 && slots[used - 1] < 0) --used;
  int rc = close(fd);
  pthread_mutex_unlock(&mu);
  return rc;
}

pid_t dlx_fork_own(void) {
  own_fork = 1;
  pid_t pid = fork();
  if (pid != 0) own_fork = 0; /* the child execs or _exits: its copy never matters */
  return pid;
}

int dlx_fork_registered(void) {
  pthread_mutex_lock(&mu);
  int n = 0;
  for (int i = 0; i < used; ++i) n += slots[i] >= 0;
  pthread_mutex_unlock(&mu);
  return n;
}
