/* dlx_addon_args.c - `build-addon` argument parsing. */
#include "dlx_addon_args.h"

#include <stdio.h>
#include <string.h>

static const struct {
  const char *flag;
  dlx_backend backend;
} kBuildWith[] = {
    {"--build-with-cuda", DLX_BACKEND_CUDA},
    {"--build-with-rocm", DLX_BACKEND_ROCM},
    {"--build-with-torch-npu", DLX_BACKEND_TORCH_NPU},
    {"--build-with-ascend", DLX_BACKEND_TORCH_NPU},
};

/* "--opt=VALUE" or "--opt VALUE": the value, or NULL when missing. A following
 * word that looks like an option is not taken as a value, so a forgotten value
 * is reported as missing rather than swallowing the next option. */
static const char *option_value(const char *opt, int argc, const char *const *argv, int *i,
                                int *matched) {
  size_t n = strlen(opt);
  const char *a = argv[*i];
  *matched = 0;
  if (strncmp(a, opt, n) != 0) return NULL;
  if (a[n] == '=') {
    *matched = 1;
    return a + n + 1;
  }
  if (a[n] != '\0') return NULL;
  *matched = 1;
  if (*i + 1 >= argc || strncmp(argv[*i + 1], "--", 2) == 0) return NULL;
  ++*i;
  return argv[*i];
}

int dlx_build_args_parse(int argc, const char *const *argv, dlx_platform platform,
                         dlx_build_args *out, char *err, size_t errlen) {
  out->backend = DLX_BACKEND_CPU;
  out->backend_given = 0;
  out->output_dir = NULL;
  if (err && errlen) err[0] = '\0';

  char first[128] = ""; /* how the first backend option was spelled, for errors */
  for (int i = 0; i < argc; ++i) {
    const char *a = argv[i];
    char spelled[128];
    dlx_backend b;
    int matched = 0;
    const char *v = option_value("--output-dir", argc, argv, &i, &matched);
    if (matched) {
      if (!v || !v[0]) {
        snprintf(err, errlen, "--output-dir needs a folder");
        return -1;
      }
      if (out->output_dir) {
        snprintf(err, errlen, "--output-dir given twice ('%s' and '%s')", out->output_dir, v);
        return -1;
      }
      out->output_dir = v;
      continue;
    }
    v = option_value("--backend", argc, argv, &i, &matched);
    if (matched) {
      if (!v || !v[0]) {
        snprintf(err, errlen, "--backend needs a value: cpu, cuda, rocm or torch_npu");
        return -1;
      }
      if (dlx_backend_parse(v, &b) != 0) {
        snprintf(err, errlen,
                 "--backend '%s' is not a backend; valid: cpu, cuda, rocm, torch_npu "
                 "(aliases of torch_npu: ascend, npu)",
                 v);
        return -1;
      }
      snprintf(spelled, sizeof spelled, "--backend %s", v);
    } else {
      size_t k = 0, nk = sizeof kBuildWith / sizeof kBuildWith[0];
      while (k < nk && strcmp(a, kBuildWith[k].flag) != 0) ++k;
      if (k == nk) {
        if (strncmp(a, "-", 1) == 0)
          snprintf(err, errlen, "unknown option '%s' for build-addon", a);
        else
          snprintf(err, errlen, "unexpected argument '%s' for build-addon", a);
        return -1;
      }
      b = kBuildWith[k].backend;
      snprintf(spelled, sizeof spelled, "%s", a);
    }

    if (b == DLX_BACKEND_TORCH_NPU && platform != DLX_PLATFORM_LINUX) {
      snprintf(err, errlen, "%s: torch_npu is only supported on Linux (this platform is %s)",
               spelled, dlx_platform_name(platform));
      return -1;
    }
    if (out->backend_given) {
      /* Repeating the identical option is harmless; anything else is ambiguous,
       * even two spellings of the same backend. */
      if (strcmp(first, spelled) == 0) continue;
      snprintf(err, errlen, "%s and %s are mutually exclusive", first, spelled);
      return -1;
    }
    out->backend = b;
    out->backend_given = 1;
    snprintf(first, sizeof first, "%s", spelled);
  }
  return 0;
}
