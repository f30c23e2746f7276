/* test_cache.c - cache folder resolution and checks, trust of cached files,
 * locking across processes, temp names and atomic publishing. Real files in a
 * fresh mkdtemp folder under /tmp. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "dlx_cache_dir.h"
#include "dlx_cache_lock.h"
#include "dlx_seal.h"

static char root[256];
static char err[1024];

static const char *at(const char *name) {
  static char buf[4][512];
  static int k;
  char *b = buf[k++ % 4];
  snprintf(b, sizeof buf[0], "%s/%s", root, name);
  return b;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  chmod(p, 0700); /* so a folder we made 0000 can still be emptied */
  return remove(p);
}

static int setup(void **state) {
  (void)state;
  snprintf(root, sizeof root, "/tmp/dlx-test-cache-XXXXXX");
  if (!mkdtemp(root)) return -1;
  umask(022);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  return nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void write_file(const char *path, const void *data, size_t n, mode_t mode) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, data, n), (ssize_t)n);
  assert_int_equal(fchmod(fd, mode), 0);
  close(fd);
}

/* A real ELF shared object/executable: a copy of /bin/true. */
static void copy_elf(const char *path, mode_t mode) {
  int in = open("/bin/true", O_RDONLY);
  assert_true(in >= 0);
  struct stat st;
  assert_int_equal(fstat(in, &st), 0);
  char *data = malloc((size_t)st.st_size);
  assert_non_null(data);
  assert_int_equal(read(in, data, (size_t)st.st_size), (ssize_t)st.st_size);
  close(in);
  write_file(path, data, (size_t)st.st_size, mode);
  free(data);
}

static mode_t mode_of(const char *path) {
  struct stat st;
  assert_int_equal(lstat(path, &st), 0);
  return st.st_mode & 07777;
}

/* ---- resolve -------------------------------------------------------------- */

static void expect_resolve(const char *dlx, const char *xdg, const char *home,
                           const char *want) {
  char out[512];
  err[0] = '\0';
  assert_int_equal(dlx_cache_dir_resolve(dlx, xdg, home, out, sizeof out, err, sizeof err), 0);
  assert_string_equal(out, want);
}

static void test_resolve(void **state) {
  (void)state;
  expect_resolve("/c/dlx-own", "/x", "/h", "/c/dlx-own");
  expect_resolve("/c/dlx-own/", "/x", "/h", "/c/dlx-own");
  expect_resolve("", "/x", "/h", "/x/dlx");
  expect_resolve(NULL, "/x/", "/h", "/x/dlx");
  expect_resolve(NULL, "", "/h", "/h/.cache/dlx");
  expect_resolve(NULL, NULL, "/h//", "/h/.cache/dlx");
  expect_resolve(NULL, "relative/cache", "/h", "/h/.cache/dlx"); /* XDG: ignore relative */
  expect_resolve(NULL, "/", "/h", "/dlx");
  expect_resolve("", "", "/", "/.cache/dlx");

  char out[512];
  assert_int_equal(dlx_cache_dir_resolve(NULL, NULL, NULL, out, sizeof out, err, sizeof err),
                   -1);
  assert_non_null(strstr(err, "HOME"));
  assert_int_equal(dlx_cache_dir_resolve("", "", "", out, sizeof out, err, sizeof err), -1);
  /* too small: an error, never a truncated path */
  assert_int_equal(dlx_cache_dir_resolve(NULL, NULL, "/h", out, 8, err, sizeof err), -1);
  assert_non_null(strstr(err, "too long"));
  assert_int_equal(dlx_cache_dir_resolve(NULL, NULL, "/h", out, 14, err, sizeof err), 0);
  assert_string_equal(out, "/h/.cache/dlx");
}

/* ---- ensure ----------------------------------------------------------------- */

