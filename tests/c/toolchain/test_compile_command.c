/* test_compile_command.c - shell splitting, the compiler command line, and running a
 * program with its output captured. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "dlx_compile_command.h"

static char err[1024];

/* Splits `s` and compares with the NULL-terminated `want`. */
static void expect_split(const char *s, const char *const *want) {
  char **v = NULL;
  int n = -1;
  err[0] = '\0';
  if (dlx_shell_split(s, &v, &n, err, sizeof err) != 0) fail_msg("split '%s': %s", s, err);
  int nw = 0;
  while (want[nw]) ++nw;
  if (n != nw) fail_msg("split '%s': %d words, expected %d", s, n, nw);
  for (int i = 0; i < n; ++i) assert_string_equal(v[i], want[i]);
  assert_null(v[n]); /* exec-ready */
  dlx_argv_free(v, n);
}

static void expect_split_error(const char *s, const char *why) {
  char **v = (char **)1;
  int n = 5;
  assert_int_equal(dlx_shell_split(s, &v, &n, err, sizeof err), -1);
  assert_null(v);
  assert_int_equal(n, 0);
  if (!strstr(err, why)) fail_msg("split '%s': error '%s' lacks '%s'", s, err, why);
}

#define W(...) ((const char *const[]){__VA_ARGS__, NULL})
#define NONE ((const char *const[]){NULL})

static void test_split_plain(void **state) {
  (void)state;
  expect_split("g++", W("g++"));
  expect_split("g++ -O2", W("g++", "-O2"));
  expect_split("  ccache \t g++\n-m64  ", W("ccache", "g++", "-m64"));
  expect_split("", NONE);
  expect_split(" \t\n ", NONE);
  expect_split(NULL, NONE);
  /* no expansion: these are the user's literal words */
  expect_split("$HOME ~/x *.cc", W("$HOME", "~/x", "*.cc"));
}

static void test_split_quotes(void **state) {
  (void)state;
  expect_split("'a b' c", W("a b", "c"));
  expect_split("'a \"b\" \\n $x'", W("a \"b\" \\n $x")); /* all literal in '' */
  expect_split("\"a b\" c", W("a b", "c"));
  /* in "": \" \\ \$ \` are escapes, other backslashes stay */
  expect_split("\"q\\\"q \\\\ \\$v \\`c\\` \\n\"", W("q\"q \\ $v `c` \\n"));
  expect_split("\"it's\"", W("it's"));
  expect_split("'say \"hi\"'", W("say \"hi\""));
  /* adjacent pieces form one word; empty quotes are an empty word */
  expect_split("x'y'\"z\"w", W("xyzw"));
  expect_split("a '' b", W("a", "", "b"));
  expect_split("\"\"", W(""));
  expect_split("-DNAME=\"\\\"v a\\\"\"", W("-DNAME=\"v a\""));
  /* backslash-newline joins lines inside "" */
  expect_split("\"a\\\nb\"", W("ab"));
}

static void test_split_backslash(void **state) {
  (void)state;
  expect_split("a\\ b", W("a b"));
  expect_split("\\'x\\'", W("'x'"));
  expect_split("\\\"", W("\""));
  expect_split("\\\\", W("\\"));
  expect_split("a\\\nb", W("ab"));         /* line continuation */
  expect_split("a \\\n b", W("a", "b"));   /* ...which makes no word of its own */
  expect_split("-I/x\\ y/inc", W("-I/x y/inc"));
}

static void test_split_errors(void **state) {
  (void)state;
  expect_split_error("'open", "unterminated single quote");
  expect_split_error("a \"open", "unterminated double quote");
  expect_split_error("\"a\\\"", "unterminated double quote");
  expect_split_error("x\\", "trailing backslash");
  expect_split_error("ok 'fine' \"then 'broken", "unterminated double quote");
}

static void expect_argv(char **v, int n, const char *const *want) {
  int nw = 0;
  while (want[nw]) ++nw;
  for (int i = 0; i < n && i < nw; ++i)
    if (strcmp(v[i], want[i]) != 0) fail_msg("argv[%d] is '%s', expected '%s'", i, v[i], want[i]);
  assert_int_equal(n, nw);
  assert_null(v[n]);
}

