/* dlx_compile_command.c - compiler command lines and running them with captured output. */
#include "dlx_compile_command.h"
#include "dlx_core.h"
#include "dlx_fork.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* ---- a growable, NULL-terminated argv ------------------------------------ */

int dlx_words_push(dlx_words *w, const char *s, size_t len) {
  if (w->n + 2 > w->cap) {
    int cap = w->cap ? w->cap * 2 : 16;
    char **v = realloc(w->v, (size_t)cap * sizeof *v);
    if (!v) return -1;
    v[w->n] = NULL; /* terminated even if the copy below fails */
    w->v = v;
    w->cap = cap;
  }
  char *copy = malloc(len + 1);
  if (!copy) return -1;
  memcpy(copy, s, len);
  copy[len] = '\0';
  w->v[w->n++] = copy;
  w->v[w->n] = NULL;
  return 0;
}

int dlx_words_push2(dlx_words *w, const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  char *tmp = malloc(la + lb + 1);
  if (!tmp) return -1;
  memcpy(tmp, a, la);
  memcpy(tmp + la, b, lb + 1);
  int rc = dlx_words_push(w, tmp, la + lb);
  free(tmp);
  return rc;
}

/* An empty list still gets a (NULL-terminated) array, so callers may exec it
 * or index argv[argc] without a special case. */
int dlx_words_finish(dlx_words *w) {
  if (w->v) return 0;
  w->v = calloc(1, sizeof *w->v);
  return w->v ? 0 : -1;
}

void dlx_argv_free(char **argv, int argc) {
  if (!argv) return;
  for (int i = 0; i < argc; ++i) free(argv[i]);
  free(argv);
}

/* ---- shell splitting ------------------------------------------------------ */

static int is_blank(char c) { return c == ' ' || c == '\t' || c == '\n'; }

int dlx_shell_split(const char *s, char ***argv_out, int *argc_out, char *err, size_t errlen) {
  *argv_out = NULL;
  *argc_out = 0;
  if (!s) s = "";
  dlx_words w = {0};
  char *cur = malloc(strlen(s) + 1); /* no word is longer than the input */
  if (!cur) return dlx_set_err(err, errlen, "out of memory");
  size_t len = 0;
  int in_word = 0; /* a word has started, even if empty ('' or "") */
  const char *why = NULL;
  for (const char *p = s; *p && !why; ++p) {
    char c = *p;
    if (is_blank(c)) {
      if (in_word && dlx_words_push(&w, cur, len) != 0) why = "out of memory";
      in_word = 0;
      len = 0;
    } else if (c == '\'') {
      const char *end = strchr(p + 1, '\'');
      if (!end) {
        why = "unterminated single quote";
        break;
      }
      memcpy(cur + len, p + 1, (size_t)(end - p - 1));
      len += (size_t)(end - p - 1);
      in_word = 1;
      p = end;
    } else if (c == '"') {
      in_word = 1;
      for (++p; *p && *p != '"'; ++p) {
        if (*p == '\\' && p[1] && strchr("$`\"\\\n", p[1])) {
          ++p;
          if (*p != '\n') cur[len++] = *p; /* backslash-newline joins lines */
        } else {
          cur[len++] = *p; /* other backslashes stay literal inside "" */
        }
      }
      if (!*p) {
        why = "unterminated double quote";
        break;
      }
    } else if (c == '\\') {
      if (!p[1]) {
        why = "trailing backslash";
        break;
      }
      ++p;
      if (*p == '\n') continue; /* line continuation: no character, no word */
      cur[len++] = *p;
      in_word = 1;
    } else {
      cur[len++] = c;
      in_word = 1;
    }
  }
  if (!why && in_word && dlx_words_push(&w, cur, len) != 0) why = "out of memory";
  if (!why && dlx_words_finish(&w) != 0) why = "out of memory";
  free(cur);
  if (why) {
    dlx_argv_free(w.v, w.n);
    return dlx_set_err(err, errlen, "cannot split '%s': %s", s, why);
  }
  *argv_out = w.v;
  *argc_out = w.n;
  return 0;
}

