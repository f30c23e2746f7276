/* fuzz_addon_args.c - `python -m dlx build-addon` words: the first byte picks the
 * platform, the rest are NUL-separated words. */
#include <string.h>

#include "dlx_addon_args.h"
#include "fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_in in = {data, size};
  dlx_platform platform = (dlx_platform)(fuzz_byte(&in) % 4);
  char *words[64];
  int argc = 0;
  while (argc < 64 && (words[argc] = fuzz_str(&in)) != NULL) ++argc;
  dlx_build_args out;
  char err[256];
  int rc = dlx_build_args_parse(argc, (const char *const *)words, platform, &out, err,
                                sizeof err);
  FUZZ_CHECK(rc == 0 || rc == -1);
  if (rc == 0) {
    FUZZ_CHECK((unsigned)out.backend < DLX_BACKEND_COUNT);
    FUZZ_CHECK(out.backend_given || out.backend == DLX_BACKEND_CPU);
    if (out.backend == DLX_BACKEND_TORCH_NPU) FUZZ_CHECK(platform == DLX_PLATFORM_LINUX);
    if (out.output_dir) { /* points into one of the words, and is not empty */
      int inside = 0;
      for (int i = 0; i < argc; ++i)
        inside |= out.output_dir >= words[i] && out.output_dir <= words[i] + strlen(words[i]);
      FUZZ_CHECK(inside && out.output_dir[0] != '\0');
    }
  } else {
    FUZZ_CHECK(err[0] != '\0');
  }
  for (int i = 0; i < argc; ++i) free(words[i]);
  return 0;
}
