/*
 * dlx/dlx.h - what a kernel author writes against.
 *
 *   #include <dlx/dlx.h>
 *   DLX_KERNEL(scale, "x: f32[n] mut, a: float = 1.0") {
 *     DLTensor *x; double a;
 *     if (dlx_arg_tensor(call, 0, &x) || dlx_arg_float(call, 1, &a)) return -1;
 *     ...launch on dlx_call_stream(call)...
 *     return 0;
 *   }
 *
 * The signature (optional; grammar in docs/signatures.md) is checked by the runtime
 * before the kernel runs: kinds, dtypes, shapes, size symbols, devices, writability.
 *
 * ABI rule: a kernel library is built with these headers alone and links
 * nothing of dlx. Every accessor is inline and reaches the runtime through the
 * function table carried by the call (`call->rt`), so one kernel binary works
 * with any dlx whose DLX_ABI_VERSION major matches and whose minor is at least the
 * kernel's (a newer kernel may read appended fields). Fields are appended only.
 */
#ifndef DLX_DLX_H_
#define DLX_DLX_H_

#include <stdarg.h>
#include <stddef.h>
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

/* Kernel ABI version: major in the high 16 bits; a major change breaks kernels. A
 * minor bump appends fields: 1.1 added signatures, str/ints/floats, dlx_size; 1.2 the
 * runtime's arg_readonly (dlx_arg_is_readonly of a table's view export). */
#define DLX_ABI_VERSION 0x00010002u
#define DLX_ABI_MAJOR(v) ((v) >> 16)
#define DLX_ABI_MINOR(v) ((v) & 0xffffu)

/* What an argument slot holds. */
typedef enum {
  DLX_ARG_NONE = 0,   /* Python None */
  DLX_ARG_INT = 1,    /* Python int */
  DLX_ARG_BOOL = 2,   /* Python bool (read with dlx_arg_int) */
  DLX_ARG_FLOAT = 3,  /* Python float */
  DLX_ARG_TENSOR = 4, /* any tensor dlx could convert */
  DLX_ARG_STR = 5,    /* Python str (dlx_arg_str) */
  DLX_ARG_INTS = 6,   /* tuple, list or torch.Size of ints (dlx_arg_ints) */
  DLX_ARG_FLOATS = 7, /* tuple or list of floats, ints mixed in (dlx_arg_floats) */
} dlx_arg_kind;

/* The data of a str, ints or floats argument; valid until the kernel returns. */
typedef struct dlx_arg_seq {
  const void *data; /* const char * (UTF-8, NUL-terminated), const int64_t * or const double * */
  int64_t len;      /* bytes of the string, or elements of the list */
} dlx_arg_seq;

