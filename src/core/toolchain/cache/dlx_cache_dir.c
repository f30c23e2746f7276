/* dlx_cache_dir.c - the cache folder and the trust checks on what is loaded from it. */
#include "dlx_cache_dir.h"
#include "dlx_core.h"
#include "dlx_seal.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

/* Copies `s` without trailing slashes (keeping a lone "/"). */
static int copy_trimmed(const char *s, char *out, size_t outlen) {
  size_t n = strlen(s);
  while (n > 1 && s[n - 1] == '/') --n;
  if (n >= outlen) return -1;
  memcpy(out, s, n);
  out[n] = '\0';
  return 0;
}

int dlx_cache_dir_resolve(const char *dlx, const char *xdg, const char *home, char *out,
                          size_t outlen, char *err, size_t errlen) {
  const char *base, *suffix;
  if (dlx && dlx[0]) {
    base = dlx, suffix = "";
  } else if (xdg && xdg[0] == '/') {
    base = xdg, suffix = "/dlx";
  } else if (home && home[0]) {
    base = home, suffix = "/.cache/dlx";
  } else {
    return dlx_set_err(err, errlen,
                   "no cache folder: DLX_CACHE_DIR, XDG_CACHE_HOME and HOME are all unset");
  }
  char trimmed[4096];
  if (copy_trimmed(base, trimmed, sizeof trimmed) != 0)
    return dlx_set_err(err, errlen, "cache folder path too long: '%s'", base);
  /* "/" + "/dlx" would read "//dlx"; a base of "/" contributes nothing. */
  if (strcmp(trimmed, "/") == 0 && suffix[0]) trimmed[0] = '\0';
  int n = snprintf(out, outlen, "%s%s", trimmed, suffix);
  if (n < 0 || (size_t)n >= outlen) {
    if (outlen) out[0] = '\0';
    return dlx_set_err(err, errlen, "cache folder path too long: '%s%s'", trimmed, suffix);
  }
  return 0;
}

/* mkdir -p `path` (already trimmed), new folders 0700. */
static int make_dirs(char *path, char *err, size_t errlen) {
  int created_final = 0;
  size_t len = strlen(path);
  /* Walk each prefix ending before a '/', then the whole path. */
  for (size_t i = 1; i <= len; ++i) {
    if (path[i] != '/' && path[i] != '\0') continue;
    char saved = path[i];
    path[i] = '\0';
    if (mkdir(path, 0700) == 0) {
      if (i == len) created_final = 1;
    } else if (errno != EEXIST) {
      char why[256];
      snprintf(why, sizeof why, "%s", strerror(errno));
      path[i] = saved;
      return dlx_set_err(err, errlen, "cannot create cache folder '%s': %s", path, why);
    }
    path[i] = saved;
  }
  /* umask may have stripped bits from a folder we made; 0700 is the intent. */
  if (created_final && chmod(path, 0700) != 0)
    return dlx_set_err(err, errlen, "cannot chmod cache folder '%s': %s", path, strerror(errno));
  return 0;
}

/* A folder above the cache: whoever can write it can swap the cache folder for their
 * own. Like OpenSSH's StrictModes: owned by root or us, and not writable by group or
 * others unless the sticky bit stops them from renaming what is not theirs (/tmp). */
static int ancestor_ok(const struct stat *st, const char *path, char *err, size_t errlen) {
  uid_t me = geteuid();
  if (st->st_uid != 0 && st->st_uid != me)
    return dlx_set_err(err, errlen,
                       "refusing cache folder: '%s' above it is owned by uid %lu (neither root "
                       "nor uid %lu), who could replace what is inside",
                       path, (unsigned long)st->st_uid, (unsigned long)me);
  if ((st->st_mode & (S_IWGRP | S_IWOTH)) && !(st->st_mode & S_ISVTX))
    return dlx_set_err(err, errlen,
                       "refusing cache folder: '%s' above it is writable by %s without the "
                       "sticky bit (mode %04o), so another user could replace what is inside "
                       "(chmod go-w or +t it, or choose another DLX_CACHE_DIR)",
                       path, (st->st_mode & S_IWOTH) ? "others" : "its group",
                       (unsigned)(st->st_mode & 07777));
  return 0;
}

