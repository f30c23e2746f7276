/* dlx_kernel_build.c - the warm check and the cold build of a kernel library. */
#include "dlx_kernel_build.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dlx/dlx.h"
#include "dlx_build_record.h"
#include "dlx_cache_dir.h"
#include "dlx_cache_lock.h"
#include "dlx_compile_command.h"
#include "dlx_core.h"
#include "dlx_depfile.h"
#include "dlx_identity.h"
#include "dlx_locked_build.h"
#include "dlx_seal.h"

#define MAX_SOURCES 256
#define MAX_RECORD (16u << 20)
#define MAX_HASHED (256u << 20)

/* A header the compiler did not read, recorded as absent (this digest): a file created
 * there later would shadow one it did read (an earlier -I folder, the source's folder),
 * so the warm check must see it appear although every file hashed is unchanged. */
static const char kAbsent[65] =
    "0000000000000000000000000000000000000000000000000000000000000000";

/* ---- small facts ------------------------------------------------------------- */

int dlx_which(const char *cmd, const char *path_env, char *out, size_t outlen) {
  char **words;
  int n;
  if (dlx_shell_split(cmd, &words, &n, NULL, 0) || n == 0) {
    if (!n) dlx_argv_free(words, n);
    return -1;
  }
  char found[PATH_MAX] = "";
  const char *prog = words[0];
  if (strchr(prog, '/')) {
    if (access(prog, X_OK) == 0) snprintf(found, sizeof found, "%s", prog);
  } else {
    const char *p = path_env ? path_env : "/bin:/usr/bin";
    for (;;) {
      const char *end = strchr(p, ':');
      size_t dlen = end ? (size_t)(end - p) : strlen(p);
      char cand[PATH_MAX];
      int w = dlen ? snprintf(cand, sizeof cand, "%.*s/%s", (int)dlen, p, prog)
                   : snprintf(cand, sizeof cand, "%s", prog);
      struct stat st;
      if (w > 0 && (size_t)w < sizeof cand && stat(cand, &st) == 0 && S_ISREG(st.st_mode) &&
          access(cand, X_OK) == 0) {
        snprintf(found, sizeof found, "%s", cand);
        break;
      }
      if (!end) break;
      p = end + 1;
    }
  }
  dlx_argv_free(words, n);
  char real[PATH_MAX];
  if (!found[0] || !realpath(found, real)) return -1;
  struct stat st;
  if (stat(real, &st) != 0 || !S_ISREG(st.st_mode)) return -1;
  int w = snprintf(out, outlen, "%s", real);
  return w < 0 || (size_t)w >= outlen ? -1 : 0;
}

/* snprintf wrote all of it */
static int fits(int n, size_t size) { return n >= 0 && (size_t)n < size; }

/* "<dev>:<ino>:<size>:<mtime ns>": changes whenever the file is replaced or rewritten. */
static int file_sig(const char *path, char out[128]) {
  struct stat st;
  if (stat(path, &st) != 0) return -1;
  snprintf(out, 128, "%llu:%llu:%lld:%lld%09ld", (unsigned long long)st.st_dev,
           (unsigned long long)st.st_ino, (long long)st.st_size, (long long)st.st_mtim.tv_sec,
           st.st_mtim.tv_nsec);
  return 0;
}

/* The same file with the same contents as when `a` was taken, as far as stat can tell:
 * any write changes the ctime, even one that puts the old bytes back. */
static int same_state(const struct stat *a, const struct stat *b) {
  return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
         a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
         a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* The whole of a regular file (at most `max` bytes): malloc'd, NUL-terminated. Opened
 * non-blocking, so a FIFO named in a record cannot hang the check. A file written while
 * it is read gives NULL with errno EAGAIN: its bytes would be of no one version. */
static char *read_at(int dirfd, const char *path, size_t max, int nofollow, size_t *len_out,
                     struct stat *st_out) {
  int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | (nofollow ? O_NOFOLLOW : 0));
  if (fd < 0) return NULL;
  struct stat st;
  char *buf = NULL;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (size_t)st.st_size <= max) {
    size_t n = (size_t)st.st_size, got = 0;
    buf = malloc(n + 1);
    while (buf && got < n) {
      ssize_t r = read(fd, buf + got, n - got);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      got += (size_t)r;
    }
    struct stat after;
    int torn = buf && (fstat(fd, &after) != 0 || !same_state(&st, &after));
    if (buf && (got != n || torn)) {
      free(buf);
      buf = NULL;
      if (torn) errno = EAGAIN;
    }
    if (buf) {
      buf[n] = '\0';
      *len_out = n;
      if (st_out) *st_out = st;
    }
  }
  close(fd);
  return buf;
}

/* The digest of the file's bytes; *st_out (may be NULL) the state they were read in. */
static int digest_file(const char *path, char out[65], struct stat *st_out) {
  size_t n;
  char *buf = read_at(AT_FDCWD, path, MAX_HASHED, 0, &n, st_out);
  if (!buf) return -1;
  dlx_digest_hex(buf, n, out);
  free(buf);
  return 0;
}

/* ---- the state of one build ------------------------------------------------------ */

