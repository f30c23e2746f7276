/*
 * dlx_sig.h - kernel signatures: the grammar of DLX_KERNEL(name, "sig") parsed once
 * into a compact plan, and the per-call tensor check over that plan. Pure C, no Python.
 *
 *   x: f32[m, n], out: f32[m, n] mut? = None, axis: int = -1 -> f32[m, n]; nogil
 *
 * The plan is one heap block (dlx_sig_free releases it). The call path reads it and
 * never writes it; per-call state lives in a dlx_sig_bindings on the caller's stack.
 */
#ifndef DLX_SIG_H_
#define DLX_SIG_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "dlx/dlpack.h"

#define DLX_SIG_MAX_LEN 4096    /* characters of one signature */
#define DLX_SIG_MAX_PARAMS 64   /* = DLX_MAX_ARGS of the runtime */
#define DLX_SIG_MAX_RESULTS 16
#define DLX_SIG_MAX_SYMBOLS 32  /* size symbols of one signature (a bitmask per call) */
#define DLX_SIG_MAX_TENSOR_DIMS 32
#define DLX_SIG_MAX_DIMS 256     /* dimension entries over all types of one signature */

/* What a parameter or result is. */
typedef enum {
  DLX_SIG_TENSOR = 1,
  DLX_SIG_INT = 2,
  DLX_SIG_FLOAT = 3,
  DLX_SIG_BOOL = 4,
  DLX_SIG_STR = 5,
  DLX_SIG_INTS = 6,
  DLX_SIG_FLOATS = 7,
} dlx_sig_kind;

/* Dtype set bits, in grammar order; "tensor" is every bit (DLX_SIG_DT_ANY). */
enum {
  DLX_SIG_F16, DLX_SIG_BF16, DLX_SIG_F32, DLX_SIG_F64, DLX_SIG_I8, DLX_SIG_I16, DLX_SIG_I32,
  DLX_SIG_I64, DLX_SIG_U8, DLX_SIG_U16, DLX_SIG_U32, DLX_SIG_U64, DLX_SIG_BOOLT, DLX_SIG_C64,
  DLX_SIG_C128, DLX_SIG_NUM_DTYPES
};
#define DLX_SIG_DT_OTHER (1u << 31) /* a dtype the grammar cannot name: only "tensor" takes it */
#define DLX_SIG_DT_ANY 0xffffffffu
#define DLX_SIG_NO_EXACT 0xffffffffu /* lanes 0xffff: no tensor has it */

/* Tensor flags. */
enum {
  DLX_SIG_MUT = 1 << 0,
  DLX_SIG_CONTIG = 1 << 1,
  DLX_SIG_CPU = 1 << 2,
  DLX_SIG_CUDA = 1 << 3,
  DLX_SIG_ROCM = 1 << 4,
  DLX_SIG_NPU = 1 << 5, /* kDLExtDev */
  DLX_SIG_GPU = 1 << 6, /* any non-CPU device */
};
#define DLX_SIG_DEVICES (DLX_SIG_CPU | DLX_SIG_CUDA | DLX_SIG_ROCM | DLX_SIG_NPU | DLX_SIG_GPU)

/* options: nogil releases the GIL around the kernel; effects: the kernel has effects (state,
 * I/O, randomness), so compilers stage every call and never fold, remove or merge one */
enum { DLX_SIG_NOGIL = 1 << 0, DLX_SIG_EFFECTS = 1 << 1 };

typedef enum { DLX_DIM_FIXED = 0, DLX_DIM_SYMBOL = 1, DLX_DIM_ANY = 2, DLX_DIM_ELLIPSIS = 3 } dlx_dim_kind;

typedef struct dlx_sig_dim {
  int32_t kind;   /* dlx_dim_kind */
  int32_t sym;    /* DLX_DIM_SYMBOL: index into dlx_sig.symbols */
  int64_t extent; /* DLX_DIM_FIXED */
} dlx_sig_dim;

