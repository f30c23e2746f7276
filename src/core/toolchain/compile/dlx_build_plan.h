/*
 * dlx_build_plan.h - the decisions of dlx.build (kernels from C, C++ or CUDA sources):
 * which language a file is, which compiler builds it, the exact command lines, the CUDA
 * architecture, and the cache key and file names. Pure functions over plain values; the
 * facts (environment, files, compiler versions) are gathered by dlx_kernel_build.c.
 */
#ifndef DLX_BUILD_PLAN_H_
#define DLX_BUILD_PLAN_H_

#include <stddef.h>
#include <stdint.h>

typedef enum dlx_lang { DLX_LANG_C = 0, DLX_LANG_CXX = 1, DLX_LANG_CUDA = 2 } dlx_lang;
#define DLX_LANG_COUNT 3

/* From the file name: .c -> C; .cc .cpp .cxx .c++ .C -> C++; .cu -> CUDA. 0, or -1
 * with err naming the file and the extensions dlx knows. */
int dlx_lang_of_path(const char *path, dlx_lang *out, char *err, size_t errlen);
/* "c"; "c++" "cxx" "cpp" "cc"; "cuda" "cu" (case-insensitive). 0, or -1 with err. */
int dlx_lang_parse(const char *name, dlx_lang *out, char *err, size_t errlen);
/* "c", "c++", "cuda"; the file extension dlx writes inline sources with; the compiler's
 * role ("C compiler"); the Debian package that provides it. */
const char *dlx_lang_name(dlx_lang lang);
const char *dlx_lang_ext(dlx_lang lang);
const char *dlx_lang_role(dlx_lang lang);
const char *dlx_lang_package(dlx_lang lang);

/* The library is linked by nvcc when any source is CUDA (it adds the CUDA runtime), else
 * by the C++ compiler when any source is C++ (it adds the C++ runtime), else by the C one. */
dlx_lang dlx_link_lang(const dlx_lang *langs, size_t n);

typedef struct dlx_compiler_env {
  const char *cc;        /* $CC (a command, shell-split later); NULL or blank: "cc" */
  const char *cxx;       /* $CXX; NULL or blank: "c++" */
  const char *cuda_home; /* $CUDA_HOME; NULL or empty: not tried */
} dlx_compiler_env;

/* The commands to try for `lang`, best first, into cand[i] (each < 4096 bytes): C and
 * C++ one ($CC / cc, $CXX / c++); CUDA up to three: $CUDA_HOME/bin/nvcc,
 * /usr/local/cuda/bin/nvcc, nvcc (searched in PATH). Returns how many. */
int dlx_compiler_candidates(dlx_lang lang, const dlx_compiler_env *env, char cand[3][4096]);

/* The CUDA architecture: `asked` ("sm_80", "80", "8.0", "compute_80"; NULL or "" for the
 * default), else `visible` (major*10+minor of the visible GPU; 0 when none could be
 * asked, `visible_from` says who answered), else DLX_CUDA_DEFAULT_ARCH with PTX, which
 * the driver compiles for newer GPUs. flag: one nvcc word (-gencode=...); why: one
 * sentence for verbose output. 0, or -1 with err for an unreadable `asked`. */
#define DLX_CUDA_DEFAULT_ARCH 75
int dlx_cuda_arch(const char *asked, int visible, const char *visible_from, char *flag,
                  size_t flaglen, char *why, size_t whylen, char *err, size_t errlen);

typedef struct dlx_strs {
  const char *const *v;
  size_t n;
} dlx_strs;

/* One source's compile step. */
typedef struct dlx_unit_spec {
  dlx_lang lang;
  const char *compiler; /* the command, shell-split: "cc", "ccache gcc", a resolved path */
  const char *source, *object, *depfile;
  dlx_strs include_dirs; /* each -I, in order (dlx's own include folder first) */
  dlx_strs cflags;       /* words, after dlx's own flags so they can override them */
  const char *cuda_arch_flag; /* CUDA only: dlx_cuda_arch's flag */
} dlx_unit_spec;