typedef struct tool {
  char cmd[4096];  /* the command as run (split like a shell) */
  char path[PATH_MAX]; /* resolved */
  char sig[128];
  char vdigest[65];
  char *version; /* one line */
} tool;

typedef struct build {
  const dlx_kernel_build_spec *s;
  dlx_kernel_build_result *res;
  char kdir[4096]; /* <cache>/kernels */
  int dirfd;
  size_t n;
  dlx_lang langs[MAX_SOURCES];
  const char *src[MAX_SOURCES];
  char *src_owned; /* the inline source's path */
  char src_digest[MAX_SOURCES][65];
  struct stat src_st[MAX_SOURCES]; /* each source's state when hashed (the key's bytes) */
  int used[DLX_LANG_COUNT]; /* languages compiled, plus the linker's */
  dlx_lang link;
  tool tools[DLX_LANG_COUNT];
  char arch_flag[128], arch_why[512];
  char key1[65];
  char base[160]; /* "<name>-<20 hex>" */
  struct timespec t0;
  double deadline_s; /* seconds after t0; <= 0 none */
  int announced;
  double next_note;
  char *err;
  size_t errlen;
} build;

static void say(build *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(build *b, const char *fmt, ...) {
  if (!b->s->say) return;
  char line[8192];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  b->s->say(b->s->ctx, line);
}

static double elapsed(const build *b) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)(t.tv_sec - b->t0.tv_sec) + (double)(t.tv_nsec - b->t0.tv_nsec) / 1e9;
}

/* Seconds the next step may take: what is left of DLX_BUILD_TIMEOUT (at least a
 * moment, so a step past the deadline fails as a timeout, with its words). */
static double left(const build *b) {
  if (b->deadline_s <= 0) return 0;
  double l = b->deadline_s - elapsed(b);
  return l > 0.01 ? l : 0.01;
}

/* The progress line: once after a second, then every 15 s. */
static void tick(void *p) {
  build *b = p;
  double t = elapsed(b);
  if (!b->announced && t >= 1.0) {
    b->announced = 1;
    b->next_note = t + 15.0;
    say(b, "dlx: building %s from %s%s (%s; later runs load it from the cache)", b->s->name,
        b->src[0], b->n > 1 ? " and more" : "", b->tools[b->link].cmd);
  } else if (b->announced && t >= b->next_note) {
    b->next_note = t + 15.0;
    say(b, "dlx: still building %s (%.0f s)", b->s->name, t);
  }
}

/* ---- facts ------------------------------------------------------------------------ */

static int find_tools(build *b) {
  for (int l = 0; l < DLX_LANG_COUNT; ++l) {
    if (!b->used[l]) continue;
    char cand[3][4096];
    int nc = dlx_compiler_candidates((dlx_lang)l, &b->s->env, cand);
    tool *t = &b->tools[l];
    for (int i = 0; i < nc && !t->path[0]; ++i)
      if (dlx_which(cand[i], b->s->path_env, t->path, sizeof t->path) == 0)
        snprintf(t->cmd, sizeof t->cmd, "%s", l == DLX_LANG_CUDA ? t->path : cand[i]);
    if (!t->path[0]) {
      if (l == DLX_LANG_CUDA)
        return dlx_set_err(b->err, b->errlen,
                           "no CUDA compiler: nvcc is not in $CUDA_HOME/bin, /usr/local/cuda/bin "
                           "or PATH (install the Debian package %s)",
                           dlx_lang_package(DLX_LANG_CUDA));
      return dlx_set_err(b->err, b->errlen,
                         "no %s: '%s' is not found in PATH (install the Debian package %s, or "
                         "set %s)",
                         dlx_lang_role((dlx_lang)l), cand[0], dlx_lang_package((dlx_lang)l),
                         l == DLX_LANG_C ? "CC" : "CXX");
    }
    if (file_sig(t->path, t->sig))
      return dlx_set_err(b->err, b->errlen, "cannot stat the %s %s", dlx_lang_role((dlx_lang)l),
                         t->path);
  }
  return 0;
}