typedef struct dlx_sig_type {
  uint8_t kind;     /* dlx_sig_kind */
  uint8_t optional; /* "?": None accepted */
  uint16_t flags;   /* DLX_SIG_MUT, ... (tensors) */
  uint32_t dtypes;  /* tensors: set of 1u << DLX_SIG_F16... */
  uint32_t dtype_exact; /* a set of one: that DLDataType's 4 bytes (dlx_sig_dtype_packed),
                           else DLX_SIG_NO_EXACT */
  int16_t ndims;    /* entries in dims; -1: no brackets, any shape */
  int16_t ellipsis; /* index of "..." in dims, or -1 */
  uint16_t dim0;    /* first entry in dlx_sig.dims */
  uint16_t column;  /* 1-based column where the type starts, for messages */
} dlx_sig_type;

typedef enum {
  DLX_DEF_REQUIRED = 0, /* no default */
  DLX_DEF_NONE, DLX_DEF_INT, DLX_DEF_FLOAT, DLX_DEF_BOOL, DLX_DEF_STR, DLX_DEF_INTS,
  DLX_DEF_FLOATS
} dlx_def_kind;

typedef struct dlx_sig_param {
  dlx_sig_type type;
  uint16_t name;     /* offset of the NUL-terminated name in dlx_sig.pool */
  uint8_t def_kind;  /* dlx_def_kind */
  uint16_t def_off;  /* DLX_DEF_STR: pool offset; DLX_DEF_INTS/FLOATS: index into nums */
  uint16_t def_len;  /* bytes of the string, or elements of the list */
  union {
    int64_t i;       /* DLX_DEF_INT, DLX_DEF_BOOL */
    double f;        /* DLX_DEF_FLOAT */
  } def;
} dlx_sig_param;

/* A parsed signature: one block, pointers into itself. */
typedef struct dlx_sig {
  int32_t nparams, nrequired; /* parameters; those before the first default */
  int32_t nresults;           /* declared results; 0 with no "->" */
  int32_t nsymbols;
  uint32_t options;           /* DLX_SIG_NOGIL | DLX_SIG_EFFECTS */
  int32_t has_results;        /* "->" was given (nresults may still be 1) */
  uint32_t independent;       /* size symbols marked "n*": the kernel computes each index of
                                 that dimension alone, so it may be split across devices
                                 (bit k: symbol k; dlx_derive_shard) */
  const dlx_sig_param *params;
  const dlx_sig_type *results;
  const dlx_sig_dim *dims;
  const uint16_t *symbols;    /* pool offsets of the symbol names */
  const union dlx_sig_num {   /* list defaults */
    int64_t i;
    double f;
  } *nums;
  const char *pool;           /* names and string defaults, NUL-terminated */
} dlx_sig;

/* Parse `text`; NULL with a reason in err and the 1-based column of the fault in
 * *column (0: not a fault of the text, e.g. out of memory). */
dlx_sig *dlx_sig_parse(const char *text, char *err, size_t errlen, int32_t *column);
void dlx_sig_free(dlx_sig *sig);

static inline const char *dlx_sig_str(const dlx_sig *s, uint16_t off) { return s->pool + off; }
static inline const char *dlx_sig_param_name(const dlx_sig *s, int32_t i) {
  return s->pool + s->params[i].name;
}
/* Index of size symbol `name`, or -1. */
int32_t dlx_sig_symbol_index(const dlx_sig *s, const char *name);

/* Canonical text: the whole signature, one type, one default. Each returns the length
 * it needed (snprintf-like: output truncated when >= len). */
size_t dlx_sig_format(const dlx_sig *s, char *buf, size_t len);
enum { DLX_SIG_PART_PARAMS = 1, DLX_SIG_PART_RESULTS = 2, DLX_SIG_PART_OPTIONS = 4 };
/* Only some parts, each without its separator: "x: f32[n]", "f32[n]" or "(i64, i64)", "nogil". */
size_t dlx_sig_format_parts(const dlx_sig *s, int parts, char *buf, size_t len);
size_t dlx_sig_format_type(const dlx_sig *s, const dlx_sig_type *t, char *buf, size_t len);
size_t dlx_sig_format_default(const dlx_sig *s, const dlx_sig_param *p, char *buf, size_t len);
/* A tensor's dtype as the grammar spells it ("f32"), or a description. */
void dlx_sig_dtype_name(DLDataType dt, char *buf, size_t len);
/* The shortest %g text of f that reads back as the same double (callers add the '.' their
 * reader needs to see a float). */
void dlx_sig_shortest_float(double f, char out[40]);

