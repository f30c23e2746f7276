/*
 * dlx_discover.h - a kernel library's declared kernels without Python: load it, find its
 * DLX_KERNEL records (as dlx.load does), parse each declaration and derive its torch
 * schema. For dlx_torch_register (the torch operators of a C++ program). Pure C.
 */
#ifndef DLX_DISCOVER_H_
#define DLX_DISCOVER_H_

#include <stddef.h>
#include <stdint.h>

#include "dlx/dlx.h"
#include "dlx_invoke.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One kernel of a library. */
typedef struct dlx_found_kernel {
  dlx_kernel_handle handle; /* fn, plan (NULL: undeclared), name (the record's) */
  char *schema;             /* "name(Tensor x, ...) -> Tensor", or NULL: see why */
  int32_t nresults;         /* declared tensor results */
  char why[192];            /* why there is no schema (undeclared, or torch cannot say it) */
} dlx_found_kernel;

typedef struct dlx_found_library {
  void *dl;               /* the dlopen handle */
  int32_t n;              /* kernels, sorted by name */
  dlx_found_kernel *kernels;
  char sha256[65];        /* of the file dlopen mapped (read once, before it) */
} dlx_found_library;

/* The record exported as `sym` in the library `handle`, or NULL when it is not one (only a
 * data object at least as large as a record is read as one). */
const dlx_kernel_record *dlx_record_of(void *handle, const char *sym);

/* Loads the library at `path` (RTLD_NOW | RTLD_LOCAL) and fills `out`, with the sha256 of
 * its content (a package names its libraries by it). 0, or -1 with the reason in err: an
 * unreadable file, one replaced while it was loaded, not a shared object, a kernel built
 * for another dlx ABI, a malformed declaration. A library without kernels is not an error (n == 0). */
int dlx_discover(const char *path, dlx_found_library *out, char *err, size_t errlen);

/* Frees what dlx_discover made and closes the library (only when no kernel of it is used). */
void dlx_discover_free(dlx_found_library *lib);

#ifdef __cplusplus
}
#endif

#endif /* DLX_DISCOVER_H_ */