static int gather(build *b) {
  const dlx_kernel_build_spec *s = b->s;
  if (!dlx_build_name_ok(s->name))
    return dlx_set_err(b->err, b->errlen,
                       "name '%s' is not usable in a file name: use letters, digits, '_', '-' "
                       "and '.' (at most 64, not starting with '.' or '-')",
                       s->name ? s->name : "");
  b->n = s->inline_text ? 1 : s->n_sources;
  if (b->n == 0) return dlx_set_err(b->err, b->errlen, "no sources to build");
  if (b->n > MAX_SOURCES)
    return dlx_set_err(b->err, b->errlen, "too many sources (at most %d)", MAX_SOURCES);
  for (size_t i = 0; i < b->n; ++i) {
    if (s->lang_given) b->langs[i] = s->lang;
    else if (s->inline_text) return dlx_set_err(b->err, b->errlen, "inline source: no language");
    else if (dlx_lang_of_path(s->sources[i], &b->langs[i], b->err, b->errlen)) return -1;
    b->used[b->langs[i]] = 1;
  }
  b->link = dlx_link_lang(b->langs, b->n);
  b->used[b->link] = 1;
  if (find_tools(b)) return -1;
  if (b->used[DLX_LANG_CUDA] &&
      dlx_cuda_arch(s->cuda_arch, s->visible_arch, s->visible_from, b->arch_flag,
                    sizeof b->arch_flag, b->arch_why, sizeof b->arch_why, b->err, b->errlen))
    return -1;
  if (s->inline_text) {
    char name[256];
    dlx_digest_hex(s->inline_text, s->inline_len, b->src_digest[0]);
    if (dlx_build_inline_name(s->name, b->langs[0], b->src_digest[0], name, sizeof name))
      return dlx_set_err(b->err, b->errlen, "inline source: name too long");
    size_t len = strlen(b->kdir) + strlen(name) + 2;
    b->src_owned = malloc(len);
    if (!b->src_owned) return dlx_set_err(b->err, b->errlen, "out of memory");
    snprintf(b->src_owned, len, "%s/%s", b->kdir, name);
    b->src[0] = b->src_owned;
    return 0;
  }
  for (size_t i = 0; i < b->n; ++i) {
    b->src[i] = s->sources[i];
    errno = 0;
    if (b->src[i][0] != '/')
      return dlx_set_err(b->err, b->errlen, "source '%s' is not an absolute path", b->src[i]);
    if (digest_file(b->src[i], b->src_digest[i], &b->src_st[i]))
      return dlx_set_err(b->err, b->errlen, "cannot read source '%s': %s", b->src[i],
                         errno == EAGAIN ? "it changed while being read"
                         : errno         ? strerror(errno)
                                         : "not a regular file");
  }
  return 0;
}

static int compute_key1(build *b) {
  const char *srcs[MAX_SOURCES], *digests[MAX_SOURCES], *tools[DLX_LANG_COUNT],
      *cmds[DLX_LANG_COUNT];
  for (size_t i = 0; i < b->n; ++i) srcs[i] = b->src[i], digests[i] = b->src_digest[i];
  for (int l = 0; l < DLX_LANG_COUNT; ++l) {
    tools[l] = b->used[l] ? b->tools[l].path : NULL;
    cmds[l] = b->used[l] ? b->tools[l].cmd : NULL;
  }
  /* dlx's include folder is a flag like any other */
  const char *inc[1 + 4096];
  if (b->s->include_dirs.n > 4096) return dlx_set_err(b->err, b->errlen, "too many include_dirs");
  inc[0] = b->s->dlx_include_dir ? b->s->dlx_include_dir : "";
  for (size_t i = 0; i < b->s->include_dirs.n; ++i) inc[i + 1] = b->s->include_dirs.v[i];
  dlx_build_facts f = {b->s->name, DLX_ABI_VERSION, b->n, b->langs, srcs, digests, tools, cmds,
                       {inc, b->s->include_dirs.n + 1}, b->s->cflags, b->s->ldflags,
                       b->s->libraries, b->used[DLX_LANG_CUDA] ? b->arch_flag : NULL};
  if (dlx_build_key1(&f, b->key1) || dlx_build_manifest_name(b->s->name, b->key1, b->base,
                                                             sizeof b->base))
    return dlx_set_err(b->err, b->errlen, "cannot compute the cache key");
  b->base[strlen(b->base) - strlen(".build")] = '\0';
  return 0;
}

/* ---- the warm check ------------------------------------------------------------------ */

/* 1: the library is there, whole and ours (res->fd open on it); 0: build it (why says
 * why, for verbose output). */
static int warm(build *b, char *why, size_t whylen) {
  char name[256];
  snprintf(name, sizeof name, "%s.build", b->base);
  size_t len;
  struct stat st;
  char *text = read_at(b->dirfd, name, MAX_RECORD, 1, &len, &st);
  if (!text) {
    snprintf(why, whylen, "not built before");
    return 0;
  }
  dlx_manifest m;
  char perr[256];
  int hit = 0;
  if (st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH))) {
    snprintf(why, whylen, "its build record %s is not ours alone", name);
    free(text);
    return 0;
  }
  if (dlx_manifest_parse(text, len, &m, perr, sizeof perr)) {
    snprintf(why, whylen, "%s: %s", name, perr);
    free(text);
    return 0;
  }
  free(text);
  const char *versions[DLX_LANG_COUNT] = {0};
  const char **dpaths = calloc(m.n_deps + 1, sizeof *dpaths);
  const char **ddigests = calloc(m.n_deps + 1, sizeof *ddigests);
  char key2[65], lib[256];
  if (!dpaths || !ddigests) {
    snprintf(why, whylen, "out of memory");
    goto done;
  }
  if (strcmp(m.key1, b->key1)) {
    snprintf(why, whylen, "its build record is for another build");
    goto done;
  }
  for (int l = 0; l < DLX_LANG_COUNT; ++l) {
    if (!b->used[l]) continue;
    const dlx_manifest_tool *t = &m.tools[l];
    if (!t->path || strcmp(t->path, b->tools[l].path) || strcmp(t->sig, b->tools[l].sig)) {
      snprintf(why, whylen, "the %s %s changed", dlx_lang_role((dlx_lang)l), b->tools[l].path);
      goto done;
    }
    versions[l] = t->version_digest;
  }
  for (size_t i = 0; i < m.n_deps; ++i) {
    char d[65];
    struct stat ast;
    if (!strcmp(m.deps[i].digest, kAbsent)
            ? lstat(m.deps[i].path, &ast) == 0 || (errno != ENOENT && errno != ENOTDIR)
            : digest_file(m.deps[i].path, d, NULL) || strcmp(d, m.deps[i].digest)) {
      snprintf(why, whylen, "%s changed", m.deps[i].path);
      goto done;
    }
    dpaths[i] = m.deps[i].path;
    ddigests[i] = m.deps[i].digest;
  }
  if (dlx_build_key2(b->key1, versions, m.n_deps, dpaths, ddigests, key2) ||
      dlx_build_lib_name(b->s->name, key2, lib, sizeof lib) || strcmp(lib, m.lib)) {
    snprintf(why, whylen, "its build record names another library");
    goto done;
  }
  int fd = -1;
  char terr[512];
  int trusted = dlx_cache_open_trusted(b->dirfd, lib, &fd, terr, sizeof terr);
  if (trusted == 1) {
    if (!fits(snprintf(b->res->path, sizeof b->res->path, "%s/%s", b->kdir, lib),
              sizeof b->res->path)) {
      close(fd);
      snprintf(why, whylen, "path too long");
      goto done;
    }
    b->res->fd = fd;
    hit = 1;
  } else if (trusted == 0) {
    snprintf(why, whylen, "%s is missing", lib);
  } else {
    snprintf(why, whylen, "%s", terr);
  }