/* ---- the compiler command line --------------------------------------------- */

/* Appends the shell-split words of `s` (named `what` in errors). */
int dlx_words_split(dlx_words *w, const char *s, const char *what, char *err, size_t errlen,
                      int *count) {
  char **v;
  int n;
  char why[512];
  if (dlx_shell_split(s, &v, &n, why, sizeof why) != 0)
    return dlx_set_err(err, errlen, "%s: %s", what, why);
  int rc = 0;
  for (int i = 0; i < n && rc == 0; ++i) rc = dlx_words_push(w, v[i], strlen(v[i]));
  dlx_argv_free(v, n);
  if (count) *count = n;
  return rc == 0 ? 0 : dlx_set_err(err, errlen, "out of memory");
}

int dlx_compile_argv(const dlx_compile_spec *s, char ***argv_out, int *argc_out, char *err,
                     size_t errlen) {
  *argv_out = NULL;
  *argc_out = 0;
  if (!s->source || !s->source[0] || !s->output || !s->output[0])
    return dlx_set_err(err, errlen, "compile: a source and an output file are required");
  for (size_t i = 0; i < s->n_lib_dirs; ++i)
    if (strchr(s->lib_dirs[i], ','))
      return dlx_set_err(err, errlen,
                     "compile: library folder '%s' contains ',', which -Wl,-rpath, would split",
                     s->lib_dirs[i]);

  dlx_words w = {0};
  int ncxx = 0, bad = 0;
  if (dlx_words_split(&w, s->cxx, "CXX", err, errlen, &ncxx) != 0) goto fail;
  if (ncxx == 0) {
    dlx_set_err(err, errlen, "compile: no C++ compiler (CXX is empty)");
    goto fail;
  }
  static const char *const kBase[] = {"-std=c++17", "-O2", "-fPIC", "-shared",
                                      "-fvisibility=hidden"};
  for (size_t i = 0; i < sizeof kBase / sizeof kBase[0]; ++i)
    bad |= dlx_words_push(&w, kBase[i], strlen(kBase[i]));
  for (size_t i = 0; i < s->n_include_dirs; ++i) bad |= dlx_words_push2(&w, "-I", s->include_dirs[i]);
  for (size_t i = 0; i < s->n_defines; ++i) bad |= dlx_words_push2(&w, "-D", s->defines[i]);
  bad |= dlx_words_push(&w, s->source, strlen(s->source));
  for (size_t i = 0; i < s->n_more_sources; ++i) {
    if (!s->more_sources[i] || !s->more_sources[i][0]) {
      dlx_argv_free(w.v, w.n);
      return dlx_set_err(err, errlen, "compile: an empty source file name");
    }
    bad |= dlx_words_push(&w, s->more_sources[i], strlen(s->more_sources[i]));
  }
  bad |= dlx_words_push(&w, "-o", 2);
  bad |= dlx_words_push(&w, s->output, strlen(s->output));
  for (size_t i = 0; i < s->n_lib_dirs; ++i) {
    bad |= dlx_words_push2(&w, "-L", s->lib_dirs[i]);
    /* rpath: the addon must find libtorch at load time without LD_LIBRARY_PATH. */
    bad |= dlx_words_push2(&w, "-Wl,-rpath,", s->lib_dirs[i]);
  }
  for (size_t i = 0; i < s->n_libs; ++i) bad |= dlx_words_push2(&w, "-l", s->libs[i]);
  if (bad) {
    dlx_set_err(err, errlen, "out of memory");
    goto fail;
  }
  if (dlx_words_split(&w, s->extra_cxxflags, "DLX_CXXFLAGS", err, errlen, NULL) != 0) goto fail;
  if (dlx_words_split(&w, s->extra_ldflags, "DLX_LDFLAGS", err, errlen, NULL) != 0) goto fail;
  *argv_out = w.v;
  *argc_out = w.n;
  return 0;
fail:
  dlx_argv_free(w.v, w.n);
  return -1;
}

/* ---- running it ---------------------------------------------------------- */

#define DLX_CAPTURE_CAP (64 * 1024)