/* ---- the per-call check ------------------------------------------------------------ */

/* The dtype's bit in a dlx_sig_type.dtypes set (DLX_SIG_DT_OTHER when unnamed). */
static inline uint32_t dlx_sig_dtype_bit(DLDataType dt) {
  /* [code][log2(bits) - 3] for bits 8..128; kDLInt, kDLUInt, kDLFloat, -, kDLBfloat,
   * kDLComplex, kDLBool */
  static const int8_t table[7][5] = {
      {DLX_SIG_I8, DLX_SIG_I16, DLX_SIG_I32, DLX_SIG_I64, -1},
      {DLX_SIG_U8, DLX_SIG_U16, DLX_SIG_U32, DLX_SIG_U64, -1},
      {-1, DLX_SIG_F16, DLX_SIG_F32, DLX_SIG_F64, -1},
      {-1, -1, -1, -1, -1},
      {-1, DLX_SIG_BF16, -1, -1, -1},
      {-1, -1, -1, DLX_SIG_C64, DLX_SIG_C128},
      {DLX_SIG_BOOLT, -1, -1, -1, -1}};
  unsigned b = dt.bits;
  int col = b == 8 ? 0 : b == 16 ? 1 : b == 32 ? 2 : b == 64 ? 3 : b == 128 ? 4 : -1;
  if (dt.code > kDLBool || col < 0 || dt.lanes != 1) return DLX_SIG_DT_OTHER;
  int8_t v = table[dt.code][col];
  return v < 0 ? DLX_SIG_DT_OTHER : 1u << v;
}

/* A DLDataType's 4 bytes as one word: one compare for the common one-dtype parameter. */
static inline uint32_t dlx_sig_dtype_packed(DLDataType dt) {
  uint32_t w;
  memcpy(&w, &dt, sizeof w);
  return w;
}

/* Size symbols of one call: bound on first sight, compared afterwards. */
typedef struct dlx_sig_bindings {
  int64_t value[DLX_SIG_MAX_SYMBOLS];    /* -1 until bound (extents are never negative) */
  int8_t owner[DLX_SIG_MAX_SYMBOLS];     /* parameter that bound it */
} dlx_sig_bindings;

_Static_assert(DLX_SIG_MAX_SYMBOLS >= 4, "dlx_sig_bindings_init stores four");
static inline void dlx_sig_bindings_init(dlx_sig_bindings *b, const dlx_sig *s) {
  /* The usual few: four stores whatever their number (two vector stores once compiled),
   * no loop and no memset call; a longer list gets the rest. */
  for (int32_t k = 0; k < 4; ++k) b->value[k] = -1;
  for (int32_t k = 4; k < s->nsymbols; ++k) b->value[k] = -1;
}

typedef enum {
  DLX_FAULT_NONE = 0,
  DLX_FAULT_DTYPE,    /* TypeError */
  DLX_FAULT_NDIM,     /* ValueError from here on */
  DLX_FAULT_EXTENT,   /* a fixed extent differs */
  DLX_FAULT_SYMBOL,   /* a size symbol differs from its first binding */
  DLX_FAULT_DEVICE,
  DLX_FAULT_CONTIG,
  DLX_FAULT_READONLY,
  DLX_FAULT_OVERLAP,  /* a mut tensor whose elements share memory (a stride 0) */
} dlx_fault_code;

typedef struct dlx_sig_fault {
  int32_t code;  /* dlx_fault_code */
  int32_t dim;   /* the tensor dimension at fault (EXTENT, SYMBOL) */
  int32_t sym;   /* SYMBOL: which */
} dlx_sig_fault;

/* Contiguous in row-major order (extent-1 dimensions may have any stride; a tensor with a
 * zero extent anywhere has no element to step to, so it is contiguous whatever its
 * strides). */
static inline int dlx_sig_is_contig(const DLTensor *t) {
  if (!t->strides) return 1;
  int64_t expect = 1;
  for (int32_t d = t->ndim - 1; d >= 0; --d) {
    int64_t n = t->shape[d];
    if (n != 1 && t->strides[d] != expect) {
      for (int32_t e = 0; e < t->ndim; ++e) /* rare: only a layout already refused */
        if (t->shape[e] == 0) return 1;
      return 0;
    }
    expect *= n;
  }
  return 1;
}