done:
  free(dpaths);
  free(ddigests);
  dlx_manifest_free(&m);
  return hit;
}

/* ---- the cold build ------------------------------------------------------------------- */

typedef struct deps {
  char **path;
  char (*digest)[65];
  struct stat *st; /* each header's state when hashed */
  size_t n, cap;
  const build *b;
  char cwd[PATH_MAX];
  struct timespec unit_start; /* CLOCK_REALTIME when the current unit's compiler started */
  char changed[PATH_MAX];     /* a header written while the compiler ran, if any */
} deps;

/* Room for one more path. */
static int deps_grow(deps *d) {
  if (d->n < d->cap) return 0;
  size_t cap = d->cap ? d->cap * 2 : 64;
  char **np = realloc(d->path, cap * sizeof *np);
  if (!np) return -1;
  d->path = np;
  char(*nd)[65] = realloc(d->digest, cap * sizeof *nd);
  if (!nd) return -1;
  d->digest = nd;
  struct stat *ns = realloc(d->st, cap * sizeof *ns);
  if (!ns) return -1;
  d->st = ns;
  d->cap = cap;
  return 0;
}

/* Written after `t` (its ctime is later): the compiler that started at `t` may have read
 * other bytes than the ones hashed now. ctime is the kernel's, never set by a user. */
static int changed_since(const struct stat *st, const struct timespec *t) {
  return st->st_ctim.tv_sec > t->tv_sec ||
         (st->st_ctim.tv_sec == t->tv_sec && st->st_ctim.tv_nsec > t->tv_nsec);
}

static int dep_add(void *p, const char *path) {
  deps *d = p;
  char abs[PATH_MAX];
  if (path[0] == '/') snprintf(abs, sizeof abs, "%s", path);
  else if (snprintf(abs, sizeof abs, "%s/%s", d->cwd, path) >= (int)sizeof abs) return -1;
  for (size_t i = 0; i < d->b->n; ++i) /* the sources are in key1 already */
    if (!strcmp(abs, d->b->src[i])) return 0;
  for (size_t i = 0; i < d->n; ++i)
    if (!strcmp(abs, d->path[i])) return 0;
  if (deps_grow(d)) return -1;
  d->path[d->n] = strdup(abs);
  if (!d->path[d->n]) return -1;
  int unread = digest_file(abs, d->digest[d->n], &d->st[d->n]);
  if (unread || changed_since(&d->st[d->n], &d->unit_start)) {
    if (!unread || errno == EAGAIN) snprintf(d->changed, sizeof d->changed, "%s", abs);
    free(d->path[d->n]);
    return -1;
  }
  ++d->n;
  return 0;
}


#define MAX_FOLDERS 512
#define MAX_PROBES 65536

/* The part of `path` below folder `dir`, or NULL. */
static const char *below(const char *path, const char *dir) {
  size_t n = strlen(dir);
  while (n > 1 && dir[n - 1] == '/') --n;
  return n && !strncmp(path, dir, n) && path[n] == '/' ? path + n + 1 : NULL;
}

static int folder_add(const char **v, char **owned, size_t *n, const char *dir, size_t len) {
  for (size_t i = 0; i < *n; ++i)
    if (strlen(v[i]) == len && !strncmp(v[i], dir, len)) return 0;
  if (*n == MAX_FOLDERS || !len) return 0;
  owned[*n] = strndup(dir, len);
  if (!owned[*n]) return -1;
  v[*n] = owned[*n];
  ++*n;
  return 0;
}

/* Every folder the compiler searches for the user's headers (the sources', each -I, the
 * folders of headers found in them) crossed with the name each header found there was
 * included by: the combinations absent now go into the record. */