static void test_ensure_creates(void **state) {
  (void)state;
  const char *deep = at("a/b/c/dlx");
  assert_int_equal(dlx_cache_dir_ensure(deep, err, sizeof err), 0);
  assert_int_equal(mode_of(deep), 0700);
  assert_int_equal(mode_of(at("a/b")), 0700);
  /* again: already there and fine */
  assert_int_equal(dlx_cache_dir_ensure(deep, err, sizeof err), 0);
  /* a trailing slash is the same folder */
  assert_int_equal(dlx_cache_dir_ensure(at("a/b/c/dlx/"), err, sizeof err), 0);

  /* a restrictive umask cannot leave the final folder unusable */
  mode_t old = umask(0277);
  int rc = dlx_cache_dir_ensure(at("um"), err, sizeof err);
  umask(old);
  assert_int_equal(rc, 0);
  assert_int_equal(mode_of(at("um")), 0700);

  /* an existing 0755 folder owned by us is acceptable (not writable by others) */
  assert_int_equal(mkdir(at("open"), 0755), 0);
  assert_int_equal(chmod(at("open"), 0755), 0);
  assert_int_equal(dlx_cache_dir_ensure(at("open"), err, sizeof err), 0);
}

static void test_ensure_refuses(void **state) {
  (void)state;
  assert_int_equal(mkdir(at("real"), 0700), 0);
  assert_int_equal(symlink(at("real"), at("link")), 0);
  assert_int_equal(dlx_cache_dir_ensure(at("link"), err, sizeof err), -1);
  assert_non_null(strstr(err, "symlink"));
  assert_int_equal(dlx_cache_dir_ensure(at("link/"), err, sizeof err), -1); /* no follow */
  assert_non_null(strstr(err, "symlink"));

  assert_int_equal(mkdir(at("gw"), 0700), 0);
  assert_int_equal(chmod(at("gw"), 0770), 0);
  assert_int_equal(dlx_cache_dir_ensure(at("gw"), err, sizeof err), -1);
  assert_non_null(strstr(err, "writable by group or others"));
  assert_int_equal(mkdir(at("ow"), 0700), 0);
  assert_int_equal(chmod(at("ow"), 0702), 0);
  assert_int_equal(dlx_cache_dir_ensure(at("ow"), err, sizeof err), -1);
  assert_non_null(strstr(err, "writable by group or others"));

  write_file(at("file"), "x", 1, 0600);
  assert_int_equal(dlx_cache_dir_ensure(at("file"), err, sizeof err), -1);
  assert_non_null(strstr(err, "not a directory"));
  assert_int_equal(dlx_cache_dir_ensure(at("file/sub"), err, sizeof err), -1);
  assert_non_null(strstr(err, "cannot create"));
  assert_int_equal(dlx_cache_dir_ensure("", err, sizeof err), -1);
}

static void test_ensure_refuses_foreign_owner(void **state) {
  (void)state;
  if (geteuid() != 0) skip(); /* only root can hand a folder to another uid */
  assert_int_equal(mkdir(at("theirs"), 0700), 0);
  assert_int_equal(chown(at("theirs"), 65534, 65534), 0);
  assert_int_equal(dlx_cache_dir_ensure(at("theirs"), err, sizeof err), -1);
  assert_non_null(strstr(err, "owned by uid 65534"));
}

/* ---- trusted ---------------------------------------------------------------- */

