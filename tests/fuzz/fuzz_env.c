/* fuzz_env.c - what dlx takes from the environment: the cache folder variables
 * (DLX_CACHE_DIR, XDG_CACHE_HOME, HOME), the compiler words ($CXX, DLX_CXXFLAGS,
 * DLX_LDFLAGS, shell-split into a command line), DLX_BACKEND, sys.platform and
 * DLX_BUILD_TIMEOUT.
 * Fields are NUL-separated; the first byte picks the output size and facts. */
#include <string.h>

#include "dlx_backend.h"
#include "dlx_cache_dir.h"
#include "dlx_compile_command.h"
#include "fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_in in = {data, size};
  uint8_t ctl = fuzz_byte(&in);
  char *dlx_dir = fuzz_str(&in), *xdg = fuzz_str(&in), *home = fuzz_str(&in),
       *cxx = fuzz_str(&in), *cxxflags = fuzz_str(&in), *ldflags = fuzz_str(&in),
       *forced = fuzz_str(&in), *platform = fuzz_str(&in), *timeout = fuzz_str(&in);
  char err[256];

  size_t outlen = ctl & 1 ? 4096 : 1 + (ctl >> 1); /* roomy, or tight */
  char *out = malloc(outlen);
  if (!out) abort();
  if (dlx_cache_dir_resolve(dlx_dir, xdg, home, out, outlen, err, sizeof err) == 0)
    FUZZ_CHECK(strlen(out) < outlen && out[0] != '\0');
  else
    FUZZ_CHECK(err[0] != '\0');
  free(out);

  char **argv;
  int argc;
  if (dlx_shell_split(cxxflags, &argv, &argc, err, sizeof err) == 0) {
    FUZZ_CHECK(argc >= 0 && argv && argv[argc] == NULL);
    for (int i = 0; i < argc; ++i) FUZZ_CHECK(strlen(argv[i]) <= strlen(cxxflags ? cxxflags : ""));
    dlx_argv_free(argv, argc);
  } else {
    FUZZ_CHECK(err[0] != '\0');
  }

  const char *inc[] = {"/usr/include/torch"}, *libdirs[] = {home ? home : "/usr/lib"};
  dlx_compile_spec spec = {.cxx = cxx, .source = "addon.cc", .output = "addon.so",
                           .include_dirs = inc, .n_include_dirs = 1,
                           .lib_dirs = libdirs, .n_lib_dirs = 1,
                           .extra_cxxflags = cxxflags, .extra_ldflags = ldflags};
  if (dlx_compile_argv(&spec, &argv, &argc, err, sizeof err) == 0) {
    FUZZ_CHECK(argc > 0 && argv[argc] == NULL);
    dlx_argv_free(argv, argc);
  } else {
    FUZZ_CHECK(err[0] != '\0');
  }

  dlx_backend_facts facts = {.platform = dlx_platform_from_name(platform),
                             .cuda_available = ctl >> 1 & 1, .version_cuda_set = ctl >> 2 & 1,
                             .version_hip_set = ctl >> 3 & 1, .npu_namespace = ctl >> 4 & 1,
                             .npu_available = ctl >> 5 & 1, .forced = forced};
  dlx_backend_choice choice;
  if (dlx_backend_select(&facts, &choice) == 0)
    FUZZ_CHECK((unsigned)choice.backend < DLX_BACKEND_COUNT);
  FUZZ_CHECK(memchr(choice.reason, '\0', sizeof choice.reason) != NULL && choice.reason[0]);

  double seconds = -1;
  if (dlx_build_timeout_parse(timeout, &seconds, err, sizeof err) == 0)
    FUZZ_CHECK(seconds > 0 && seconds <= 1e9); /* finite, positive: a usable deadline */
  else
    FUZZ_CHECK(err[0] != '\0');

  free(timeout);
  free(dlx_dir);
  free(xdg);
  free(home);
  free(cxx);
  free(cxxflags);
  free(ldflags);
  free(forced);
  free(platform);
  return 0;
}