static int record_absent(deps *d, const dlx_kernel_build_spec *s) {
  const char *f[MAX_FOLDERS];
  char *owned[MAX_FOLDERS];
  size_t nf = 0, n0 = d->n, probes = 0;
  int rc = -1;
  for (size_t i = 0; i < d->b->n; ++i) {
    const char *slash = strrchr(d->b->src[i], '/');
    if (slash && folder_add(f, owned, &nf, d->b->src[i], (size_t)(slash - d->b->src[i])))
      goto done;
  }
  if (s->dlx_include_dir &&
      folder_add(f, owned, &nf, s->dlx_include_dir, strlen(s->dlx_include_dir)))
    goto done;
  for (size_t i = 0; i < s->include_dirs.n; ++i)
    if (folder_add(f, owned, &nf, s->include_dirs.v[i], strlen(s->include_dirs.v[i]))) goto done;
  for (size_t i = 0; i < s->cflags.n; ++i) { /* -I<dir>, -I <dir>, -iquote <dir> */
    const char *a = s->cflags.v[i], *dir = NULL;
    if (!strcmp(a, "-I") || !strcmp(a, "-iquote") || !strcmp(a, "-isystem"))
      dir = i + 1 < s->cflags.n ? s->cflags.v[++i] : NULL;
    else if (!strncmp(a, "-I", 2)) dir = a + 2;
    char abs[PATH_MAX];
    if (!dir || !dir[0] ||
        !fits(dir[0] == '/' ? snprintf(abs, sizeof abs, "%s", dir)
                            : snprintf(abs, sizeof abs, "%s/%s", d->cwd, dir),
              sizeof abs))
      continue;
    if (folder_add(f, owned, &nf, abs, strlen(abs))) goto done;
  }
  size_t user = nf;
  for (size_t i = 0; i < n0; ++i) { /* quoted includes search the includer's folder first */
    const char *slash = strrchr(d->path[i], '/');
    for (size_t j = 0; slash && j < user; ++j)
      if (below(d->path[i], f[j])) {
        if (folder_add(f, owned, &nf, d->path[i], (size_t)(slash - d->path[i]))) goto done;
        break;
      }
  }
  for (size_t i = 0; i < n0; ++i)
    for (size_t j = 0; j < nf; ++j) {
      const char *rel = below(d->path[i], f[j]);
      for (size_t k = 0; rel && k < nf && probes < MAX_PROBES; ++k) {
        char p[PATH_MAX];
        struct stat st;
        if (k == j || !fits(snprintf(p, sizeof p, "%s/%s", f[k], rel), sizeof p) ||
            lstat(p, &st) == 0)
          continue;
        int seen = 0;
        for (size_t m = 0; m < d->n && !seen; ++m) seen = !strcmp(p, d->path[m]);
        if (seen) continue;
        if (deps_grow(d) || !(d->path[d->n] = strdup(p))) goto done;
        memset(&d->st[d->n], 0, sizeof d->st[d->n]);
        memcpy(d->digest[d->n++], kAbsent, 65);
        ++probes;
      }
    }
  rc = 0;
done:
  for (size_t i = 0; i < nf; ++i) free(owned[i]);
  return rc;
}

static void deps_free(deps *d) {
  for (size_t i = 0; i < d->n; ++i) free(d->path[i]);
  free(d->path);
  free(d->digest);
  free(d->st);
}

/* Runs one step; on failure keeps its command and output in res. */
static int step(build *b, char **argv, const char *what) {
  char *cmd = dlx_argv_join(argv);
  if (b->s->verbose) say(b, "dlx: %s: %s", what, cmd ? cmd : argv[0]);
  char *out = NULL;
  int status = 0;
  char why[4600];
  int rc = dlx_build_step(argv, left(b), tick, b, &out, &status, why, sizeof why);
  if (rc) {
    snprintf(b->err, b->errlen, "%s: %s", what, why);
    free(b->res->log);
    free(b->res->command);
    b->res->log = out;
    b->res->command = cmd;
    return -1;
  }
  free(out);
  free(cmd);
  return 0;
}

/* The compiler's --version, as a digest (for the key) and one line (for people). */
static int versions(build *b) {
  for (int l = 0; l < DLX_LANG_COUNT; ++l) {
    if (!b->used[l]) continue;
    tool *t = &b->tools[l];
    char *argv[] = {t->path, "--version", NULL};
    char *out = NULL;
    int status = 0;
    char why[4600];
    int timed_out = 0;
    /* a non-zero status is fine: whatever it prints identifies it (some print to stderr
     * and exit 1); only a compiler that cannot run, or hangs, stops the build */
    if (dlx_run_capture_ticking(argv, left(b), tick, b, &out, &status, &timed_out, why,
                                sizeof why)) {
      dlx_set_err(b->err, b->errlen, "asking the %s for its version: %s%s",
                  dlx_lang_role((dlx_lang)l), timed_out ? "DLX_BUILD_TIMEOUT: " : "", why);
      free(b->res->log);
      b->res->log = out;
      return -1;
    }
    const char *text = out ? out : "";
    dlx_digest_hex(text, strlen(text), t->vdigest);
    /* one line: the first that is not empty, newlines as " | " would be long; nvcc's
     * first lines are a banner, so its last line (the release) is the one kept */
    const char *line = text;
    size_t len = 0;
    for (const char *p = text; *p;) {
      const char *eol = strchr(p, '\n');
      size_t n = eol ? (size_t)(eol - p) : strlen(p);
      if (n && (!len || l == DLX_LANG_CUDA)) line = p, len = n;
      p += n + (eol ? 1 : 0);
    }
    if (len > 200) len = 200;
    t->version = malloc(len + 1);
    if (!t->version) {
      free(out);
      return dlx_set_err(b->err, b->errlen, "out of memory");
    }
    memcpy(t->version, line, len);
    t->version[len] = '\0';
    for (char *c = t->version; *c; ++c)
      if (*c == '\r') *c = ' ';
    free(out);
  }
  return 0;
}

