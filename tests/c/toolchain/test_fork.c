/* test_fork.c - a fork() while dlx holds a build lock or a compiler's pipe leaves the
 * child none of them (dlx_fork.h): real processes, real flock, in a mkdtemp folder. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "dlx_cache_lock.h"
#include "dlx_compile_command.h"
#include "dlx_fork.h"

static char root[256], lock_path[300];
static char err[1024];

static int setup(void **state) {
  (void)state;
  snprintf(root, sizeof root, "/tmp/dlx-test-fork-XXXXXX");
  if (!mkdtemp(root)) return -1;
  snprintf(lock_path, sizeof lock_path, "%s/x.lock", root);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  unlink(lock_path);
  return rmdir(root);
}

static int is_open(int fd) { return fcntl(fd, F_GETFD) != -1 || errno != EBADF; }

/* Could another process take the lock now? */
static int lock_free(void) {
  int fd = open(lock_path, O_RDWR | O_CLOEXEC);
  int free_now = fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0;
  if (fd >= 0) close(fd);
  return free_now;
}

static void test_child_closes_registered(void **state) {
  (void)state;
  int base = dlx_fork_registered();
  int fd = dlx_fork_open(lock_path, O_CREAT | O_RDWR, 0600), p[2];
  assert_true(fd >= 0);
  assert_int_equal(dlx_fork_pipe(p), 0);
  int plain = open(lock_path, O_RDONLY | O_CLOEXEC);
  assert_int_equal(dlx_fork_registered(), base + 3);
  pid_t pid = fork();
  if (pid == 0) /* registered ones closed, others kept */
    _exit(!is_open(fd) && !is_open(p[0]) && !is_open(p[1]) && is_open(plain) ? 0 : 1);
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  /* dlx's own fork (a compiler) keeps them: it dup2s its pipe end */
  pid = dlx_fork_own();
  if (pid == 0) _exit(is_open(fd) && is_open(p[1]) ? 0 : 1);
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  assert_true(is_open(fd) && is_open(p[0]) && is_open(p[1])); /* the parent's are untouched */
  dlx_fork_close(fd);
  dlx_fork_close(p[0]);
  dlx_fork_close(p[1]);
  close(plain);
  assert_int_equal(dlx_fork_registered(), base);
}

/* A process holding a build lock forks (multiprocessing's "fork") and is then killed: the
 * lock must die with it, not live on in the child that never knew it held it. */
static void test_lock_dies_with_its_holder_not_its_child(void **state) {
  (void)state;
  int ready[2];
  assert_int_equal(pipe(ready), 0);
  pid_t holder = fork();
  if (holder == 0) {
    dlx_lock lock;
    if (dlx_lock_acquire(lock_path, &lock, err, sizeof err)) _exit(2);
    pid_t child = fork();
    if (child == 0) { /* lives on; holds nothing */
      /* says so itself: by now fork() has returned here, the child handler has run */
      pid_t me = getpid();
      (void)!write(ready[1], &me, sizeof me);
      close(ready[1]);
      sleep(30);
      _exit(0);
    }
    close(ready[1]);
    pause(); /* killed while holding the lock */
    _exit(3);
  }
  close(ready[1]);
  pid_t child = 0;
  assert_int_equal(read(ready[0], &child, sizeof child), (ssize_t)sizeof child);
  close(ready[0]);
  assert_false(lock_free()); /* the holder has it */
  kill(holder, SIGKILL);
  int status;
  assert_int_equal(waitpid(holder, &status, 0), holder);
  int free_now = lock_free(); /* the child lives on */
  kill(child, SIGKILL); /* not ours to reap (the holder's child, now init's) */
  assert_true(free_now);
}

/* Running a compiler registers its pipe ends and forgets them all again: its own fork kept
 * them for the dup2s. */
static void test_run_capture_leaves_nothing_registered(void **state) {
  (void)state;
  char *const argv[] = {"/bin/sh", "-c", "echo hi", NULL};
  char *out = NULL;
  int status = -1, timed_out = 0;
  assert_int_equal(dlx_run_capture_ticking(argv, 30, NULL, NULL, &out, &status, &timed_out, err,
                                           sizeof err),
                   0);
  assert_int_equal(status, 0);
  assert_string_equal(out, "hi\n");
  free(out);
  assert_int_equal(dlx_fork_registered(), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_child_closes_registered, setup, teardown),
      cmocka_unit_test_setup_teardown(test_lock_dies_with_its_holder_not_its_child, setup,
                                      teardown),
      cmocka_unit_test(test_run_capture_leaves_nothing_registered),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