/* Where execvp would look for `prog`, computed before fork: between fork and
 * exec in a threaded interpreter only async-signal-safe calls are allowed, so
 * the child must not allocate. NULL-terminated; NULL when out of memory (then
 * nothing is left allocated: a partial list would search fewer folders). */
static char **exec_candidates(const char *prog) {
  dlx_words w = {0};
  if (strchr(prog, '/')) {
    if (dlx_words_push(&w, prog, strlen(prog)) != 0) goto oom;
    return w.v;
  }
  const char *path = getenv("PATH");
  if (!path) path = "/bin:/usr/bin"; /* glibc's default when PATH is unset */
  size_t plen = strlen(prog);
  for (const char *p = path;; ++p) {
    const char *end = strchr(p, ':');
    size_t dlen = end ? (size_t)(end - p) : strlen(p);
    char *full = malloc(dlen + plen + 2);
    if (!full) goto oom;
    /* an empty PATH entry means the current folder */
    int n = dlen ? snprintf(full, dlen + plen + 2, "%.*s/%s", (int)dlen, p, prog)
                 : snprintf(full, dlen + plen + 2, "%s", prog);
    int rc = dlx_words_push(&w, full, (size_t)n);
    free(full);
    if (rc != 0) goto oom;
    if (!end) break;
    p = end;
  }
  return w.v;
oom:
  dlx_argv_free(w.v, w.n);
  return NULL;
}

static double seconds_since(const struct timespec *t0) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

/* Milliseconds left before the deadline for poll(): -1 without one, 0 when passed. */
static int ms_left(double timeout_s, const struct timespec *t0) {
  if (timeout_s <= 0) return -1;
  double left = timeout_s - seconds_since(t0);
  if (left <= 0) return 0;
  return left > 86400.0 ? 86400 * 1000 : (int)(left * 1000.0) + 1;
}

int dlx_build_timeout_parse(const char *value, double *seconds_out, char *err, size_t errlen) {
  *seconds_out = DLX_BUILD_TIMEOUT_DEFAULT;
  if (!value || !value[0]) return 0;
  char *end = NULL;
  errno = 0;
  double v = strtod(value, &end);
  while (end && (*end == ' ' || *end == '\t')) ++end;
  /* strtod also reads "nan", "inf" and hex; only a finite positive number of seconds */
  if (errno || end == value || !end || *end || !(v > 0) || v > 1e9)
    return dlx_set_err(err, errlen,
                       "DLX_BUILD_TIMEOUT must be a positive number of seconds, not '%s'", value);
  *seconds_out = v;
  return 0;
}

int dlx_run_capture(char *const *argv, char **output_out, int *exit_status_out, char *err,
                    size_t errlen) {
  return dlx_run_capture_timeout(argv, 0, output_out, exit_status_out, NULL, err, errlen);
}

int dlx_run_capture_timeout(char *const *argv, double timeout_s, char **output_out,
                            int *exit_status_out, int *timed_out_out, char *err,
                            size_t errlen) {
  return dlx_run_capture_ticking(argv, timeout_s, NULL, NULL, output_out, exit_status_out,
                                 timed_out_out, err, errlen);
}

/* The child, between fork and exec: async-signal-safe calls only. Its own process group,
 * so a timeout kills the compiler's children (cc1plus, as, ld) with it. Never returns. */
static _Noreturn void exec_child(char *const *argv, char **cand, int ncand, int out_w,
                                 int report_w) {
  (void)setpgid(0, 0);
  int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(out_w, 1) < 0 || dup2(out_w, 2) < 0) {
    int e = errno;
    (void)!write(report_w, &e, sizeof e);
    _exit(127);
  }
#ifdef CLOSE_RANGE_CLOEXEC
  /* Like subprocess's close_fds: the compiler gets only 0-2, so it cannot hold
   * someone else's pipe open. Marked, not closed, so `report` lives to exec. */
  (void)close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