static void test_compile_argv(void **state) {
  (void)state;
  const char *inc[] = {"/py/include", "/torch/include"};
  const char *defs[] = {"DLX_BACKEND_CUDA", "TORCH_API_INCLUDE_EXTENSION_H=1"};
  const char *ldirs[] = {"/torch/lib"};
  const char *libs[] = {"torch", "c10"};
  dlx_compile_spec s = {
      .cxx = "ccache g++",
      .source = "/src/addon.cc",
      .output = "/cache/lib.so.tmp.1.0",
      .include_dirs = inc,
      .n_include_dirs = 2,
      .defines = defs,
      .n_defines = 2,
      .lib_dirs = ldirs,
      .n_lib_dirs = 1,
      .libs = libs,
      .n_libs = 2,
      .extra_cxxflags = "-O3 -DX='a b'",
      .extra_ldflags = "-Wl,--as-needed",
  };
  char **v;
  int n;
  assert_int_equal(dlx_compile_argv(&s, &v, &n, err, sizeof err), 0);
  expect_argv(v, n,
              W("ccache", "g++", "-std=c++17", "-O2", "-fPIC", "-shared", "-fvisibility=hidden",
                "-I/py/include", "-I/torch/include", "-DDLX_BACKEND_CUDA",
                "-DTORCH_API_INCLUDE_EXTENSION_H=1", "/src/addon.cc", "-o",
                "/cache/lib.so.tmp.1.0", "-L/torch/lib", "-Wl,-rpath,/torch/lib", "-ltorch",
                "-lc10", "-O3", "-DX=a b", "-Wl,--as-needed"));
  dlx_argv_free(v, n);

  /* the minimum: compiler, source, output */
  dlx_compile_spec m = {.cxx = "c++", .source = "a.cc", .output = "a.so"};
  assert_int_equal(dlx_compile_argv(&m, &v, &n, err, sizeof err), 0);
  expect_argv(v, n,
              W("c++", "-std=c++17", "-O2", "-fPIC", "-shared", "-fvisibility=hidden", "a.cc",
                "-o", "a.so"));
  dlx_argv_free(v, n);

  /* more sources follow the first, before the output */
  const char *more[] = {"b.cc", "/my dir/c.cc"};
  m.more_sources = more;
  m.n_more_sources = 2;
  assert_int_equal(dlx_compile_argv(&m, &v, &n, err, sizeof err), 0);
  expect_argv(v, n,
              W("c++", "-std=c++17", "-O2", "-fPIC", "-shared", "-fvisibility=hidden", "a.cc",
                "b.cc", "/my dir/c.cc", "-o", "a.so"));
  dlx_argv_free(v, n);
  const char *empty[] = {""};
  m.more_sources = empty;
  m.n_more_sources = 1;
  assert_int_equal(dlx_compile_argv(&m, &v, &n, err, sizeof err), -1);
  assert_non_null(strstr(err, "empty source"));
  m.more_sources = NULL;
  m.n_more_sources = 0;

  /* paths with spaces stay single words */
  const char *sp[] = {"/my dir/inc"};
  m.include_dirs = sp;
  m.n_include_dirs = 1;
  m.source = "/my dir/a.cc";
  assert_int_equal(dlx_compile_argv(&m, &v, &n, err, sizeof err), 0);
  assert_string_equal(v[6], "-I/my dir/inc");
  assert_string_equal(v[7], "/my dir/a.cc");
  dlx_argv_free(v, n);
}

static void test_compile_argv_errors(void **state) {
  (void)state;
  char **v = NULL;
  int n = 0;
  dlx_compile_spec s = {.cxx = "", .source = "a.cc", .output = "a.so"};
  assert_int_equal(dlx_compile_argv(&s, &v, &n, err, sizeof err), -1);
  assert_non_null(strstr(err, "no C++ compiler"));
  s.cxx = NULL;
  assert_int_equal(dlx_compile_argv(&s, &v, &n, err, sizeof err), -1);
  s.cxx = "  ";
  assert_int_equal(dlx_compile_argv(&s, &v, &n, err, sizeof err), -1);
  s.cxx = "'g++";
  assert_int_equal(dlx_compile_argv(&s, &v, &n, err, sizeof err), -1);
  assert_non_null(strstr(err, "CXX"));
  s.cxx = "g++";
  s.extra_cxxflags = "-DX=\"oops";
  assert_int_equal(dlx_compile_argv(&s, &v, &n, err, sizeof err), -1);
  assert_non_null(strstr(err, "DLX_CXXFLAGS"));
  s.extra_cxxflags = NULL;
  s.extra_ldflags = "'";
  assert_int_equal(dlx_compile_argv(&s, &v, &n, err, sizeof err), -1);
  assert_non_null(strstr(err, "DLX_LDFLAGS"));
  s.extra_ldflags = NULL;
  const char *comma[] = {"/a,b/lib"};
  s.lib_dirs = comma;
  s.n_lib_dirs = 1;
  assert_int_equal(dlx_compile_argv(&s, &v, &n, err, sizeof err), -1);
  assert_non_null(strstr(err, "/a,b/lib"));
  s.n_lib_dirs = 0;
  s.output = NULL;
  assert_int_equal(dlx_compile_argv(&s, &v, &n, err, sizeof err), -1);
  assert_null(v);
}