/* One converted argument; owned by the runtime, valid until the kernel returns. */
typedef struct dlx_arg {
  int32_t kind;     /* a dlx_arg_kind */
  int32_t readonly; /* 1 when the producer forbids writes (DLPACK_FLAG_BITMASK_READ_ONLY) */
  union {
    int64_t i;        /* DLX_ARG_INT, DLX_ARG_BOOL */
    double f;         /* DLX_ARG_FLOAT */
    DLTensor *tensor; /* DLX_ARG_TENSOR */
    const dlx_arg_seq *seq; /* DLX_ARG_STR, DLX_ARG_INTS, DLX_ARG_FLOATS */
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
  /* ABI 1.1 */
  int (*symbol_size)(dlx_call *call, const char *symbol, int64_t *out);
  int (*ints_as_floats)(dlx_call *call, int32_t i, const double **v, int32_t *n);
  /* ABI 1.2: whether tensor argument i is read-only, learnt on demand where its export
   * carried no flags (a table's view export): 1 read-only (or unknowable), 0 writable. */
  int (*arg_readonly)(const dlx_call *call, int32_t i);
} dlx_runtime;

/* One kernel invocation. The runtime's private state follows these fields. */
struct dlx_call {
  const dlx_runtime *rt; /* runtime services */
  const dlx_arg *args;   /* num_args converted arguments */
  int32_t num_args;      /* number of arguments (a signed kernel: its declared parameters) */
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
  const char *signature; /* ABI 1.1: the declared signature, or NULL */
} dlx_kernel_record;

#define DLX_KERNEL_MAGIC 0x6c656e72656b786cull /* "lxkernel" */
#define DLX_KERNEL_RECORD_PREFIX "dlx_kernel__"

/* DLX_KERNEL(name) or DLX_KERNEL(name, "x: f32[n], ..."): defines exported kernel
 * `int name(dlx_call *call)` and its registration record (with the signature, or NULL). */
#define DLX_KERNEL(...) DLX__KERNEL_PICK(__VA_ARGS__, DLX__KERNEL_SIG, DLX__KERNEL_NOSIG, _)(__VA_ARGS__)
#define DLX__KERNEL_PICK(a, b, which, ...) which
#define DLX__KERNEL_NOSIG(name) DLX__KERNEL_DEFINE(name, 0)
#define DLX__KERNEL_SIG(name, sig) DLX__KERNEL_DEFINE(name, "" sig) /* "": a literal only */
#define DLX__KERNEL_DEFINE(name, sig)                                                \
  DLX_EXTERN_C DLX_EXPORT int name(dlx_call *call);                                  \
  DLX_EXTERN_C DLX_EXPORT const dlx_kernel_record dlx_kernel__##name;                \
  const dlx_kernel_record dlx_kernel__##name = {DLX_KERNEL_MAGIC, DLX_ABI_VERSION, 0, \
                                                #name, name, sig};                   \
  DLX__KERNEL_DEFINITION(name)

#ifdef __cplusplus
/* In C++ the body is a separate function run by dlx__cxx_guard (defined below, after
 * dlx_error): an exception must not cross into the interpreter, which would terminate. */
#define DLX__KERNEL_DEFINITION(name)                                                 \
  static int dlx__body_##name(dlx_call *call);                                       \
  int name(dlx_call *call) { return dlx__cxx_guard(call, #name, dlx__body_##name); }  \
  static int dlx__body_##name(dlx_call *call)
#else
#define DLX__KERNEL_DEFINITION(name) int name(dlx_call *call)
#endif

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
    case DLX_ARG_STR: return "str";
    case DLX_ARG_INTS: return "ints";
    case DLX_ARG_FLOATS: return "floats";
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

/* 1: the kernel must not write argument i's data; 0 otherwise (also for non-tensors).
 * A tensor not known read-only is asked of the runtime (1.2 on; an older runtime's
 * `size` ends before arg_readonly): its export may not have carried the flags. */
static inline int dlx_arg_is_readonly(const dlx_call *call, int32_t i) {
  if (i < 0 || i >= call->num_args) return 0;
  const dlx_arg *a = &call->args[i];
  if (a->readonly) return 1;
  if (a->kind != DLX_ARG_TENSOR) return 0;
  const dlx_runtime *rt = call->rt;
  if (rt->size < offsetof(dlx_runtime, arg_readonly) + sizeof rt->arg_readonly ||
      !rt->arg_readonly)
    return 0;
  return rt->arg_readonly(call, i);
}

static inline DLDevice dlx_call_device(const dlx_call *call) { return call->device; }

static inline void *dlx_call_stream(const dlx_call *call) { return call->stream; }

/* str: UTF-8 bytes, NUL-terminated, valid during the call; `len` (may be NULL) excludes the NUL. */
static inline int dlx_arg_str(dlx_call *call, int32_t i, const char **s, int64_t *len) {
  const dlx_arg *a = dlx__arg(call, i);
  if (!a) return -1;
  if (a->kind != DLX_ARG_STR) {
    dlx_error(call, "TypeError", "argument %d: expected a str, got %s", (int)i,
              dlx__kind_name(a->kind));
    return -1;
  }
  *s = (const char *)a->value.seq->data;
  if (len) *len = a->value.seq->len;
  return 0;
}

/* A tuple, list or torch.Size of ints; valid during the call. */
static inline int dlx_arg_ints(dlx_call *call, int32_t i, const int64_t **v, int32_t *n) {
  const dlx_arg *a = dlx__arg(call, i);
  if (!a) return -1;
  if (a->kind != DLX_ARG_INTS) {
    dlx_error(call, "TypeError", "argument %d: expected a tuple or list of ints, got %s", (int)i,
              dlx__kind_name(a->kind));
    return -1;
  }
  *v = (const int64_t *)a->value.seq->data;
  *n = (int32_t)a->value.seq->len;
  return 0;
}

/* A tuple or list of floats (ints accepted, converted); valid during the call. */
static inline int dlx_arg_floats(dlx_call *call, int32_t i, const double **v, int32_t *n) {
  const dlx_arg *a = dlx__arg(call, i);
  if (!a) return -1;
  if (a->kind == DLX_ARG_FLOATS) {
    *v = (const double *)a->value.seq->data;
    *n = (int32_t)a->value.seq->len;
    return 0;
  }
  if (a->kind == DLX_ARG_INTS) return call->rt->ints_as_floats(call, i, v, n);
  dlx_error(call, "TypeError", "argument %d: expected a tuple or list of floats, got %s", (int)i,
            dlx__kind_name(a->kind));
  return -1;
}

/* 1 when argument i is None; 0 otherwise (also out of range). */
static inline int dlx_arg_is_none(const dlx_call *call, int32_t i) {
  return i >= 0 && i < call->num_args && call->args[i].kind == DLX_ARG_NONE;
}

/* The value a size symbol of the signature ("m" in f32[m, n]) was bound to in this call. */
static inline int dlx_size(dlx_call *call, const char *symbol, int64_t *out) {
  return call->rt->symbol_size(call, symbol, out);
}

/* Set a Python result. Called several times, the results form a tuple in call order;
 * a signed kernel may return at most as many as its "->" declares. */
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

#include <exception>
#if defined(__GLIBCXX__)
#include <cxxabi.h>
#endif

/* Runs a C++ kernel's body: every exception it throws becomes a RuntimeError naming the
 * kernel and what(). Thread cancellation's forced unwind must continue, so it is rethrown. */
static inline int dlx__cxx_guard(dlx_call *call, const char *name, int (*body)(dlx_call *)) {
  try {
    return body(call);
#if defined(__GLIBCXX__)
  } catch (abi::__forced_unwind &) {
    throw;
#endif
  } catch (const std::exception &e) {
    return dlx_error(call, "RuntimeError", "kernel %s threw a C++ exception: %s", name, e.what());
  } catch (...) {
    return dlx_error(call, "RuntimeError", "kernel %s threw a C++ exception (not a std::exception)",
                     name);
  }
}
#endif
#endif /* DLX_DLX_H_ */