#endif
  /* Python sets SIGPIPE to ignored, which exec keeps; give the compiler
   * default dispositions and an empty mask, as subprocess does. */
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGPIPE, &dfl, NULL);
  sigaction(SIGXFSZ, &dfl, NULL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  /* execvp's rules: remember EACCES, skip "not here" errors, stop on others */
  int e = ENOENT, seen_eacces = 0;
  for (int i = 0; i < ncand; ++i) {
    execve(cand[i], argv, environ);
    e = errno;
    if (e == EACCES) seen_eacces = 1;
    else if (e != ENOENT && e != ENOTDIR && e != ESTALE && e != ENODEV && e != ETIMEDOUT)
      break;
  }
  if (seen_eacces && (e == ENOENT || e == ENOTDIR)) e = EACCES;
  (void)!write(report_w, &e, sizeof e);
  _exit(127);
}

/* The program's output: at most the last DLX_CAPTURE_CAP bytes, read into a window twice
 * that size that slides when it fills. */
typedef struct capture {
  char *buf; /* cap + 1 bytes */
  size_t cap, len;
  unsigned long long dropped;
} capture;

/* Reads `fd` until EOF (or a read error, which only shortens the text) or the deadline:
 * 1 when the deadline passed, else 0. `tick` runs about 4 times a second. */
static int capture_read(capture *c, int fd, double timeout_s, const struct timespec *t0,
                        void (*tick)(void *ctx), void *ctx) {
  for (;;) {
    if (c->len == c->cap) {
      memmove(c->buf, c->buf + (c->cap - DLX_CAPTURE_CAP), DLX_CAPTURE_CAP);
      c->dropped += c->cap - DLX_CAPTURE_CAP;
      c->len = DLX_CAPTURE_CAP;
    }
    int wait_ms = ms_left(timeout_s, t0);
    if (wait_ms == 0) return 1;
    if (tick && (wait_ms < 0 || wait_ms > 250)) wait_ms = 250;
    struct pollfd pfd = {fd, POLLIN, 0};
    int pr = poll(&pfd, 1, wait_ms);
    if (tick) tick(ctx);
    if (pr < 0 && errno == EINTR) continue;
    if (pr == 0) continue; /* the deadline is checked above */
    if (pr < 0) return 0;
    ssize_t r = read(fd, c->buf + c->len, c->cap - c->len);
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (r <= 0) return 0;
    c->len += (size_t)r;
  }
}

/* The last DLX_CAPTURE_CAP bytes, after a note of how many were dropped, NUL-terminated. */
static void capture_finish(capture *c) {
  if (c->len > DLX_CAPTURE_CAP) {
    c->dropped += c->len - DLX_CAPTURE_CAP;
    memmove(c->buf, c->buf + (c->len - DLX_CAPTURE_CAP), DLX_CAPTURE_CAP);
    c->len = DLX_CAPTURE_CAP;
  }
  if (c->dropped) {
    char head[64];
    int hn = snprintf(head, sizeof head, "[... %llu bytes dropped ...]\n", c->dropped);
    /* The window is 2*cap+1 bytes and now holds cap: room for the note in place. */
    memmove(c->buf + hn, c->buf, c->len);
    memcpy(c->buf, head, (size_t)hn);
    c->len += (size_t)hn;
  }
  c->buf[c->len] = '\0';
}

/* Reaps `pid`. Its output has closed, but it may still run (it closed its stdout, or a
 * child of it holds it): kept to the same deadline, then killed with its group (and so
 * is one that *timed_out already). The waitpid result; *status its status. */
static pid_t reap(pid_t pid, int started, double timeout_s, const struct timespec *t0,
                  void (*tick)(void *ctx), void *ctx, int *timed_out, int *status) {
  pid_t w = 0;
  while (!*timed_out && started) {
    w = waitpid(pid, status, timeout_s > 0 ? WNOHANG : 0);
    if (w < 0 && errno == EINTR) continue;
    if (w != 0) break;
    if (ms_left(timeout_s, t0) == 0) {
      *timed_out = 1;
      break;
    }
    struct timespec nap = {0, 10 * 1000 * 1000};
    nanosleep(&nap, NULL);
    if (tick) tick(ctx);
  }
  if (*timed_out) {
    kill(-pid, SIGKILL); /* the whole group: the compiler and what it started */
    kill(pid, SIGKILL);  /* in case it left the group */
  }
  if (*timed_out || !started) {
    do w = waitpid(pid, status, 0);
    while (w < 0 && errno == EINTR);
  }
  return w;
}