static void test_trusted(void **state) {
  (void)state;
  assert_int_equal(dlx_cache_file_trusted(at("missing.so"), err, sizeof err), 0);

  copy_elf(at("good.so"), 0755);
  assert_int_equal(dlx_cache_file_trusted(at("good.so"), err, sizeof err), 1);
  copy_elf(at("good600.so"), 0600);
  assert_int_equal(dlx_cache_file_trusted(at("good600.so"), err, sizeof err), 1);

  assert_int_equal(symlink(at("good.so"), at("link.so")), 0);
  assert_int_equal(dlx_cache_file_trusted(at("link.so"), err, sizeof err), -1);
  assert_non_null(strstr(err, "symlink"));

  copy_elf(at("gw.so"), 0775);
  assert_int_equal(dlx_cache_file_trusted(at("gw.so"), err, sizeof err), -1);
  assert_non_null(strstr(err, "writable by group or others"));
  copy_elf(at("ow.so"), 0757);
  assert_int_equal(dlx_cache_file_trusted(at("ow.so"), err, sizeof err), -1);
  assert_non_null(strstr(err, "writable by group or others"));

  char text[200];
  memset(text, '#', sizeof text);
  write_file(at("text.so"), text, sizeof text, 0755);
  assert_int_equal(dlx_cache_file_trusted(at("text.so"), err, sizeof err), -1);
  assert_non_null(strstr(err, "not an ELF"));

  /* the ELF magic but cut short */
  char head[63];
  memset(head, 0, sizeof head);
  memcpy(head, "\x7f" "ELF", 4);
  write_file(at("short.so"), head, sizeof head, 0755);
  assert_int_equal(dlx_cache_file_trusted(at("short.so"), err, sizeof err), -1);
  assert_non_null(strstr(err, "truncated"));
  write_file(at("empty.so"), "", 0, 0755);
  assert_int_equal(dlx_cache_file_trusted(at("empty.so"), err, sizeof err), -1);

  assert_int_equal(mkdir(at("dir.so"), 0700), 0);
  assert_int_equal(dlx_cache_file_trusted(at("dir.so"), err, sizeof err), -1);
  assert_non_null(strstr(err, "not a regular file"));
}

static void test_trusted_refuses_foreign_owner(void **state) {
  (void)state;
  if (geteuid() != 0) skip();
  copy_elf(at("theirs.so"), 0755);
  assert_int_equal(chown(at("theirs.so"), 65534, 65534), 0);
  assert_int_equal(chmod(at("theirs.so"), 0755), 0); /* chown may clear bits; restore */
  assert_int_equal(dlx_cache_file_trusted(at("theirs.so"), err, sizeof err), -1);
  assert_non_null(strstr(err, "owned by uid 65534"));
}

/* ---- folders above the cache (StrictModes) ------------------------------------ */

static void test_dir_open_checks_the_folders_above(void **state) {
  (void)state;
  int fd = dlx_cache_dir_open(at("fine/cache"), 1, err, sizeof err);
  assert_true(fd >= 0);
  assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
  struct stat a, b;
  assert_int_equal(fstat(fd, &a), 0);
  assert_int_equal(stat(at("fine/cache"), &b), 0);
  assert_true(a.st_ino == b.st_ino && S_ISDIR(a.st_mode));
  close(fd);

  /* writable by others, no sticky bit: anyone could rename our folder away */
  assert_int_equal(mkdir(at("ww"), 0700), 0);
  assert_int_equal(chmod(at("ww"), 0777), 0);
  assert_int_equal(dlx_cache_dir_open(at("ww/cache"), 1, err, sizeof err), -1);
  assert_non_null(strstr(err, at("ww")));
  assert_non_null(strstr(err, "sticky"));
  assert_null(strstr(err, at("ww/cache"))); /* names the folder at fault */
  assert_int_equal(dlx_cache_dir_ensure(at("ww/cache"), err, sizeof err), -1);
  /* deeper down, the same folder is still at fault */
  assert_int_equal(dlx_cache_dir_open(at("ww/cache/sub/dlx"), 1, err, sizeof err), -1);
  assert_non_null(strstr(err, at("ww")));
  /* the sticky bit, as on /tmp: others cannot rename what is ours */
  assert_int_equal(chmod(at("ww"), 01777), 0);
  fd = dlx_cache_dir_open(at("ww/cache"), 1, err, sizeof err);
  assert_true(fd >= 0);
  close(fd);

  /* writable by its group, no sticky bit */
  assert_int_equal(mkdir(at("gw"), 0700), 0);
  assert_int_equal(chmod(at("gw"), 0770), 0);
  assert_int_equal(dlx_cache_dir_open(at("gw/cache"), 1, err, sizeof err), -1);
  assert_non_null(strstr(err, "its group"));
  assert_non_null(strstr(err, at("gw")));

  /* a link above the folder is resolved, then the real folders are checked */
  assert_int_equal(symlink(at("ww"), at("via")), 0);
  fd = dlx_cache_dir_open(at("via/cache"), 0, err, sizeof err);
  assert_true(fd >= 0);
  close(fd);
  assert_int_equal(chmod(at("ww"), 0777), 0);
  assert_int_equal(dlx_cache_dir_open(at("via/cache"), 0, err, sizeof err), -1);
  assert_non_null(strstr(err, at("ww")));

  /* missing and not to be created */
  assert_int_equal(dlx_cache_dir_open(at("nothing/here"), 0, err, sizeof err), -1);
  assert_non_null(strstr(err, "nothing/here"));
}