int dlx_cache_dir_open(const char *dir, int create, char *err, size_t errlen) {
  char path[4096];
  if (!dir || !dir[0]) return dlx_set_err(err, errlen, "empty cache folder path");
  if (copy_trimmed(dir, path, sizeof path) != 0)
    return dlx_set_err(err, errlen, "cache folder path too long: '%s'", dir);
  if (create && make_dirs(path, err, errlen) != 0) return -1;

  struct stat st;
  if (lstat(path, &st) != 0)
    return dlx_set_err(err, errlen, "cannot stat cache folder '%s': %s", path, strerror(errno));
  if (S_ISLNK(st.st_mode))
    return dlx_set_err(err, errlen,
                   "refusing cache folder '%s': it is a symlink (point DLX_CACHE_DIR at the "
                   "real folder)",
                   path);
  if (!S_ISDIR(st.st_mode))
    return dlx_set_err(err, errlen, "refusing cache folder '%s': not a directory", path);

  /* Symlinks above the folder are resolved once; then every folder from / down is
   * opened without following links and checked through its descriptor, so what is
   * checked is what the returned descriptor reaches. */
  char real[PATH_MAX];
  if (!realpath(path, real))
    return dlx_set_err(err, errlen, "cannot resolve cache folder '%s': %s", path, strerror(errno));
  int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return dlx_set_err(err, errlen, "cannot open '/': %s", strerror(errno));
  char walked[PATH_MAX] = "/";
  size_t wlen = 1;
  const char *p = real;
  for (;;) {
    struct stat ds;
    if (fstat(fd, &ds) != 0) {
      dlx_set_err(err, errlen, "cannot stat '%s': %s", walked, strerror(errno));
      goto fail;
    }
    while (*p == '/') ++p;
    if (!*p) { /* fd is the cache folder itself */
      if (ds.st_dev != st.st_dev || ds.st_ino != st.st_ino) {
        dlx_set_err(err, errlen, "refusing cache folder '%s': it changed while being checked",
                    path);
        goto fail;
      }
      if (ds.st_uid != geteuid()) {
        dlx_set_err(err, errlen, "refusing cache folder '%s': owned by uid %lu, not by uid %lu",
                    path, (unsigned long)ds.st_uid, (unsigned long)geteuid());
        goto fail;
      }
      if (ds.st_mode & (S_IWGRP | S_IWOTH)) {
        dlx_set_err(err, errlen,
                    "refusing cache folder '%s': writable by group or others (mode %04o; "
                    "chmod 700 it)",
                    path, (unsigned)(ds.st_mode & 07777));
        goto fail;
      }
      int dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (dfd < 0) {
        dlx_set_err(err, errlen, "cannot open cache folder '%s': %s", path, strerror(errno));
        goto fail;
      }
      close(fd);
      return dfd;
    }
    if (ancestor_ok(&ds, walked, err, errlen) != 0) goto fail;
    const char *slash = strchr(p, '/');
    size_t n = slash ? (size_t)(slash - p) : strlen(p);
    char name[NAME_MAX + 1];
    if (n > NAME_MAX) {
      dlx_set_err(err, errlen, "cache folder path has a name too long: '%s'", path);
      goto fail;
    }
    memcpy(name, p, n);
    name[n] = '\0';
    p += n;
    int next = openat(fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0) {
      /* realpath gave no links: a link or a missing folder now means it changed */
      dlx_set_err(err, errlen, "cannot open '%s%s%s' while checking cache folder '%s': %s",
                  walked, wlen > 1 ? "/" : "", name, path,
                  errno == ELOOP || errno == ENOTDIR ? "it changed while being checked"
                                                     : strerror(errno));
      goto fail;
    }
    close(fd);
    fd = next;
    int w = snprintf(walked + wlen, sizeof walked - wlen, "%s%s", wlen > 1 ? "/" : "", name);
    if (w > 0) wlen += (size_t)w < sizeof walked - wlen ? (size_t)w : 0;
  }
fail:
  close(fd);
  return -1;
}

int dlx_cache_dir_ensure(const char *dir, char *err, size_t errlen) {
  int fd = dlx_cache_dir_open(dir, 1, err, errlen);
  if (fd < 0) return -1;
  close(fd);
  return 0;
}

int dlx_cache_open_trusted(int dirfd, const char *name, int *fd_out, char *err, size_t errlen) {
  *fd_out = -1;
  if (!name || !name[0] || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, ".."))
    return dlx_set_err(err, errlen, "refusing '%s': not a plain file name", name ? name : "");
  /* O_NONBLOCK: a FIFO planted here must not block the open */
  int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) return 0;
    if (errno == ELOOP) return dlx_set_err(err, errlen, "refusing '%s': a symlink", name);
    return dlx_set_err(err, errlen, "cannot open '%s': %s", name, strerror(errno));
  }
  /* Every check below is on this descriptor: the file checked is the file loaded. */
  struct stat st;
  unsigned char head[4];
  if (fstat(fd, &st) != 0) {
    dlx_set_err(err, errlen, "cannot stat '%s': %s", name, strerror(errno));
  } else if (!S_ISREG(st.st_mode)) {
    dlx_set_err(err, errlen, "refusing '%s': not a regular file", name);
  } else if (st.st_uid != geteuid()) {
    dlx_set_err(err, errlen, "refusing '%s': owned by uid %lu, not by uid %lu", name,
                (unsigned long)st.st_uid, (unsigned long)geteuid());
  } else if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    dlx_set_err(err, errlen, "refusing '%s': writable by group or others (mode %04o)", name,
                (unsigned)(st.st_mode & 07777));
  } else if (st.st_size < 64) {
    dlx_set_err(err, errlen, "refusing '%s': truncated (shorter than an ELF header)", name);
  } else if (pread(fd, head, sizeof head, 0) != (ssize_t)sizeof head ||
             memcmp(head, "\x7f" "ELF", 4) != 0) {
    dlx_set_err(err, errlen, "refusing '%s': not an ELF file", name);
  } else {
    char why[512];
    int sealed = dlx_seal_check_fd(fd, why, sizeof why);
    if (sealed == 1) {
      *fd_out = fd;
      return 1;
    }
    dlx_set_err(err, errlen, "refusing '%s': %s", name, why);
  }
  close(fd);
  return -1;
}

