/*
 * dlx_invoke.h - run a kernel whose arguments are already converted (DLTensors and
 * scalars), with a runtime that needs no interpreter: for callers on threads without the
 * GIL (XLA's executor threads, torch's dispatcher). Pure C, no Python, no heap.
 *
 * The tensors are checked against the plan (dtypes, ranks, size symbols, devices, contig,
 * mut) before the kernel runs, so dlx_size works as in an eager call. Results are either
 * preallocated by the caller (XLA: out[i] already shaped; the kernel's i-th
 * dlx_return_new_tensor must ask for exactly that and gets it) or made by `allocate`
 * (torch: at::empty on the right device). Scalar results (dlx_return_int/float) are
 * refused: a compiled caller has nowhere to put them.
 */
#ifndef DLX_INVOKE_H_
#define DLX_INVOKE_H_

#include <stdint.h>

#include "dlx/dlx.h"
#include "dlx_sig.h"

typedef int (*dlx_invoke_alloc_fn)(void *ctx, int32_t index, DLDevice dev, int32_t ndim,
                                   const int64_t *shape, DLDataType dtype, DLTensor **out);

typedef struct dlx_invoke {
  dlx_kernel_fn fn;
  const dlx_sig *plan;  /* NULL: an undeclared kernel (no checks, results up to nout) */
  const char *name;
  dlx_arg *args;        /* declared order, defaults already filled */
  int32_t nargs;
  DLDevice device;      /* the call's device and the caller's stream on it (NULL on CPU) */
  void *stream;
  DLTensor **out;       /* nout preallocated results, or NULL */
  int32_t nout;
  dlx_invoke_alloc_fn allocate; /* used when out is NULL */
  void *allocate_ctx;
  int32_t produced;     /* results the kernel returned */
  char error_kind[64];  /* set when dlx_invoke_run returns -1: a Python exception class */
  char error[1024];     /* and the message, "k(): ..." */
} dlx_invoke;

/* 0, or -1 with error_kind/error set. */
int dlx_invoke_run(dlx_invoke *inv);

/* ---- what _core hands to glue libraries (capsules) ---------------------------------- */

#define DLX_INVOKE_API_VERSION 1u
#define DLX_INVOKE_API_CAPSULE "dlx.invoke_api"
#define DLX_KERNEL_HANDLE_CAPSULE "dlx.kernel_handle"

/* A kernel as a glue library sees it; valid while the capsule that carried it lives. */
typedef struct dlx_kernel_handle {
  dlx_kernel_fn fn;
  const dlx_sig *plan; /* NULL: undeclared */
  const char *name;
} dlx_kernel_handle;

/* dlx._core._invoke_api(): versioned; a later version appends fields (check `size`). */
typedef struct dlx_invoke_api {
  uint32_t version; /* DLX_INVOKE_API_VERSION */
  uint32_t size;    /* sizeof(dlx_invoke_api) */
  int (*run)(dlx_invoke *inv);
} dlx_invoke_api;

extern const dlx_invoke_api dlx_invoke_api_v1;

#endif /* DLX_INVOKE_H_ */