static void test_dir_open_refuses_a_foreign_folder_above(void **state) {
  (void)state;
  if (geteuid() != 0) skip(); /* only root can hand a folder to another uid */
  assert_int_equal(mkdir(at("theirs"), 0755), 0);
  assert_int_equal(mkdir(at("theirs/mine"), 0700), 0);
  assert_int_equal(chown(at("theirs"), 65534, 65534), 0);
  assert_int_equal(chmod(at("theirs"), 0755), 0);
  /* not writable by anyone else, but its owner may chmod it and swap our folder */
  assert_int_equal(dlx_cache_dir_open(at("theirs/mine"), 0, err, sizeof err), -1);
  assert_non_null(strstr(err, "owned by uid 65534"));
  assert_non_null(strstr(err, at("theirs")));
  /* a folder owned by another user with the sticky bit is still theirs to chmod */
  assert_int_equal(chmod(at("theirs"), 01777), 0);
  assert_int_equal(dlx_cache_dir_open(at("theirs/mine"), 0, err, sizeof err), -1);
  assert_non_null(strstr(err, "owned by uid 65534"));
}

/* ---- open a cached library by descriptor ---------------------------------------- */

static void copy_file(const char *from, const char *to, mode_t mode) {
  int in = open(from, O_RDONLY);
  assert_true(in >= 0);
  struct stat st;
  assert_int_equal(fstat(in, &st), 0);
  char *data = malloc((size_t)st.st_size);
  assert_non_null(data);
  assert_int_equal(read(in, data, (size_t)st.st_size), (ssize_t)st.st_size);
  close(in);
  write_file(to, data, (size_t)st.st_size, mode);
  free(data);
}

static void sealed_copy(const char *from, const char *to) {
  copy_file(from, to, 0600);
  assert_int_equal(dlx_seal_file(to, err, sizeof err), 0);
  assert_int_equal(chmod(to, 0755), 0);
}

static void test_open_trusted_loads_what_was_checked(void **state) {
  (void)state;
  int dirfd = dlx_cache_dir_open(at("c"), 1, err, sizeof err);
  assert_true(dirfd >= 0);
  sealed_copy(DLX_BINARY_DIR "/kernels/test_kernels.so", at("c/lib.so"));
  sealed_copy(DLX_BINARY_DIR "/examples/saxpy.so", at("other.so"));
  int fd = -1;
  assert_int_equal(dlx_cache_open_trusted(dirfd, "lib.so", &fd, err, sizeof err), 1);
  assert_true(fd >= 0);
  assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
  /* between the check and the load, the name is made to point at another library */
  assert_int_equal(rename(at("other.so"), at("c/lib.so")), 0);
  void *h = dlx_cache_dlopen(&fd, RTLD_NOW | RTLD_LOCAL, err, sizeof err);
  assert_non_null(h);
  assert_non_null(dlsym(h, "dlx_kernel__noop"));   /* the library that was checked */
  assert_null(dlsym(h, "dlx_kernel__saxpy"));      /* not the one swapped in */

  /* The first stays loaded while its descriptor is closed: the next file opened gets
   * that number, hence the same /proc/self/fd name, yet its own library must load. */
  int old_fd = fd;
  close(fd);
  fd = -1;
  assert_int_equal(dlx_cache_open_trusted(dirfd, "lib.so", &fd, err, sizeof err), 1);
  assert_int_equal(fd, old_fd);
  void *h2 = dlx_cache_dlopen(&fd, RTLD_NOW | RTLD_LOCAL, err, sizeof err);
  assert_non_null(h2);
  assert_true(h2 != h);
  assert_non_null(dlsym(h2, "dlx_kernel__saxpy")); /* now lib.so is saxpy's */
  assert_true(fd != old_fd);
  assert_int_equal(fcntl(old_fd, F_GETFD), -1); /* the number it left is closed */
  dlclose(h2);
  dlclose(h);
  close(fd);
  close(dirfd);
}

