/*
 * dlx_backend.h - which backend the torch addon is built for, and which backend
 * a DLPack device type belongs to. Facts come from torch at the edge; the
 * decisions here are pure so every branch is unit-tested without torch.
 */
#ifndef DLX_BACKEND_H_
#define DLX_BACKEND_H_

#include <stddef.h>
#include <stdint.h>

#include "dlx/dlpack.h"

typedef enum {
  DLX_BACKEND_CPU = 0,
  DLX_BACKEND_CUDA,
  DLX_BACKEND_ROCM,
  DLX_BACKEND_TORCH_NPU,
  DLX_BACKEND_COUNT
} dlx_backend;

typedef enum {
  DLX_PLATFORM_LINUX = 0,
  DLX_PLATFORM_WINDOWS,
  DLX_PLATFORM_MACOS,
  DLX_PLATFORM_OTHER
} dlx_platform;

/* Gathered from torch at the edge; a probe that raised counts as 0. */
typedef struct dlx_backend_facts {
  dlx_platform platform;
  int cuda_available;   /* torch.cuda.is_available() */
  int version_cuda_set; /* torch.version.cuda exists and is not None */
  int version_hip_set;  /* torch.version.hip exists and is not None */
  int npu_namespace;    /* hasattr(torch, "npu") */
  int npu_available;    /* torch.npu.is_available() */
  const char *forced;   /* DLX_BACKEND value, or NULL/"" */
} dlx_backend_facts;

typedef struct dlx_backend_choice {
  dlx_backend backend;
  char reason[256]; /* a human sentence; the error text when selection fails */
} dlx_backend_choice;

/* "cpu", "cuda", "rocm", "torch_npu"; "unknown" for anything else. */
const char *dlx_backend_name(dlx_backend b);

/* The four names above, plus "ascend" and "npu" as aliases of torch_npu (exact,
 * case-sensitive). 0, or -1 (and *out untouched) for anything else. */
int dlx_backend_parse(const char *name, dlx_backend *out);

/* Python's sys.platform: "linux*", "win32"/"cygwin", "darwin"; else OTHER. */
dlx_platform dlx_platform_from_name(const char *sys_platform);

/* "linux", "windows", "macos", "other". */
const char *dlx_platform_name(dlx_platform p);

/* 0 with out->backend and out->reason, or -1 with the error in out->reason
 * (an invalid DLX_BACKEND, or torch_npu forced off Linux). */
int dlx_backend_select(const dlx_backend_facts *f, dlx_backend_choice *out);

/* ---- device type -> backend: a table, so doctor can print it ------------- */

typedef struct dlx_device_row {
  DLDeviceType device_type;
  dlx_backend backend;
  const char *note;
  /* 1: the device type is shared by several vendors, so it names `backend` only
   * while `backend` is the active one (see dlx_device_stream_backend). */
  int only_when_active;
} dlx_device_row;

/* The whole table, read-only; *n gets the row count. */
const dlx_device_row *dlx_device_rows(size_t *n);

/* The backend owning `device_type`, by the table; -1 if no row names it. */
int dlx_device_backend(int32_t device_type, dlx_backend *out);

/* As dlx_device_backend, for picking a stream source: rows marked
 * only_when_active (kDLExtDev) count only while `active` is their backend,
 * because ExtDev means Ascend only on a torch_npu machine. */
int dlx_device_stream_backend(int32_t device_type, dlx_backend active, dlx_backend *out);

#endif /* DLX_BACKEND_H_ */