/* A small file written whole or not at all: temp file, then rename. */
static int write_file(const char *path, const char *text, size_t len, mode_t mode, char *err,
                      size_t errlen) {
  char temp[4200];
  if (dlx_temp_path(path, temp, sizeof temp)) return dlx_set_err(err, errlen, "path too long");
  int fd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) return dlx_set_err(err, errlen, "cannot write %s: %s", temp, strerror(errno));
  size_t done = 0;
  while (done < len) {
    ssize_t w = write(fd, text + done, len - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    done += (size_t)w;
  }
  int ok = done == len && fsync(fd) == 0;
  close(fd);
  if (!ok || rename(temp, path) != 0) {
    unlink(temp);
    return dlx_set_err(err, errlen, "cannot write %s: %s", path, strerror(errno));
  }
  return 0;
}

static void remove_tree(const char *dir) {
  DIR *d = opendir(dir);
  if (d) {
    struct dirent *e;
    while ((e = readdir(d))) {
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
      char p[4400];
      if (fits(snprintf(p, sizeof p, "%s/%s", dir, e->d_name), sizeof p)) unlink(p);
    }
    closedir(d);
  }
  rmdir(dir);
}

/* What the cold build holds until it is done: the work folder, the objects, the headers
 * read, the commands run (for the record), the temp library. */
typedef struct cold_build {
  build *b;
  char work[4400], temp[4400];
  char *objs[MAX_SOURCES];
  deps d;
  const char *commands[MAX_SOURCES + 1];
  char *joined[MAX_SOURCES + 1];
  size_t n_joined;
  char lib[256];
} cold_build;

/* An input written while it was compiled: the library would not be what its key says. */
static int changed_error(build *b, const char *path) {
  return dlx_set_err(b->err, b->errlen,
                     "'%s' changed while it was being compiled: nothing was cached (build "
                     "again once it is saved)",
                     path);
}

/* Runs one compiler command, kept for the record (argv is freed). */
static int run_step(cold_build *c, char **argv, int argc, const char *what) {
  c->joined[c->n_joined] = dlx_argv_join(argv);
  c->commands[c->n_joined] = c->joined[c->n_joined] ? c->joined[c->n_joined] : "";
  ++c->n_joined;
  int rc = step(c->b, argv, what);
  dlx_argv_free(argv, argc);
  return rc;
}

/* The compilers' versions, the inline source written, a private work folder. */
static int cold_prepare(cold_build *c) {
  build *b = c->b;
  const dlx_kernel_build_spec *s = b->s;
  if (!getcwd(c->d.cwd, sizeof c->d.cwd))
    return dlx_set_err(b->err, b->errlen, "cannot read the current folder: %s", strerror(errno));
  if (versions(b)) return -1;
  if (s->inline_text) {
    size_t have_len;
    char *have = read_at(AT_FDCWD, b->src[0], MAX_HASHED, 1, &have_len, NULL);
    int same = have && have_len == s->inline_len && !memcmp(have, s->inline_text, have_len);
    free(have);
    if (!same && write_file(b->src[0], s->inline_text, s->inline_len, 0600, b->err, b->errlen))
      return -1;
    if (lstat(b->src[0], &b->src_st[0]))
      return dlx_set_err(b->err, b->errlen, "cannot stat %s: %s", b->src[0], strerror(errno));
  }
  if (!fits(snprintf(c->work, sizeof c->work, "%s/.work-%s-XXXXXX", b->kdir, s->name),
            sizeof c->work) || !mkdtemp(c->work)) {
    dlx_set_err(b->err, b->errlen, "cannot make a work folder in %s: %s", b->kdir,
                strerror(errno));
    c->work[0] = '\0';
    return -1;
  }
  return 0;
}