/* A library the loader knows under its own path, loaded again through a descriptor: the
 * loader finds the same file and adds the descriptor's name to that library's names. Once
 * the number is closed and reused for another file, that name must not bring the first
 * library back (the reported "has no kernel 'add' (it defines ())"). */
static void test_dlopen_a_name_the_loader_gave_to_the_same_file(void **state) {
  (void)state;
  int dirfd = dlx_cache_dir_open(at("c"), 1, err, sizeof err);
  assert_true(dirfd >= 0);
  sealed_copy(DLX_BINARY_DIR "/kernels/test_kernels.so", at("c/a.so"));
  sealed_copy(DLX_BINARY_DIR "/examples/saxpy.so", at("c/b.so"));
  void *ha = dlopen(at("c/a.so"), RTLD_NOW | RTLD_LOCAL);
  assert_non_null(ha);
  int fd = -1;
  assert_int_equal(dlx_cache_open_trusted(dirfd, "a.so", &fd, err, sizeof err), 1);
  void *h = dlx_cache_dlopen(&fd, RTLD_NOW | RTLD_LOCAL, err, sizeof err);
  assert_true(h == ha); /* the same file: the loader's own copy */
  int old_fd = fd;
  close(fd);
  fd = -1;
  assert_int_equal(dlx_cache_open_trusted(dirfd, "b.so", &fd, err, sizeof err), 1);
  assert_int_equal(fd, old_fd); /* the number, hence the name, the first file had */
  void *hb = dlx_cache_dlopen(&fd, RTLD_NOW | RTLD_LOCAL, err, sizeof err);
  assert_non_null(hb);
  assert_true(hb != ha);
  assert_non_null(dlsym(hb, "dlx_kernel__saxpy"));
  assert_null(dlsym(hb, "dlx_kernel__noop"));
  /* and the first file through yet another descriptor is still the loader's copy */
  int fa = -1;
  assert_int_equal(dlx_cache_open_trusted(dirfd, "a.so", &fa, err, sizeof err), 1);
  void *h3 = dlx_cache_dlopen(&fa, RTLD_NOW | RTLD_LOCAL, err, sizeof err);
  assert_true(h3 == ha);
  dlclose(h3);
  dlclose(hb);
  dlclose(h);
  dlclose(ha);
  close(fa);
  close(fd);
  close(dirfd);
}

static void test_open_trusted_refuses(void **state) {
  (void)state;
  int dirfd = dlx_cache_dir_open(at("c"), 1, err, sizeof err);
  assert_true(dirfd >= 0);
  int fd = 7;
  assert_int_equal(dlx_cache_open_trusted(dirfd, "missing.so", &fd, err, sizeof err), 0);
  assert_int_equal(fd, -1);

  sealed_copy("/bin/true", at("c/good.so"));
  assert_int_equal(dlx_cache_open_trusted(dirfd, "good.so", &fd, err, sizeof err), 1);
  close(fd);

  assert_int_equal(symlink(at("c/good.so"), at("c/link.so")), 0);
  assert_int_equal(dlx_cache_open_trusted(dirfd, "link.so", &fd, err, sizeof err), -1);
  assert_non_null(strstr(err, "symlink"));
  assert_int_equal(fd, -1);

  copy_elf(at("c/unsealed.so"), 0755);
  assert_int_equal(dlx_cache_open_trusted(dirfd, "unsealed.so", &fd, err, sizeof err), -1);
  assert_non_null(strstr(err, "seal"));

  sealed_copy("/bin/true", at("c/gw.so"));
  assert_int_equal(chmod(at("c/gw.so"), 0775), 0);
  assert_int_equal(dlx_cache_open_trusted(dirfd, "gw.so", &fd, err, sizeof err), -1);
  assert_non_null(strstr(err, "writable by group or others"));

  sealed_copy("/bin/true", at("c/cut.so"));
  assert_int_equal(truncate(at("c/cut.so"), 4000), 0);
  assert_int_equal(dlx_cache_open_trusted(dirfd, "cut.so", &fd, err, sizeof err), -1);
  assert_non_null(strstr(err, "seal"));

  /* a FIFO must neither block nor pass */
  assert_int_equal(mkfifo(at("c/fifo.so"), 0600), 0);
  assert_int_equal(dlx_cache_open_trusted(dirfd, "fifo.so", &fd, err, sizeof err), -1);
  assert_non_null(strstr(err, "not a regular file"));

  assert_int_equal(dlx_cache_open_trusted(dirfd, "../c/good.so", &fd, err, sizeof err), -1);
  assert_int_equal(dlx_cache_open_trusted(dirfd, "..", &fd, err, sizeof err), -1);
  assert_int_equal(fd, -1);
  close(dirfd);
}

