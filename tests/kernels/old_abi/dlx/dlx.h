/*
 * dlx/dlx.h - what a kernel author writes against.
 *
 *   #include <dlx/dlx.h>
 *   DLX_KERNEL(scale) {
 *     DLTensor *x; double a;
 *     if (dlx_arg_tensor(call, 0, &x) || dlx_arg_float(call, 1, &a)) return -1;
 *     ...launch on dlx_call_stream(call)...
 *     return 0;
 *   }
 *
 * ABI rule: a kernel library is built with these headers alone and links
 * nothing of dlx. Every accessor is inline and reaches the runtime through the
 * function table carried by the call (`call->rt`), so one kernel binary works
 * with any dlx whose DLX_ABI_VERSION major matches. Fields are appended only.
 */
#ifndef DLX_DLX_H_
#define DLX_DLX_H_

#include <stdarg.h>
#include <stdint.h>

#include "dlpack.h"

#ifdef __cplusplus
#define DLX_EXTERN_C extern "C"
extern "C" {
#else
#define DLX_EXTERN_C
#endif

#if defined(_WIN32)
#define DLX_EXPORT __declspec(dllexport)
#else
#define DLX_EXPORT __attribute__((visibility("default")))
#endif

/* Kernel ABI version: major in the high 16 bits; a major change breaks kernels. */
#define DLX_ABI_VERSION 0x00010000u
#define DLX_ABI_MAJOR(v) ((v) >> 16)

/* What an argument slot holds. */
typedef enum {
  DLX_ARG_NONE = 0,   /* Python None */
  DLX_ARG_INT = 1,    /* Python int */
  DLX_ARG_BOOL = 2,   /* Python bool (read with dlx_arg_int) */
  DLX_ARG_FLOAT = 3,  /* Python float */
  DLX_ARG_TENSOR = 4, /* any tensor dlx could convert */
} dlx_arg_kind;

/* One converted argument; owned by the runtime, valid until the kernel returns. */
typedef struct dlx_arg {
  int32_t kind;     /* a dlx_arg_kind */
  int32_t readonly; /* 1 when the producer forbids writes (DLPACK_FLAG_BITMASK_READ_ONLY) */
  union {
    int64_t i;        /* DLX_ARG_INT, DLX_ARG_BOOL */
    double f;         /* DLX_ARG_FLOAT */
    DLTensor *tensor; /* DLX_ARG_TENSOR */
  } value;
} dlx_arg;

typedef struct dlx_call dlx_call;

/* Services the runtime provides to kernels; reached only through call->rt. */
typedef struct dlx_runtime {
  uint32_t abi_version; /* DLX_ABI_VERSION of the runtime */
  uint32_t size;        /* sizeof(dlx_runtime) of the runtime, for appended fields */
  /* Record an error of Python exception class `kind`; always returns -1. */
  int (*verror)(dlx_call *call, const char *kind, const char *fmt, va_list ap);
  int (*return_int)(dlx_call *call, int64_t value);
  int (*return_float)(dlx_call *call, double value);
  int (*return_new_tensor)(dlx_call *call, DLDevice device, int32_t ndim, const int64_t *shape,
                           DLDataType dtype, DLTensor **out);
} dlx_runtime;

/* One kernel invocation. The runtime's private state follows these fields. */
struct dlx_call {
  const dlx_runtime *rt; /* runtime services */
  const dlx_arg *args;   /* num_args converted arguments */
  int32_t num_args;      /* number of positional arguments */
  DLDevice device;       /* first non-CPU tensor argument's device, else {kDLCPU, 0} */
  void *stream;          /* caller's current work stream on `device`, NULL on CPU */
};

/* A kernel: returns 0, or -1 after dlx_error (or a failing accessor). */
typedef int (*dlx_kernel_fn)(dlx_call *call);

/* The registration record DLX_KERNEL exports next to each kernel; dlx.load only
 * calls symbols that have one, so no symbol with another signature is ever called. */
typedef struct dlx_kernel_record {
  uint64_t magic;       /* DLX_KERNEL_MAGIC */
  uint32_t abi_version; /* DLX_ABI_VERSION the kernel was built with */
  uint32_t reserved;    /* zero */
  const char *name;     /* the kernel's name, equal to the symbol suffix */
  dlx_kernel_fn fn;     /* the kernel */
} dlx_kernel_record;

#define DLX_KERNEL_MAGIC 0x6c656e72656b786cull /* "lxkernel" */
#define DLX_KERNEL_RECORD_PREFIX "dlx_kernel__"

/* Defines exported kernel `int name(dlx_call *call)` and its registration record. */
#define DLX_KERNEL(name)                                                             \
  DLX_EXTERN_C DLX_EXPORT int name(dlx_call *call);                                  \
  DLX_EXTERN_C DLX_EXPORT const dlx_kernel_record dlx_kernel__##name;                \
  const dlx_kernel_record dlx_kernel__##name = {DLX_KERNEL_MAGIC, DLX_ABI_VERSION, 0, \
                                                #name, name};                        \
  int name(dlx_call *call)

#if defined(__GNUC__)
#define DLX_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define DLX_PRINTF(f, a)
#endif

/* Raise Python exception `kind` ("ValueError", ...) with a printf-style message; returns -1. */
static inline DLX_PRINTF(3, 4) int dlx_error(dlx_call *call, const char *kind, const char *fmt,
                                             ...) {
  va_list ap;
  va_start(ap, fmt);
  call->rt->verror(call, kind, fmt, ap);
  va_end(ap);
  return -1;
}

static inline int32_t dlx_num_args(const dlx_call *call) { return call->num_args; }

/* The slot of argument i, or NULL after setting an IndexError. */
static inline const dlx_arg *dlx__arg(dlx_call *call, int32_t i) {
  if (i < 0 || i >= call->num_args) {
    dlx_error(call, "IndexError", "argument %d: out of range, the call has %d argument(s)",
              (int)i, (int)call->num_args);
    return 0;
  }
  return &call->args[i];
}

static inline const char *dlx__kind_name(int32_t kind) {
  switch (kind) {
    case DLX_ARG_NONE: return "None";
    case DLX_ARG_INT: return "int";
    case DLX_ARG_BOOL: return "bool";
    case DLX_ARG_FLOAT: return "float";
    case DLX_ARG_TENSOR: return "tensor";
    default: return "unknown";
  }
}

static inline int dlx_arg_tensor(dlx_call *call, int32_t i, DLTensor **out) {
  const dlx_arg *a = dlx__arg(call, i);
  if (!a) return -1;
  if (a->kind != DLX_ARG_TENSOR) {
    dlx_error(call, "TypeError", "argument %d: expected a tensor, got %s", (int)i,
              dlx__kind_name(a->kind));
    return -1;
  }
  *out = a->value.tensor;
  return 0;
}

/* int or bool */
static inline int dlx_arg_int(dlx_call *call, int32_t i, int64_t *out) {
  const dlx_arg *a = dlx__arg(call, i);
  if (!a) return -1;
  if (a->kind != DLX_ARG_INT && a->kind != DLX_ARG_BOOL) {
    dlx_error(call, "TypeError", "argument %d: expected an int, got %s", (int)i,
              dlx__kind_name(a->kind));
    return -1;
  }
  *out = a->value.i;
  return 0;
}

/* float or int */
static inline int dlx_arg_float(dlx_call *call, int32_t i, double *out) {
  const dlx_arg *a = dlx__arg(call, i);
  if (!a) return -1;
  if (a->kind == DLX_ARG_FLOAT) {
    *out = a->value.f;
    return 0;
  }
  if (a->kind == DLX_ARG_INT) {
    *out = (double)a->value.i;
    return 0;
  }
  dlx_error(call, "TypeError", "argument %d: expected a float, got %s", (int)i,
            dlx__kind_name(a->kind));
  return -1; /* spelled out: variadic calls are not inlined, the optimiser must see it */
}

/* 1: the kernel must not write argument i's data; 0 otherwise (also for non-tensors). */
static inline int dlx_arg_is_readonly(const dlx_call *call, int32_t i) {
  return i >= 0 && i < call->num_args && call->args[i].readonly;
}

static inline DLDevice dlx_call_device(const dlx_call *call) { return call->device; }

static inline void *dlx_call_stream(const dlx_call *call) { return call->stream; }

/* Set the call's Python result; a kernel returns one value at most. */
static inline int dlx_return_int(dlx_call *call, int64_t value) {
  return call->rt->return_int(call, value);
}

static inline int dlx_return_float(dlx_call *call, double value) {
  return call->rt->return_float(call, value);
}

/* Allocate a fresh compact tensor through the first tensor argument's framework
 * (numpy when there is none) and make it the call's result. */
static inline int dlx_return_new_tensor(dlx_call *call, DLDevice device, int32_t ndim,
                                        const int64_t *shape, DLDataType dtype, DLTensor **out) {
  return call->rt->return_new_tensor(call, device, ndim, shape, dtype, out);
}

#ifdef __cplusplus
}
#endif
#endif /* DLX_DLX_H_ */