/* Each source to an object in the work folder; every header it read into c->d. */
static int compile_units(cold_build *c) {
  build *b = c->b;
  const dlx_kernel_build_spec *s = b->s;
  const char *inc[1 + 4096];
  inc[0] = s->dlx_include_dir;
  for (size_t i = 0; i < s->include_dirs.n; ++i) inc[i + 1] = s->include_dirs.v[i];
  if (b->used[DLX_LANG_CUDA] && s->verbose) say(b, "dlx: %s: %s", s->name, b->arch_why);
  for (size_t i = 0; i < b->n; ++i) {
    char obj[4600], dep[4600];
    const char *base = strrchr(b->src[i], '/');
    if (!fits(snprintf(obj, sizeof obj, "%s/%zu-%s.o", c->work, i, base ? base + 1 : b->src[i]),
              sizeof obj) ||
        !fits(snprintf(dep, sizeof dep, "%s/%zu.d", c->work, i), sizeof dep))
      return dlx_set_err(b->err, b->errlen, "path too long");
    c->objs[i] = strdup(obj);
    if (!c->objs[i]) return dlx_set_err(b->err, b->errlen, "out of memory");
    dlx_unit_spec u = {b->langs[i], b->tools[b->langs[i]].cmd, b->src[i], obj, dep,
                       {inc, s->include_dirs.n + 1}, s->cflags, b->arch_flag};
    char **argv = NULL;
    int argc = 0;
    if (dlx_unit_argv(&u, &argv, &argc, b->err, b->errlen)) return -1;
    clock_gettime(CLOCK_REALTIME, &c->d.unit_start); /* the clock file times are taken from */
    if (run_step(c, argv, argc, "compiling")) return -1;
    size_t len;
    char *text = read_at(AT_FDCWD, dep, MAX_RECORD, 1, &len, NULL);
    char derr[512];
    if (!text || dlx_depfile_parse(text, len, dep_add, &c->d, derr, sizeof derr) < 0) {
      free(text);
      if (c->d.changed[0]) return changed_error(b, c->d.changed);
      dlx_set_err(b->err, b->errlen,
                  "the compiler's dependency output %s: %s (the cache key needs every header "
                  "the source includes)",
                  dep, text ? derr : "missing");
      return -1;
    }
    free(text);
  }
  if (c->d.n && record_absent(&c->d, s)) return dlx_set_err(b->err, b->errlen, "out of memory");
  return 0;
}

/* The compiler must have read the bytes the key holds. Each source is as it was when
 * hashed (same state, so not even rewritten and put back; same digest), and each header
 * as it was when hashed right after the first compile that read it (hashed then, and
 * checked not written since that compile started). Otherwise nothing is published. */
static int check_inputs(cold_build *c) {
  build *b = c->b;
  for (size_t i = 0; i < b->n; ++i) {
    char d[65];
    struct stat st;
    if (digest_file(b->src[i], d, &st) || !same_state(&st, &b->src_st[i]) ||
        strcmp(d, b->src_digest[i]))
      return changed_error(b, b->src[i]);
  }
  for (size_t i = 0; i < c->d.n; ++i) {
    struct stat st;
    if (!strcmp(c->d.digest[i], kAbsent)) continue; /* the warm check sees one appear */
    if (stat(c->d.path[i], &st) || !same_state(&st, &c->d.st[i]))
      return changed_error(b, c->d.path[i]);
  }
  return 0;
}

/* The full key (key1, the compilers' versions, the headers read) names the library; link
 * the objects to a temp file beside it, seal it and rename it into place. */
static int link_and_publish(cold_build *c) {
  build *b = c->b;
  const dlx_kernel_build_spec *s = b->s;
  const deps *d = &c->d;
  const char *versions_d[DLX_LANG_COUNT] = {0};
  for (int l = 0; l < DLX_LANG_COUNT; ++l)
    if (b->used[l]) versions_d[l] = b->tools[l].vdigest;
  char key2[65];
  const char **dd = malloc((d->n + 1) * sizeof *dd);
  for (size_t i = 0; dd && i < d->n; ++i) dd[i] = d->digest[i];
  int kbad = !dd || dlx_build_key2(b->key1, versions_d, d->n, (const char *const *)d->path, dd,
                                   key2) ||
             dlx_build_lib_name(s->name, key2, c->lib, sizeof c->lib);
  free(dd);
  if (kbad) return dlx_set_err(b->err, b->errlen, "cannot compute the cache key");
  if (!fits(snprintf(b->res->path, sizeof b->res->path, "%s/%s", b->kdir, c->lib),
            sizeof b->res->path) ||
      dlx_temp_path(b->res->path, c->temp, sizeof c->temp))
    return dlx_set_err(b->err, b->errlen, "path too long");
  dlx_link_spec ls = {b->tools[b->link].cmd, c->temp, {(const char *const *)c->objs, b->n},
                      s->ldflags, s->libraries};
  char **argv = NULL;
  int argc = 0;
  if (dlx_link_argv(&ls, &argv, &argc, b->err, b->errlen)) return -1;
  if (run_step(c, argv, argc, "linking")) return -1;
  if (dlx_seal_file(c->temp, b->err, b->errlen) ||
      dlx_publish(c->temp, b->res->path, b->err, b->errlen))
    return -1;
  c->temp[0] = '\0';
  return 0;
}

/* The build record beside the library: written last, so a record always names a library
 * that was published. */