/* ---- locks ------------------------------------------------------------------ */

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void test_lock_basics(void **state) {
  (void)state;
  dlx_lock l = {-1};
  assert_int_equal(dlx_lock_acquire(at("x.lock"), &l, err, sizeof err), 0);
  assert_true(l.fd >= 0);
  assert_int_equal(mode_of(at("x.lock")), 0600);
  assert_true(fcntl(l.fd, F_GETFD) & FD_CLOEXEC);
  /* a second open file description cannot take it meanwhile */
  int other = open(at("x.lock"), O_RDWR);
  assert_true(other >= 0);
  assert_int_equal(flock(other, LOCK_EX | LOCK_NB), -1);
  assert_int_equal(errno, EWOULDBLOCK);
  dlx_lock_release(&l);
  assert_int_equal(l.fd, -1);
  dlx_lock_release(&l); /* twice is harmless */
  assert_int_equal(flock(other, LOCK_EX | LOCK_NB), 0);
  close(other);

  /* a symlink planted at the lock path is refused, and its target left alone */
  write_file(at("target"), "keep", 4, 0644);
  assert_int_equal(symlink(at("target"), at("evil.lock")), 0);
  assert_int_equal(dlx_lock_acquire(at("evil.lock"), &l, err, sizeof err), -1);
  assert_int_equal(l.fd, -1);
  assert_non_null(strstr(err, "symlink"));
  assert_int_equal(mode_of(at("target")), 0644);

  assert_int_equal(dlx_lock_acquire(at("no/such/dir.lock"), &l, err, sizeof err), -1);
  assert_non_null(strstr(err, "no/such/dir.lock"));
}

static int waits;
static void count_wait(void *ctx) {
  (void)ctx;
  ++waits;
}

static void test_lock_gives_up_at_the_deadline(void **state) {
  (void)state;
  const char *path = at("held.lock");
  int ready[2];
  assert_int_equal(pipe(ready), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) { /* holds the lock until killed */
    dlx_lock l;
    char e[256];
    if (dlx_lock_acquire(path, &l, e, sizeof e) != 0) _exit(2);
    if (write(ready[1], "h", 1) != 1) _exit(3);
    pause();
    _exit(0);
  }
  close(ready[1]);
  char c;
  assert_int_equal(read(ready[0], &c, 1), 1);
  close(ready[0]);
  dlx_lock l = {-1};
  waits = 0;
  double t0 = now();
  int rc = dlx_lock_acquire_timeout(path, 0.5, count_wait, NULL, &l, err, sizeof err);
  double took = now() - t0;
  kill(pid, SIGKILL);
  int status;
  waitpid(pid, &status, 0);
  assert_int_equal(rc, -1);
  assert_int_equal(l.fd, -1);
  assert_int_equal(waits, 1); /* said once, not once per retry */
  assert_true(took >= 0.45 && took < 10);
  assert_non_null(strstr(err, "gave up"));
  assert_non_null(strstr(err, "held.lock"));
  /* the holder is gone: free at once, and nobody is told to wait */
  waits = 0;
  assert_int_equal(dlx_lock_acquire_timeout(path, 0.5, count_wait, NULL, &l, err, sizeof err), 0);
  assert_int_equal(waits, 0);
  dlx_lock_release(&l);
}

