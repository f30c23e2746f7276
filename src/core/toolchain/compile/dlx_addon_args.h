/*
 * dlx_addon_args.h - the arguments of `python -m dlx build-addon`, parsed in C
 * so the rules (one backend option, torch_npu only on Linux) live in one place.
 */
#ifndef DLX_ADDON_ARGS_H_
#define DLX_ADDON_ARGS_H_

#include <stddef.h>

#include "dlx_backend.h"

typedef struct dlx_build_args {
  dlx_backend backend; /* DLX_BACKEND_CPU unless backend_given */
  int backend_given;   /* 1: one of --backend / --build-with-* was given */
  const char *output_dir; /* points into argv; NULL when not given */
} dlx_build_args;

/* argv: the words after "build-addon". Accepts --backend NAME|--backend=NAME
 * (names as dlx_backend_parse), --build-with-cuda, --build-with-rocm,
 * --build-with-torch-npu, --build-with-ascend (alias of torch-npu), and
 * --output-dir DIR|--output-dir=DIR (non-empty, at most once).
 * Two backend options are an error naming both, unless the very same option is
 * repeated with the same value. torch_npu off Linux is an error.
 * 0, or -1 with the reason in err. */
int dlx_build_args_parse(int argc, const char *const *argv, dlx_platform platform,
                         dlx_build_args *out, char *err, size_t errlen);

#endif /* DLX_ADDON_ARGS_H_ */