/* C / C++: compiler -c -O2 -fPIC -fvisibility=hidden -I... cflags -MD -MF depfile
 * source -o object. CUDA: nvcc -c -O2 -Xcompiler -fPIC -Xcompiler -fvisibility=hidden
 * arch -I... cflags -MD -MF depfile source -o object. The dependency file lists every
 * header the compile read, for the cache key. Free with dlx_argv_free. 0, or -1. */
int dlx_unit_argv(const dlx_unit_spec *s, char ***argv_out, int *argc_out, char *err,
                  size_t errlen);

typedef struct dlx_link_spec {
  const char *linker; /* the command for dlx_link_lang's language */
  const char *output;
  dlx_strs objects, ldflags, libraries; /* libraries: each -lNAME */
} dlx_link_spec;

/* linker -shared -o output objects... ldflags... -lNAME... 0, or -1. */
int dlx_link_argv(const dlx_link_spec *s, char ***argv_out, int *argc_out, char *err,
                  size_t errlen);

/* The argv as one line a shell would read back (words quoted where needed), for error
 * messages and verbose output: malloc'd, NULL when out of memory. */
char *dlx_argv_join(char *const *argv);

/* Everything that shapes the binary before its headers are known. */
typedef struct dlx_build_facts {
  const char *name;
  uint32_t abi_version;        /* DLX_ABI_VERSION of the kernel header */
  size_t n_units;
  const dlx_lang *langs;       /* per source */
  const char *const *sources;  /* absolute paths, per source */
  const char *const *source_digests; /* dlx_digest_hex of each source's bytes */
  const char *const *tools;    /* per language (DLX_LANG_COUNT): resolved path, NULL unused */
  const char *const *commands; /* per language: the command as configured, NULL unused */
  dlx_strs include_dirs, cflags, ldflags, libraries;
  const char *cuda_arch_flag; /* NULL without CUDA */
} dlx_build_facts;

/* The first key: a digest over every fact above (fields length-prefixed, so no two
 * different fact sets read the same). 0, or -1 when a field is missing. */
int dlx_build_key1(const dlx_build_facts *f, char out[65]);

/* The final key: key1, each used tool's version digest (per language, NULL unused), and
 * every header the compile read as (path, digest) pairs in the compiler's order. */
int dlx_build_key2(const char *key1, const char *const *tool_versions, size_t n_deps,
                   const char *const *dep_paths, const char *const *dep_digests, char out[65]);

/* A library name is [A-Za-z0-9_.-]{1,64}, not starting with '.' or '-'. 1 / 0. */
int dlx_build_name_ok(const char *name);

/* The cache's file names: "<name>-<20 hex of key1>.build" (what it was built from),
 * ".lock" (the build lock), "lib<name>-<20 hex of key2>.so" (the library), and an inline
 * source "src-<name>-<20 hex of digest>.<ext>". 0, or -1 (bad name, too long). */
int dlx_build_manifest_name(const char *name, const char *key1, char *out, size_t outlen);
int dlx_build_lock_name(const char *name, const char *key1, char *out, size_t outlen);
int dlx_build_lib_name(const char *name, const char *key2, char *out, size_t outlen);
int dlx_build_inline_name(const char *name, dlx_lang lang, const char *digest, char *out,
                          size_t outlen);

/* The compiler's first errors, for a one-screen message: up to max_lines lines holding
 * "error" or "undefined reference" (gcc, clang, nvcc, ld); when none, the first
 * max_lines lines. Whole lines only. Into out[outlen], NUL-terminated,
 * each line ending in '\n'. Returns the number of lines copied. */
int dlx_first_errors(const char *output, int max_lines, char *out, size_t outlen);

#endif /* DLX_BUILD_PLAN_H_ */