static void test_lock_waits_for_a_release_within_the_deadline(void **state) {
  (void)state;
  const char *path = at("brief.lock");
  int ready[2];
  assert_int_equal(pipe(ready), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    dlx_lock l;
    char e[256];
    if (dlx_lock_acquire(path, &l, e, sizeof e) != 0) _exit(2);
    if (write(ready[1], "h", 1) != 1) _exit(3);
    usleep(300 * 1000);
    _exit(0); /* the lock dies with its holder */
  }
  close(ready[1]);
  char c;
  assert_int_equal(read(ready[0], &c, 1), 1);
  close(ready[0]);
  dlx_lock l = {-1};
  waits = 0;
  assert_int_equal(dlx_lock_acquire_timeout(path, 30, count_wait, NULL, &l, err, sizeof err), 0);
  assert_int_equal(waits, 1);
  assert_true(l.fd >= 0);
  dlx_lock_release(&l);
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
}

static void test_lock_blocks_other_process(void **state) {
  (void)state;
  const char *path = at("build.lock");
  int go[2], back[2];
  assert_int_equal(pipe(go), 0);
  assert_int_equal(pipe(back), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    /* child: wait until the parent holds the lock, say "trying", then block */
    char c;
    close(go[1]);
    close(back[0]);
    if (read(go[0], &c, 1) != 1) _exit(3);
    if (write(back[1], "w", 1) != 1) _exit(3);
    dlx_lock l;
    char e[256];
    if (dlx_lock_acquire(path, &l, e, sizeof e) != 0) _exit(2);
    double t = now();
    if (write(back[1], &t, sizeof t) != (ssize_t)sizeof t) _exit(3);
    dlx_lock_release(&l);
    _exit(0);
  }
  close(go[0]);
  close(back[1]);
  dlx_lock l;
  assert_int_equal(dlx_lock_acquire(path, &l, err, sizeof err), 0);
  assert_int_equal(write(go[1], "g", 1), 1);
  char c = 0;
  assert_int_equal(read(back[0], &c, 1), 1);
  assert_int_equal(c, 'w');
  /* the child is now in (or about to enter) flock: nothing may arrive */
  struct pollfd pfd = {back[0], POLLIN, 0};
  assert_int_equal(poll(&pfd, 1, 100), 0);
  double released = now();
  dlx_lock_release(&l);
  assert_int_equal(poll(&pfd, 1, 10000), 1);
  double got = 0;
  assert_int_equal(read(back[0], &got, sizeof got), (ssize_t)sizeof got);
  assert_true(got >= released);
  int status = -1;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  close(go[1]);
  close(back[0]);
}

/* ---- temp names and publishing ---------------------------------------------- */

static void test_temp_path(void **state) {
  (void)state;
  char a[512], b[512], prefix[512];
  const char *final = at("lib.so");
  assert_int_equal(dlx_temp_path(final, a, sizeof a), 0);
  assert_int_equal(dlx_temp_path(final, b, sizeof b), 0);
  snprintf(prefix, sizeof prefix, "%s.tmp.%ld.", final, (long)getpid());
  assert_memory_equal(a, prefix, strlen(prefix));
  assert_memory_equal(b, prefix, strlen(prefix));
  assert_string_not_equal(a, b);
  assert_int_equal(dlx_temp_path(final, a, strlen(prefix)), -1);
}