static inline int dlx_sig_device_ok(uint32_t flags, DLDeviceType dev) {
  uint32_t want = flags & DLX_SIG_DEVICES;
  if (!want) return 1;
  uint32_t have = dev == kDLCPU ? DLX_SIG_CPU
                  : dev == kDLCUDA ? DLX_SIG_CUDA | DLX_SIG_GPU
                  : dev == kDLROCM ? DLX_SIG_ROCM | DLX_SIG_GPU
                  : dev == kDLExtDev ? DLX_SIG_NPU | DLX_SIG_GPU
                                     : DLX_SIG_GPU;
  return (want & have) != 0;
}

/* One dimension entry against extent n (tensor dimension d). */
static inline int dlx_sig__dim(const dlx_sig_dim *dm, int64_t n, int32_t d, int32_t param,
                               dlx_sig_bindings *b, dlx_sig_fault *fault) {
  if (dm->kind == DLX_DIM_SYMBOL) {
    int64_t *v = &b->value[dm->sym];
    if (*v != n) { /* unbound (-1): bind it; bound: a fault */
      if (*v >= 0) return fault->sym = dm->sym, fault->code = DLX_FAULT_SYMBOL, fault->dim = d, -1;
      *v = n;
      b->owner[dm->sym] = (int8_t)param;
    }
  } else if (dm->kind == DLX_DIM_FIXED && n != dm->extent) {
    return fault->code = DLX_FAULT_EXTENT, fault->dim = d, -1;
  }
  return 0;
}

/* 1 when some elements of `t` share memory for certain: a dimension of extent > 1 with
 * stride 0 (torch's expand, numpy's broadcast_to made writable). A kernel writing it would
 * write one element several times, so a `mut` parameter refuses it, as torch's in-place
 * operators do (at::has_internal_overlap's "yes"; other layouts are not proved to overlap). */
static inline int dlx_sig_overlaps(const DLTensor *t) {
  if (!t->strides) return 0; /* compact */
  for (int32_t d = 0; d < t->ndim; ++d)
    if (t->strides[d] == 0 && t->shape[d] > 1) return 1;
  return 0;
}

/* Check tensor `t` of parameter `param` against its declared type, binding size symbols
 * in `b`. 0, or -1 with `fault` filled. Inline: it runs for every tensor of a call. */
static inline int dlx_sig_check_type(const dlx_sig *s, const dlx_sig_type *ty, int32_t param,
                                     const DLTensor *t, int readonly, dlx_sig_bindings *b,
                                     dlx_sig_fault *fault) {
  if (dlx_sig_dtype_packed(t->dtype) != ty->dtype_exact &&
      !(ty->dtypes & dlx_sig_dtype_bit(t->dtype)))
    return fault->code = DLX_FAULT_DTYPE, fault->dim = -1, -1;
  if (ty->ndims >= 0) {
    const dlx_sig_dim *dims = s->dims + ty->dim0;
    int32_t nd = ty->ndims;
    if (ty->ellipsis < 0) {
      if (t->ndim != nd) return fault->code = DLX_FAULT_NDIM, fault->dim = -1, -1;
      const int64_t *shape = t->shape;
      for (int32_t d = 0; d != nd; ++d)
        if (dlx_sig__dim(dims + d, shape[d], d, param, b, fault)) return -1;
    } else {
      int32_t lead = ty->ellipsis, skip = t->ndim - (nd - 1); /* dims the "..." stands for */
      if (skip < 0) return fault->code = DLX_FAULT_NDIM, fault->dim = -1, -1;
      for (int32_t k = 0; k < lead; ++k)
        if (dlx_sig__dim(&dims[k], t->shape[k], k, param, b, fault)) return -1;
      for (int32_t k = lead + 1; k < nd; ++k)
        if (dlx_sig__dim(&dims[k], t->shape[k - 1 + skip], k - 1 + skip, param, b, fault))
          return -1;
    }
  }
  if (ty->flags) {
    fault->dim = -1;
    if (!dlx_sig_device_ok(ty->flags, t->device.device_type))
      return fault->code = DLX_FAULT_DEVICE, -1;
    if ((ty->flags & DLX_SIG_CONTIG) && !dlx_sig_is_contig(t))
      return fault->code = DLX_FAULT_CONTIG, -1;
    if (ty->flags & DLX_SIG_MUT) {
      if (readonly) return fault->code = DLX_FAULT_READONLY, -1;
      if (dlx_sig_overlaps(t)) return fault->code = DLX_FAULT_OVERLAP, -1;
    }
  }
  return 0;
}