int dlx_run_capture_ticking(char *const *argv, double timeout_s, void (*tick)(void *ctx),
                            void *ctx, char **output_out, int *exit_status_out,
                            int *timed_out_out, char *err, size_t errlen) {
  *output_out = NULL;
  *exit_status_out = -1;
  if (timed_out_out) *timed_out_out = 0;
  if (!argv || !argv[0] || !argv[0][0]) return dlx_set_err(err, errlen, "run: no program given");

  /* Allocated first, so -1 means "not started". */
  capture c = {malloc(2 * DLX_CAPTURE_CAP + 1), 2 * DLX_CAPTURE_CAP, 0, 0};
  char **cand = exec_candidates(argv[0]);
  int out[2] = {-1, -1}, report[2] = {-1, -1};
  if (!c.buf || !cand) {
    dlx_set_err(err, errlen, "run '%s': out of memory", argv[0]);
    goto fail;
  }
  int ncand = 0;
  while (cand[ncand]) ++ncand;
  /* registered: a thread forking meanwhile gives its child no copy of them (dlx_fork.h) */
  if (dlx_fork_pipe(out) != 0 || dlx_fork_pipe(report) != 0) {
    dlx_set_err(err, errlen, "run '%s': pipe: %s", argv[0], strerror(errno));
    goto fail;
  }

  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  /* fork + execve with a close-on-exec pipe carrying errno back: a failed exec
   * is reported as such on every libc and under valgrind (posix_spawnp reports
   * it only on some). */
  pid_t pid = dlx_fork_own();
  if (pid < 0) {
    dlx_set_err(err, errlen, "run '%s': fork: %s", argv[0], strerror(errno));
    goto fail;
  }
  if (pid == 0) exec_child(argv, cand, ncand, out[1], report[1]);
  /* Also from here, so the group exists before any kill (whichever runs first
   * wins; EACCES after the child's exec is harmless). */
  (void)setpgid(pid, pid);
  dlx_fork_close(out[1]);
  dlx_fork_close(report[1]);
  out[1] = report[1] = -1;
  dlx_argv_free(cand, ncand);
  cand = NULL;

  int exec_errno = 0;
  ssize_t r;
  do r = read(report[0], &exec_errno, sizeof exec_errno);
  while (r < 0 && errno == EINTR);
  dlx_fork_close(report[0]);
  report[0] = -1;
  int started = r == 0; /* EOF: the exec closed the pipe */
  int have_errno = r == (ssize_t)sizeof exec_errno;

  int timed_out = capture_read(&c, out[0], timeout_s, &t0, tick, ctx);
  dlx_fork_close(out[0]);
  out[0] = -1;

  int status = 0;
  pid_t w = reap(pid, started, timeout_s, &t0, tick, ctx, &timed_out, &status);
  if (!started) {
    dlx_set_err(err, errlen, "cannot run '%s': %s", argv[0],
            have_errno ? strerror(exec_errno) : "exec failed");
    goto fail;
  }
  if (w < 0) {
    dlx_set_err(err, errlen, "run '%s': waitpid: %s", argv[0], strerror(errno));
    goto fail;
  }
  *exit_status_out = timed_out             ? -1
                     : WIFEXITED(status)   ? WEXITSTATUS(status)
                     : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                           : -1;
  capture_finish(&c);
  *output_out = c.buf;
  if (timed_out) {
    if (timed_out_out) *timed_out_out = 1;
    return dlx_set_err(err, errlen,
                       "'%s' did not finish within %g s: killed it and its process group",
                       argv[0], timeout_s);
  }
  return 0;

fail:
  for (int i = 0; i < 2; ++i) {
    dlx_fork_close(out[i]);
    dlx_fork_close(report[i]);
  }
  if (cand) {
    int n = 0;
    while (cand[n]) ++n;
    dlx_argv_free(cand, n);
  }
  free(c.buf);
  return -1;
}