static void test_publish(void **state) {
  (void)state;
  const char *final = at("lib.so");
  char tmp[512];
  /* an old version, held open by a "reader" */
  write_file(final, "old-contents", 12, 0755);
  int reader = open(final, O_RDONLY);
  assert_true(reader >= 0);
  struct stat before;
  assert_int_equal(stat(final, &before), 0);

  assert_int_equal(dlx_temp_path(final, tmp, sizeof tmp), 0);
  write_file(tmp, "new-contents!", 13, 0600);
  assert_int_equal(dlx_publish(tmp, final, err, sizeof err), 0);

  assert_int_equal(access(tmp, F_OK), -1); /* moved, not copied */
  assert_int_equal(mode_of(final), 0755);
  struct stat after;
  assert_int_equal(stat(final, &after), 0);
  assert_int_not_equal(after.st_ino, before.st_ino); /* replaced, not rewritten */
  assert_int_equal(after.st_size, 13);
  char buf[32] = {0};
  int fd = open(final, O_RDONLY);
  assert_int_equal(read(fd, buf, sizeof buf), 13);
  assert_string_equal(buf, "new-contents!");
  close(fd);
  /* the reader still sees the complete old file */
  memset(buf, 0, sizeof buf);
  assert_int_equal(read(reader, buf, sizeof buf), 12);
  assert_string_equal(buf, "old-contents");
  close(reader);

  /* a published ELF is trusted */
  assert_int_equal(dlx_temp_path(at("elf.so"), tmp, sizeof tmp), 0);
  copy_elf(tmp, 0666);
  assert_int_equal(dlx_publish(tmp, at("elf.so"), err, sizeof err), 0);
  assert_int_equal(dlx_cache_file_trusted(at("elf.so"), err, sizeof err), 1);
}

static void test_publish_failures(void **state) {
  (void)state;
  char tmp[512];
  assert_int_equal(dlx_publish(at("nope.tmp"), at("nope.so"), err, sizeof err), -1);
  assert_non_null(strstr(err, "nope.tmp"));

  /* rename into a missing folder fails and cleans up the temp file */
  assert_int_equal(dlx_temp_path(at("x.so"), tmp, sizeof tmp), 0);
  write_file(tmp, "data", 4, 0600);
  assert_int_equal(dlx_publish(tmp, at("missing-dir/x.so"), err, sizeof err), -1);
  assert_non_null(strstr(err, "rename"));
  assert_int_equal(access(tmp, F_OK), -1);

  /* a symlink as the temp file is not followed */
  write_file(at("victim"), "v", 1, 0600);
  assert_int_equal(symlink(at("victim"), at("sym.tmp")), 0);
  assert_int_equal(dlx_publish(at("sym.tmp"), at("sym.so"), err, sizeof err), -1);
  assert_int_equal(mode_of(at("victim")), 0600);
  assert_int_equal(access(at("sym.so"), F_OK), -1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_resolve),
      cmocka_unit_test_setup_teardown(test_ensure_creates, setup, teardown),
      cmocka_unit_test_setup_teardown(test_ensure_refuses, setup, teardown),
      cmocka_unit_test_setup_teardown(test_ensure_refuses_foreign_owner, setup, teardown),
      cmocka_unit_test_setup_teardown(test_trusted, setup, teardown),
      cmocka_unit_test_setup_teardown(test_trusted_refuses_foreign_owner, setup, teardown),
      cmocka_unit_test_setup_teardown(test_dir_open_checks_the_folders_above, setup, teardown),
      cmocka_unit_test_setup_teardown(test_dir_open_refuses_a_foreign_folder_above, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_open_trusted_loads_what_was_checked, setup, teardown),
      cmocka_unit_test_setup_teardown(test_dlopen_a_name_the_loader_gave_to_the_same_file, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_open_trusted_refuses, setup, teardown),
      cmocka_unit_test_setup_teardown(test_lock_basics, setup, teardown),
      cmocka_unit_test_setup_teardown(test_lock_blocks_other_process, setup, teardown),
      cmocka_unit_test_setup_teardown(test_lock_gives_up_at_the_deadline, setup, teardown),
      cmocka_unit_test_setup_teardown(test_lock_waits_for_a_release_within_the_deadline, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_temp_path, setup, teardown),
      cmocka_unit_test_setup_teardown(test_publish, setup, teardown),
      cmocka_unit_test_setup_teardown(test_publish_failures, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
