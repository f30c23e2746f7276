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

#include "dlx/dlx.h"
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

/* ---- the real results' check: what the fake implementation promised, on every path ---- */

/* A fault code beside dlx_sig.h's: the kernel made a tensor where the declaration gives a
 * scalar result, or a scalar where it gives a tensor (TypeError). */
#define DLX_FAULT_RESULT_KIND 64

/* Check result `r` (0-based, < s->nresults) as the kernel asks for it: `t` describes it
 * (data unused), made in a call whose arguments are `args` (declared order, s->nparams
 * entries, after the arguments' check bound `b`) on `device` (the call's). The rules are
 * dlx_derive_results' (the fake shapes): a one-dtype result has that dtype; an open one
 * the dtype of the first required tensor parameter declared with the same set (else any
 * of its set); a symbol a parameter bound has that extent; "..." the dims the first "..."
 * parameter matched; a fixed extent itself; "_" anything. A symbol no present parameter
 * bound (only in results: a data-dependent size, or only in parameters given None) binds
 * here, on first sight, for the rest of the call's results. The device is one the result
 * declares (cpu, cuda, ...) or else the call's. Pure; inline costs aside, a few compares
 * per dimension. 0, or -1 with `fault` filled (DLX_FAULT_DTYPE / _RESULT_KIND: TypeError,
 * the rest ValueError). */
int dlx_derive_check_result(const dlx_sig *s, int32_t r, const DLTensor *t, const dlx_arg *args,
                            DLDevice device, dlx_sig_bindings *b, dlx_sig_fault *fault);

/* "result 0 must be f32[n] with n=4 (from 'x'), got f64[5]": the message of a fault of
 * dlx_derive_check_result (same arguments; `b` as the check left it), without the kernel's
 * name. `got_scalar` (DLX_FAULT_RESULT_KIND of a scalar result) names what the kernel
 * returned instead of a tensor ("int", "float"), else NULL. */
void dlx_derive_result_message(const dlx_sig *s, int32_t r, const DLTensor *t,
                               const char *got_scalar, const dlx_arg *args, DLDevice device,
                               const dlx_sig_bindings *b, const dlx_sig_fault *fault, char *buf,
                               size_t len);

/* ---- sharding: which dimensions may be split across devices ------------------------- */

/* A dimension's label in a sharding rule: a size symbol's index (>= 0), the batch "...",
 * or none (a fixed extent or "_": never split). */
enum { DLX_SHARD_NONE = -1, DLX_SHARD_BATCH = -2 };

typedef struct dlx_shard_rule {
  uint32_t independent; /* size symbols that may be split: those marked "n*" */
  int32_t batch;        /* 1: the batch "..." may be split too */
} dlx_shard_rule;

/* The rule of a declaration. A dimension may be split only where the kernel computes each
 * slice alone: a symbol marked "n*" (dlx_sig_parse refused marks its outputs contradict),
 * and "..." when some tensor parameter declares it and every result and every mut
 * parameter keeps it (the promise vmap's one batched call already relies on; a result
 * without it reduces over the batch). Everything else is replicated before the call. */
void dlx_derive_shard(const dlx_sig *s, dlx_shard_rule *out);

/* The label of dimension entry `d` of type `t` (DLX_SHARD_NONE when t has no brackets). */
int32_t dlx_derive_shard_label(const dlx_sig *s, const dlx_sig_type *t, int32_t d);

#endif /* DLX_DERIVE_H_ */