static inline int dlx_sig_check_tensor(const dlx_sig *s, int32_t param, const DLTensor *t,
                                       int readonly, dlx_sig_bindings *b, dlx_sig_fault *fault) {
  return dlx_sig_check_type(s, &s->params[param].type, param, t, readonly, b, fault);
}

/* ---- the quick check: the usual tensor parameter, compiled once ---------------------- */

#define DLX_SIG_QUICK_DIMS 8

/* One dtype, a fixed number of dimensions (up to DLX_SIG_QUICK_DIMS), each a size symbol,
 * a fixed extent or "_", no device or contiguity flag ("x: f32[n]", "out: f32[m, n] mut"):
 * then the whole check is a few compares. Anything else has ndim -1 and is left to
 * dlx_sig_check_type. */
typedef struct dlx_sig_quick {
  uint32_t dtype;  /* dlx_sig_dtype_packed of the one dtype */
  int32_t ndim;    /* -1: not quick */
  int32_t mut;     /* 1: a read-only tensor is refused (set for every mut tensor parameter,
                      quick or not: the call learns its flags through an owned export) */
  int32_t kind;    /* the parameter's dlx_sig_kind, quick or not */
  int8_t sym[DLX_SIG_QUICK_DIMS];      /* per dimension: a size symbol, -1 any extent, -2
                                          the fixed extent[d] */
  int64_t extent[DLX_SIG_QUICK_DIMS];
} dlx_sig_quick;

/* Compile parameter `param` of `s` (any kind: non-tensors are simply not quick). */
void dlx_sig_quick_plan(const dlx_sig *s, int32_t param, dlx_sig_quick *q);

/* 0: tensor `t` passes the check of its parameter; 1: dlx_sig_check_type must decide (it
 * finds the fault, or the parameter is not quick). Symbols are bound in the order the
 * full check binds them, so that a fault it then finds reads the same. */
/* Dimension d of a quick check: extent n binds or matches its symbol, or equals the
 * fixed extent. 0, or 1 when dlx_sig_check_type must decide. */
static inline __attribute__((always_inline)) int dlx_sig__quick_dim(const dlx_sig_quick *q,
                                                                   int32_t d, int64_t n,
                                                                   int32_t param,
                                                                   dlx_sig_bindings *b) {
  int32_t k = q->sym[d];
  if (k >= 0) {
    if (b->value[k] != n) { /* unbound (-1): bind it; bound: a fault */
      if (b->value[k] >= 0) return 1;
      b->value[k] = n;
      b->owner[k] = (int8_t)param;
    }
  } else if (k == -2 && n != q->extent[d]) {
    return 1;
  }
  return 0;
}

static inline int dlx_sig_check_quick(const dlx_sig_quick *q, int32_t param, const DLTensor *t,
                                      int readonly, dlx_sig_bindings *b) {
  if (dlx_sig_dtype_packed(t->dtype) != q->dtype || t->ndim != q->ndim || (readonly & q->mut))
    return 1;
  const int64_t *shape = t->shape;
  if (__builtin_expect(q->mut, 0)) { /* dlx_sig_overlaps on the way: one loop, not two */
    const int64_t *strides = t->strides; /* NULL: compact */
    for (int32_t d = 0; d < q->ndim; ++d) {
      int64_t n = shape[d];
      if ((strides && strides[d] == 0 && n > 1) || dlx_sig__quick_dim(q, d, n, param, b))
        return 1;
    }
    return 0;
  }
  for (int32_t d = 0; d < q->ndim; ++d)
    if (dlx_sig__quick_dim(q, d, shape[d], param, b)) return 1;
  return 0;
}

/* The message of a fault, without the kernel name: "'out' has n=5 where 'x' has n=4". */
void dlx_sig_fault_message(const dlx_sig *s, int32_t param, const DLTensor *t,
                           const dlx_sig_bindings *b, const dlx_sig_fault *fault, char *buf,
                           size_t len);

#endif /* DLX_SIG_H_ */
