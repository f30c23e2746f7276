/* The C core's pieces that threads share (issue 23), from many threads at once: the build
 * lock (flock on a file each caller opens: threads of one process exclude one another as
 * processes do), unique temp names, and the kernel build driver building one source from
 * several threads (one compile, every thread gets the library). `make tsan` runs this
 * under ThreadSanitizer (clang), which reports any data race in the core's own memory. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "dlx_cache_lock.h"
#include "dlx_kernel_build.h"

#define THREADS 8

static char dir[256];

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/dlx-test-threads-XXXXXX");
  return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  return system(cmd) == 0 ? 0 : -1;
}

/* ---- the lock: a counter in a file, read and rewritten under it ---- */

#define LOCK_ROUNDS 40

static void *lock_worker(void *arg) {
  (void)arg;
  char lock_path[300], count_path[300], err[256];
  snprintf(lock_path, sizeof lock_path, "%s/lock", dir);
  snprintf(count_path, sizeof count_path, "%s/count", dir);
  for (int i = 0; i < LOCK_ROUNDS; ++i) {
    dlx_lock lock;
    if (dlx_lock_acquire(lock_path, &lock, err, sizeof err)) return (void *)"lock";
    long n = 0;
    FILE *f = fopen(count_path, "r");
    if (f) {
      if (fscanf(f, "%ld", &n) != 1) n = -1000000;
      fclose(f);
    }
    usleep(50); /* widen the window a missing exclusion would lose an update in */
    f = fopen(count_path, "w");
    if (!f) return (void *)"fopen";
    fprintf(f, "%ld\n", n + 1);
    fclose(f);
    dlx_lock_release(&lock);
  }
  return NULL;
}

static void lock_excludes_threads(void **state) {
  (void)state;
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; ++i) assert_int_equal(pthread_create(&t[i], NULL, lock_worker, NULL), 0);
  for (int i = 0; i < THREADS; ++i) {
    void *r;
    pthread_join(t[i], &r);
    assert_null(r);
  }
  char count_path[300];
  snprintf(count_path, sizeof count_path, "%s/count", dir);
  FILE *f = fopen(count_path, "r");
  assert_non_null(f);
  long n = 0;
  assert_int_equal(fscanf(f, "%ld", &n), 1);
  fclose(f);
  assert_int_equal(n, THREADS * LOCK_ROUNDS); /* no update lost */
}

/* ---- temp names: unique across threads ---- */

#define NAMES 200
static char names[THREADS][NAMES][320];

static void *name_worker(void *arg) {
  int me = (int)(intptr_t)arg;
  for (int i = 0; i < NAMES; ++i)
    if (dlx_temp_path("/tmp/x/final.so", names[me][i], sizeof names[me][i])) return (void *)"fit";
  return NULL;
}

static int cmp(const void *a, const void *b) { return strcmp(a, b); }

static void temp_paths_unique_across_threads(void **state) {
  (void)state;
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; ++i)
    assert_int_equal(pthread_create(&t[i], NULL, name_worker, (void *)(intptr_t)i), 0);
  for (int i = 0; i < THREADS; ++i) {
    void *r;
    pthread_join(t[i], &r);
    assert_null(r);
  }
  qsort(names, THREADS * NAMES, sizeof names[0][0], cmp);
  char(*flat)[320] = &names[0][0];
  for (int i = 1; i < THREADS * NAMES; ++i) assert_string_not_equal(flat[i - 1], flat[i]);
}

/* ---- the build driver: one source, four threads ---- */

#define BUILDERS 4

static const char source[] =
    "#include <dlx/dlx.h>\n"
    "DLX_KERNEL(twice, \"x: int -> int\") {\n"
    "  int64_t x;\n"
    "  if (dlx_arg_int(call, 0, &x)) return -1;\n"
    "  return dlx_return_int(call, 2 * x);\n"
    "}\n";

typedef struct {
  dlx_kernel_build_result res;
  int rc;
  char err[512];
} build_out;

static void *build_worker(void *arg) {
  build_out *o = arg;
  dlx_kernel_build_spec s;
  memset(&s, 0, sizeof s);
  char cache[300];
  snprintf(cache, sizeof cache, "%s/cache", dir);
  s.cache_dir = cache;
  s.name = "threads";
  s.inline_text = source;
  s.inline_len = sizeof source - 1;
  s.lang_given = 1;
  s.lang = DLX_LANG_C;
  s.path_env = getenv("PATH");
  s.dlx_include_dir = DLX_SOURCE_DIR "/include";
  s.timeout_s = 300;
  o->rc = dlx_kernel_build(&s, &o->res, o->err, sizeof o->err);
  return NULL;
}

static void one_build_for_threads_building_one_source(void **state) {
  (void)state;
  pthread_t t[BUILDERS];
  static build_out out[BUILDERS];
  for (int i = 0; i < BUILDERS; ++i)
    assert_int_equal(pthread_create(&t[i], NULL, build_worker, &out[i]), 0);
  for (int i = 0; i < BUILDERS; ++i) pthread_join(t[i], NULL);
  int built = 0;
  for (int i = 0; i < BUILDERS; ++i) {
    if (out[i].rc) fail_msg("builder %d: %s", i, out[i].err);
    assert_true(out[i].res.fd >= 0);
    assert_string_equal(out[i].res.path, out[0].res.path);
    built += out[i].res.built;
    dlx_kernel_build_result_free(&out[i].res);
  }
  assert_int_equal(built, 1); /* the others waited for it and loaded what it made */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(lock_excludes_threads),
      cmocka_unit_test(temp_paths_unique_across_threads),
      cmocka_unit_test(one_build_for_threads_building_one_source),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