static void test_run_capture(void **state) {
  (void)state;
  char *argv[] = {"/bin/sh", "-c", "echo out; echo err >&2; exit 3", NULL};
  char *out = NULL;
  int status = -1;
  assert_int_equal(dlx_run_capture(argv, &out, &status, err, sizeof err), 0);
  assert_int_equal(status, 3);
  assert_non_null(out);
  assert_non_null(strstr(out, "out\n"));
  assert_non_null(strstr(out, "err\n"));
  assert_int_equal(strlen(out), 8);
  free(out);

  /* found through PATH; the child's stdin is /dev/null, not ours: our stdin
   * holds data here, which cat would echo if it inherited it */
  int saved = dup(0), in[2];
  assert_true(saved >= 0);
  assert_int_equal(pipe(in), 0);
  assert_int_equal(write(in[1], "LEAK", 4), 4);
  close(in[1]);
  assert_int_equal(dup2(in[0], 0), 0);
  close(in[0]);
  char *cat[] = {"cat", NULL};
  int rc = dlx_run_capture(cat, &out, &status, err, sizeof err);
  dup2(saved, 0);
  close(saved);
  assert_int_equal(rc, 0);
  assert_int_equal(status, 0);
  assert_string_equal(out, "");
  free(out);

  /* killed by a signal: 128 + signal, as a shell reports it */
  char *killed[] = {"/bin/sh", "-c", "kill -9 $$", NULL};
  assert_int_equal(dlx_run_capture(killed, &out, &status, err, sizeof err), 0);
  assert_int_equal(status, 128 + 9);
  free(out);
}

static void test_run_capture_keeps_tail(void **state) {
  (void)state;
  /* 200000 bytes of 'x' then a final marker: only ~64 KiB come back, the end */
  char *argv[] = {"/bin/sh", "-c",
                  "head -c 200000 /dev/zero | tr '\\0' x; echo; echo LAST-LINE >&2", NULL};
  char *out = NULL;
  int status = -1;
  assert_int_equal(dlx_run_capture(argv, &out, &status, err, sizeof err), 0);
  assert_int_equal(status, 0);
  size_t len = strlen(out);
  assert_true(len >= 64 * 1024 && len < 64 * 1024 + 64);
  assert_non_null(strstr(out, "bytes dropped"));
  assert_int_equal(strncmp(out, "[... ", 5), 0);
  const char *tail = "x\nLAST-LINE\n";
  assert_string_equal(out + len - strlen(tail), tail);
  /* dropped + kept == produced (200000 x + newline + "LAST-LINE\n") */
  unsigned long long dropped = 0;
  assert_int_equal(sscanf(out, "[... %llu bytes dropped", &dropped), 1);
  const char *nl = strchr(out, '\n');
  assert_int_equal(dropped + (len - (size_t)(nl + 1 - out)), 200000 + 1 + 10);
  free(out);
}

static void test_run_capture_closes_other_fds(void **state) {
  (void)state;
#ifdef CLOSE_RANGE_CLOEXEC
  int p[2];
  assert_int_equal(pipe(p), 0); /* inheritable on purpose */
  int probe = dup(p[0]);
  if (close_range((unsigned)probe, (unsigned)probe, CLOSE_RANGE_CLOEXEC) != 0) {
    close(probe), close(p[0]), close(p[1]);
    skip(); /* kernel without close_range: the guarantee is not offered */
  }
  close(probe);
  char cmd[64];
  snprintf(cmd, sizeof cmd, "echo leaked >&%d && echo open || echo closed", p[1]);
  char *argv[] = {"/bin/sh", "-c", cmd, NULL};
  char *out = NULL;
  int status = -1;
  assert_int_equal(dlx_run_capture(argv, &out, &status, err, sizeof err), 0);
  close(p[0]), close(p[1]);
  assert_non_null(strstr(out, "closed"));
  assert_null(strstr(out, "open"));
  free(out);
#else
  skip();
#endif
}