static int write_record(cold_build *c) {
  build *b = c->b;
  const dlx_kernel_build_spec *s = b->s;
  dlx_manifest m = {0};
  m.name = s->name;
  m.key1 = b->key1;
  m.lib = c->lib;
  m.arch = b->used[DLX_LANG_CUDA] ? b->arch_why : NULL;
  for (int l = 0; l < DLX_LANG_COUNT; ++l)
    if (b->used[l])
      m.tools[l] = (dlx_manifest_tool){b->tools[l].path, b->tools[l].sig, b->tools[l].vdigest,
                                       b->tools[l].version};
  dlx_manifest_file srcs[MAX_SOURCES];
  for (size_t i = 0; i < b->n; ++i) srcs[i] = (dlx_manifest_file){b->src_digest[i], b->src[i]};
  m.sources = srcs;
  m.n_sources = b->n;
  m.deps = c->d.n ? malloc(c->d.n * sizeof *m.deps) : NULL;
  if (c->d.n && !m.deps) return dlx_set_err(b->err, b->errlen, "out of memory");
  for (size_t i = 0; i < c->d.n; ++i) m.deps[i] = (dlx_manifest_file){c->d.digest[i], c->d.path[i]};
  m.n_deps = c->d.n;
  m.commands = c->commands;
  m.n_commands = c->n_joined;
  char *record = dlx_manifest_format(&m);
  free(m.deps);
  char rpath[4400];
  int rc;
  if (!fits(snprintf(rpath, sizeof rpath, "%s/%s.build", b->kdir, b->base), sizeof rpath) ||
      !record)
    rc = dlx_set_err(b->err, b->errlen, "cannot write the build record (out of memory?)");
  else
    rc = write_file(rpath, record, strlen(record), 0600, b->err, b->errlen);
  free(record);
  return rc;
}

/* Compile, link, publish, record; then open what was published as the warm path does. */
static int cold(build *b) {
  cold_build c = {0};
  c.b = b;
  c.d.b = b;
  int rc = -1;
  if (cold_prepare(&c) || compile_units(&c) || check_inputs(&c) || link_and_publish(&c) ||
      write_record(&c))
    goto done;
  char terr[512];
  int trusted = dlx_cache_open_trusted(b->dirfd, c.lib, &b->res->fd, terr, sizeof terr);
  if (trusted != 1) {
    dlx_set_err(b->err, b->errlen, "the library just built is refused: %s",
                trusted ? terr : "it vanished");
    goto done;
  }
  b->res->built = 1;
  rc = 0;
done:
  if (c.temp[0]) unlink(c.temp);
  if (c.work[0]) remove_tree(c.work);
  for (size_t i = 0; i < b->n; ++i) free(c.objs[i]);
  for (size_t i = 0; i < c.n_joined; ++i) free(c.joined[i]);
  deps_free(&c.d);
  return rc;
}

/* ---- the whole -------------------------------------------------------------------------- */

void dlx_kernel_build_result_free(dlx_kernel_build_result *res) {
  if (!res) return;
  free(res->log);
  free(res->command);
  res->log = res->command = NULL;
  if (res->fd >= 0) close(res->fd);
  res->fd = -1;
}

int dlx_kernel_build(const dlx_kernel_build_spec *s, dlx_kernel_build_result *res, char *err,
                     size_t errlen) {
  memset(res, 0, sizeof *res);
  res->fd = -1;
  build *b = calloc(1, sizeof *b);
  if (!b) return dlx_set_err(err, errlen, "out of memory");
  b->s = s;
  b->res = res;
  b->err = err;
  b->errlen = errlen;
  b->dirfd = -1;
  clock_gettime(CLOCK_MONOTONIC, &b->t0);
  b->deadline_s = s->timeout_s;
  int rc = -1;
  dlx_lock lock = {-1};
  char why[1024];
  if (!s->cache_dir || snprintf(b->kdir, sizeof b->kdir, "%s/kernels", s->cache_dir) >=
                           (int)sizeof b->kdir) {
    dlx_set_err(err, errlen, "cache folder path too long");
    goto done;
  }
  /* the cache folder first (created 0700, checked with every folder above it), then
   * kernels/ inside it, checked the same way */
  if (dlx_cache_dir_ensure(s->cache_dir, err, errlen)) goto done;
  b->dirfd = dlx_cache_dir_open(b->kdir, 1, err, errlen);
  if (b->dirfd < 0) goto done;
  if (gather(b) || compute_key1(b)) goto done;
  if (warm(b, why, sizeof why)) {
    if (s->verbose) say(b, "dlx: %s: from the cache: %s", s->name, res->path);
    rc = 0;
    goto done;
  }
  if (s->verbose) say(b, "dlx: %s: building (%s)", s->name, why);
  char lock_path[4400], what[4400];
  if (!fits(snprintf(lock_path, sizeof lock_path, "%s/%s.lock", b->kdir, b->base),
            sizeof lock_path) ||
      !fits(snprintf(what, sizeof what, "%s/%s", b->kdir, b->base), sizeof what)) {
    dlx_set_err(err, errlen, "cache folder path too long");
    goto done;
  }
  if (dlx_build_lock(what, lock_path, s->timeout_s, s->say, s->ctx, &lock, err, errlen))
    goto done;
  /* whoever held the lock may have built it meanwhile */
  if (warm(b, why, sizeof why)) {
    if (s->verbose) say(b, "dlx: %s: built by another process: %s", s->name, res->path);
    rc = 0;
    goto done;
  }
  rc = cold(b);
  if (rc == 0 && b->announced) say(b, "dlx: built %s in %.1f s", s->name, elapsed(b));
done:
  dlx_lock_release(&lock);
  if (b->dirfd >= 0) close(b->dirfd);
  for (int l = 0; l < DLX_LANG_COUNT; ++l) free(b->tools[l].version);
  free(b->src_owned);
  free(b);
  if (rc && res->fd >= 0) {
    close(res->fd);
    res->fd = -1;
  }
  return rc;
}
