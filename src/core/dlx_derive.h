/*
 * dlx_derive.h - what a compiler needs from a declaration, derived once: the operator
 * schema (torch) and, per declared result, its dtype and shape in terms of the inputs
 * (the "fake" / abstract evaluation of torch.compile, torch.export and jax.jit).
 * One derivation for every compiler; pure C over the parsed plan (dlx_sig.h), no Python.
 */
#ifndef DLX_DERIVE_H_
#define DLX_DERIVE_H_

#include <stddef.h>
#include <stdint.h>

#include "dlx_sig.h"

/* The torch schema of kernel `name`:
 *   name(Tensor x, Tensor(a!) y, SymInt n=3, float a=2., str s="x", SymInt[] d=[1, 2],
 *        float[] f=[], Tensor? o=None) -> (Tensor, Tensor)
 * 0 and the text in buf, or -1 and why the declaration cannot be an operator in `why`
 * (a scalar result, an optional mut tensor alongside results, a text too long, ...). */
int dlx_derive_schema(const dlx_sig *s, const char *name, char *buf, size_t len, char *why,
                      size_t whylen);

typedef enum {
  DLX_DERIVE_FIXED = 0, /* extent */
  DLX_DERIVE_DIM = 1,   /* the extent of dimension `dim` of parameter `param` */
  DLX_DERIVE_BATCH = 2, /* the dimensions the "..." of parameter `param` matched */
  DLX_DERIVE_FRESH = 3, /* data-dependent: a symbol only in results (sym), or "_" (sym -1) */
} dlx_derive_kind;

/* A position in an input tensor: dimension `dim` from the front, or, when from_back, the
 * dim-th from the back (0: the last) because the parameter's "..." comes before it. */
typedef struct dlx_derive_pos {
  int16_t param, dim;
  int8_t from_back;
} dlx_derive_pos;

typedef struct dlx_derived_dim {
  int32_t kind;       /* dlx_derive_kind */
  int32_t sym;        /* the size symbol it stands for, or -1 */
  dlx_derive_pos at;  /* DIM: where the symbol is first declared; BATCH: at.param */
  int64_t extent;     /* FIXED */
} dlx_derived_dim;

typedef struct dlx_derived_result {
  int32_t dtype_param; /* >= 0: the dtype of this tensor parameter; -1: `dtype` */
  DLDataType dtype;
  int32_t ndims;       /* entries from dims[dim0] on ("..." counts as one BATCH entry) */
  int32_t dim0;
} dlx_derived_result;

/* A size symbol's later use: it must equal its first declared position. */
typedef struct dlx_derived_eq {
  int32_t sym;
  dlx_derive_pos first, other;
} dlx_derived_eq;

/* Both bounded by the plan's dimension entries over all its types. */
#define DLX_DERIVE_MAX_DIMS DLX_SIG_MAX_DIMS
#define DLX_DERIVE_MAX_EQS DLX_SIG_MAX_DIMS

typedef struct dlx_derived {
  int32_t nresults, ndims, neqs;
  dlx_derived_result results[DLX_SIG_MAX_RESULTS];
  dlx_derived_dim dims[DLX_DERIVE_MAX_DIMS];
  dlx_derived_eq eqs[DLX_DERIVE_MAX_EQS];
} dlx_derived;

/* 0 and `out` filled, or -1 and why the results cannot be derived (a non-tensor result, a
 * result without brackets, an open dtype no parameter shares, a "..." result and no "..."
 * parameter). A result's "..." takes the dims matched by the first "..." parameter. */
int dlx_derive_results(const dlx_sig *s, dlx_derived *out, char *why, size_t whylen);

#endif /* DLX_DERIVE_H_ */