static void test_run_capture_missing_program(void **state) {
  (void)state;
  char *argv[] = {"dlx-no-such-compiler-xyz", "-v", NULL};
  char *out = (char *)1;
  int status = 0;
  assert_int_equal(dlx_run_capture(argv, &out, &status, err, sizeof err), -1);
  assert_null(out);
  assert_non_null(strstr(err, "dlx-no-such-compiler-xyz"));
  assert_non_null(strstr(err, "No such file"));
  char *path[] = {"/nonexistent/dir/g++", NULL};
  assert_int_equal(dlx_run_capture(path, &out, &status, err, sizeof err), -1);
  assert_non_null(strstr(err, "/nonexistent/dir/g++"));
  /* a file without execute permission */
  char plain[] = "/tmp/dlx-test-noexec-XXXXXX";
  int fd = mkstemp(plain);
  assert_true(fd >= 0);
  close(fd);
  char *notexec[] = {plain, NULL};
  int rc = dlx_run_capture(notexec, &out, &status, err, sizeof err);
  unlink(plain);
  assert_int_equal(rc, -1);
  assert_non_null(strstr(err, plain));
  assert_non_null(strstr(err, "Permission denied"));
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Gone, or a zombie nobody reaped yet: either way no longer running. */
static int process_gone(long pid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%ld/stat", pid);
  FILE *f = fopen(path, "r");
  if (!f) return 1;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *paren = strrchr(buf, ')');
  return paren && (paren[2] == 'Z' || paren[2] == 'X');
}

static void test_run_capture_timeout_kills_the_group(void **state) {
  (void)state;
  /* a "compiler" that starts a long child of its own and waits for it */
  char *argv[] = {"/bin/sh", "-c", "sleep 300 & echo child=$!; echo started; wait", NULL};
  char *out = NULL;
  int status = 0, timed_out = 0;
  double t0 = now_s();
  int rc = dlx_run_capture_timeout(argv, 1.0, &out, &status, &timed_out, err, sizeof err);
  double took = now_s() - t0;
  assert_int_equal(rc, -1);
  assert_int_equal(timed_out, 1);
  assert_int_equal(status, -1);
  assert_true(took >= 0.9 && took < 20);
  assert_non_null(strstr(err, "/bin/sh"));
  assert_non_null(strstr(err, "1 s"));
  assert_non_null(strstr(err, "process group"));
  assert_non_null(out); /* what it said before is kept */
  assert_non_null(strstr(out, "started"));
  long child = 0;
  assert_int_equal(sscanf(strstr(out, "child="), "child=%ld", &child), 1);
  free(out);
  /* the grandchild was in the group: killed too (allow the kernel a moment) */
  int gone = 0;
  for (int i = 0; i < 200 && !(gone = process_gone(child)); ++i) usleep(10000);
  if (!gone) kill((pid_t)child, SIGKILL);
  assert_true(gone);
}

static void test_run_capture_timeout_after_output_closed(void **state) {
  (void)state;
  /* closes its output at once, then keeps running: the deadline still holds */
  char *argv[] = {"/bin/sh", "-c", "exec >/dev/null 2>&1; sleep 300", NULL};
  char *out = NULL;
  int status = 0, timed_out = 0;
  double t0 = now_s();
  assert_int_equal(dlx_run_capture_timeout(argv, 0.5, &out, &status, &timed_out, err, sizeof err),
                   -1);
  assert_true(now_s() - t0 < 20);
  assert_int_equal(timed_out, 1);
  free(out);
  /* in time: a normal run, status and output as without a deadline */
  char *quick[] = {"/bin/sh", "-c", "echo fine; exit 5", NULL};
  assert_int_equal(dlx_run_capture_timeout(quick, 30, &out, &status, &timed_out, err, sizeof err),
                   0);
  assert_int_equal(timed_out, 0);
  assert_int_equal(status, 5);
  assert_string_equal(out, "fine\n");
  free(out);
}

static void test_build_timeout_parse(void **state) {
  (void)state;
  double t = 0;
  assert_int_equal(dlx_build_timeout_parse(NULL, &t, err, sizeof err), 0);
  assert_true(t == 600.0);
  assert_int_equal(dlx_build_timeout_parse("", &t, err, sizeof err), 0);
  assert_true(t == 600.0);
  assert_int_equal(dlx_build_timeout_parse("2", &t, err, sizeof err), 0);
  assert_true(t == 2.0);
  assert_int_equal(dlx_build_timeout_parse("0.5 ", &t, err, sizeof err), 0);
  assert_true(t == 0.5);
  const char *bad[] = {"0", "-3", "abc", "10s", "nan", "inf", "1e99"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    err[0] = '\0';
    assert_int_equal(dlx_build_timeout_parse(bad[i], &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "DLX_BUILD_TIMEOUT"));
    assert_non_null(strstr(err, bad[i]));
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_split_plain),
      cmocka_unit_test(test_split_quotes),
      cmocka_unit_test(test_split_backslash),
      cmocka_unit_test(test_split_errors),
      cmocka_unit_test(test_compile_argv),
      cmocka_unit_test(test_compile_argv_errors),
      cmocka_unit_test(test_run_capture),
      cmocka_unit_test(test_run_capture_keeps_tail),
      cmocka_unit_test(test_run_capture_closes_other_fds),
      cmocka_unit_test(test_run_capture_missing_program),
      cmocka_unit_test(test_run_capture_timeout_kills_the_group),
      cmocka_unit_test(test_run_capture_timeout_after_output_closed),
      cmocka_unit_test(test_build_timeout_parse),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