int dlx_fd_path(int fd, char *out, size_t outlen) {
  int n = snprintf(out, outlen, "/proc/self/fd/%d", fd);
  return n < 0 || (size_t)n >= outlen ? -1 : 0;
}

/* Whether the loader knows a library by `via`, the name of descriptor `fd`, rather than
 * by the file behind it. The loader matches names first, then files (device and inode),
 * and a file match adds the name asked for to that library's names for good: once the
 * number is reused, that name stands for the old library, whose l_name is another. So the
 * question is asked with a folder in place of the file for its duration: a known name is
 * answered before anything is opened, and a folder is no library (no name is added).
 * 1 known, 0 not, -1 with errno. */
static int name_known(int fd, const char *via) {
  int file = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (file < 0) return -1;
  int dir = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0 || dup3(dir, fd, O_CLOEXEC) < 0) {
    int e = errno;
    if (dir >= 0) close(dir);
    close(file);
    errno = e;
    return -1;
  }
  close(dir);
  void *old = dlopen(via, RTLD_LAZY | RTLD_NOLOAD);
  (void)dlerror(); /* the folder's "cannot read file data" is no error of the caller's */
  if (old) dlclose(old);
  int back = dup3(file, fd, O_CLOEXEC);
  int e = errno;
  close(file);
  errno = e;
  return back < 0 ? -1 : old != NULL;
}

void *dlx_cache_dlopen(int *fd, int flags, char *err, size_t errlen) {
  char via[64];
  /* A library still known by this descriptor's name (loaded through the same number,
   * since closed and reused, or the same file once reached through it) would be returned
   * in place of ours. Move to another number until the name is free. Every library
   * loaded and dropped leaves its names behind (handles are never closed), so there is
   * no bound but the descriptor limit; never load under a taken name. A name that is
   * free loads our file, or the loader's copy of that very file. */
  for (;;) {
    dlx_fd_path(*fd, via, sizeof via);
    int known = name_known(*fd, via);
    if (known < 0) {
      dlx_set_err(err, errlen, "cannot ask the loader whether it knows '%s': %s", via,
                  strerror(errno));
      return NULL;
    }
    if (!known) break;
    int moved = fcntl(*fd, F_DUPFD_CLOEXEC, *fd + 1);
    if (moved < 0) {
      dlx_set_err(err, errlen, "no descriptor number the loader does not know already: %s",
                  strerror(errno));
      return NULL;
    }
    close(*fd);
    *fd = moved;
  }
  void *h = dlopen(via, flags);
  if (!h) {
    const char *e = dlerror();
    dlx_set_err(err, errlen, "%s", e ? e : "dlopen failed");
  }
  return h;
}

int dlx_cache_file_trusted(const char *path, char *err, size_t errlen) {
  struct stat st;
  if (lstat(path, &st) != 0) {
    if (errno == ENOENT) return 0;
    return dlx_set_err(err, errlen, "cannot stat '%s': %s", path, strerror(errno));
  }
  if (S_ISLNK(st.st_mode)) return dlx_set_err(err, errlen, "refusing '%s': a symlink", path);
  if (!S_ISREG(st.st_mode))
    return dlx_set_err(err, errlen, "refusing '%s': not a regular file", path);
  if (st.st_uid != geteuid()) {
    return dlx_set_err(err, errlen, "refusing '%s': owned by uid %lu, not by uid %lu", path,
                   (unsigned long)st.st_uid, (unsigned long)geteuid());
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    return dlx_set_err(err, errlen, "refusing '%s': writable by group or others (mode %04o)",
                   path, (unsigned)(st.st_mode & 07777));
  }
  if (st.st_size < 64)
    return dlx_set_err(err, errlen, "refusing '%s': truncated (shorter than an ELF header)",
                   path);
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return dlx_set_err(err, errlen, "cannot open '%s': %s", path, strerror(errno));
  /* The file checked must be the file read: a swap between lstat and open fails. */
  struct stat fst;
  unsigned char head[4];
  ssize_t got = -1;
  int same = fstat(fd, &fst) == 0 && fst.st_dev == st.st_dev && fst.st_ino == st.st_ino;
  if (same) got = pread(fd, head, sizeof head, 0);
  close(fd);
  if (!same)
    return dlx_set_err(err, errlen, "refusing '%s': it changed while being checked", path);
  if (got != (ssize_t)sizeof head || memcmp(head, "\x7f" "ELF", 4) != 0)
    return dlx_set_err(err, errlen, "refusing '%s': not an ELF file", path);
  return 1;
}
