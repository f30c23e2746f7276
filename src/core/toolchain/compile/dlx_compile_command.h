/*
 * dlx_compile_command.h - building the torch addon: the compiler command line (pure, so
 * it is tested word by word) and running it with its output captured (so a
 * failed build can show the compiler's own words).
 */
#ifndef DLX_COMPILE_COMMAND_H_
#define DLX_COMPILE_COMMAND_H_

#include <stddef.h>

/* POSIX-shell word splitting of `s` (for $CXX, DLX_CXXFLAGS, DLX_LDFLAGS): blanks
 * separate words; '...' is literal; "..." is literal except \" \\ \$ \` and
 * backslash-newline; an unquoted backslash escapes the next character. No
 * expansion of $VAR, globs or ~. NULL or blank gives zero words. *argv_out is
 * NULL-terminated (usable for exec). 0, or -1 with err (unterminated quote,
 * trailing backslash, no memory). Free with dlx_argv_free. */
int dlx_shell_split(const char *s, char ***argv_out, int *argc_out, char *err, size_t errlen);
void dlx_argv_free(char **argv, int argc);

/* A growable, NULL-terminated argv (start from {0}; free v with dlx_argv_free(v, n)).
 * push: a copy of s[0..len); push2: a+b as one word; split: the shell-split words of s
 * (`what` names it in err; *count, may be NULL, gets how many); finish: an empty list
 * still gets its NULL-terminated array. 0, or -1 (out of memory, or a bad split). */
typedef struct dlx_words {
  char **v;
  int n, cap;
} dlx_words;
int dlx_words_push(dlx_words *w, const char *s, size_t len);
int dlx_words_push2(dlx_words *w, const char *a, const char *b);
int dlx_words_split(dlx_words *w, const char *s, const char *what, char *err, size_t errlen,
                    int *count);
int dlx_words_finish(dlx_words *w);

typedef struct dlx_compile_spec {
  const char *cxx;    /* compiler command, shell-split: "g++", "ccache c++", $CXX */
  const char *source; /* the .cc */
  const char *const *more_sources; /* further .cc files linked into the same library */
  size_t n_more_sources;
  const char *output; /* the .so to write */
  const char *const *include_dirs;
  size_t n_include_dirs;
  const char *const *defines; /* "NAME" or "NAME=VALUE", each becomes -D... */
  size_t n_defines;
  const char *const *lib_dirs; /* each becomes -L and -Wl,-rpath, */
  size_t n_lib_dirs;
  const char *const *libs; /* each becomes -l... */
  size_t n_libs;
  const char *extra_cxxflags; /* DLX_CXXFLAGS, shell-split, NULL ok */
  const char *extra_ldflags;  /* DLX_LDFLAGS, shell-split, NULL ok */
  double timeout_s; /* how long the build (and a wait for another's) may take; 0: forever */
} dlx_compile_spec;

/* The full argv, NULL-terminated: cxx words, -std=c++17 -O2 -fPIC -shared
 * -fvisibility=hidden, -I..., -D..., source, more sources, -o output, -L... -Wl,-rpath,...,
 * -l..., extra cxxflags, extra ldflags (last, so they can override). 0, or -1
 * with err (no compiler, no source/output, a lib dir holding ',' which -Wl,
 * would split, a bad extra flag string). Free with dlx_argv_free. */
int dlx_compile_argv(const dlx_compile_spec *s, char ***argv_out, int *argc_out, char *err,
                     size_t errlen);

/* Runs argv[0] (searched in PATH like execvp, but a file without "#!" is not
 * handed to /bin/sh) with stdin from /dev/null, no other inherited descriptors
 * beyond 0-2 where the libc offers close_range, default SIGPIPE, and
 * stdout+stderr captured together into a malloc'd NUL-terminated string
 * (*output_out, caller frees). Output beyond ~64 KiB keeps the tail, after a
 * "[... N bytes dropped ...]" line, since a compiler's last words are the
 * useful ones. *exit_status_out: the exit code, or 128+signal when killed.
 * Returns 0 if it ran (whatever its status), -1 if it could not be started
 * (err names the program and why, e.g. not found). No deadline. */
int dlx_run_capture(char *const *argv, char **output_out, int *exit_status_out, char *err,
                    size_t errlen);

/* dlx_run_capture with a deadline. The program runs in its own process group;
 * when it has not exited timeout_s seconds (> 0; <= 0: no deadline) after it
 * started, the whole group is killed (SIGKILL), *timed_out_out (may be NULL)
 * is 1, *exit_status_out -1, *output_out holds what it wrote until then, and -1
 * is returned with err saying it was killed. */
int dlx_run_capture_timeout(char *const *argv, double timeout_s, char **output_out,
                            int *exit_status_out, int *timed_out_out, char *err,
                            size_t errlen);

/* dlx_run_capture_timeout that also calls tick(ctx) about four times a second while
 * the program runs (for a progress line; tick may be NULL). */
int dlx_run_capture_ticking(char *const *argv, double timeout_s, void (*tick)(void *ctx),
                            void *ctx, char **output_out, int *exit_status_out,
                            int *timed_out_out, char *err, size_t errlen);

/* DLX_BUILD_TIMEOUT: seconds every build dlx runs (and every wait for another
 * process's build) may take. NULL or "" gives the default. 0, or -1 with err
 * for anything but a finite positive number. */
#define DLX_BUILD_TIMEOUT_DEFAULT 600.0
int dlx_build_timeout_parse(const char *value, double *seconds_out, char *err, size_t errlen);

#endif /* DLX_COMPILE_COMMAND_H_ */
