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

#ifdef __cplusplus
extern "C" { /* the torch addon (C++) includes it too */
#endif

/* A plan's limits (dlx_sig.h's DLX_SIG_MAX_PARAMS and _RESULTS; dlx_invoke.c checks they
 * agree), for glue that sizes its per-call arrays without seeing dlx_sig.h. */
#define DLX_INVOKE_MAX_ARGS 64
#define DLX_INVOKE_MAX_RESULTS 16

/* The plan (dlx_sig.h); glue libraries see it only as a pointer, so this header stands
 * alone next to dlx/dlx.h (it is shipped beside the XLA handler's source). */
typedef struct dlx_sig dlx_sig;

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

/* What a successful check of a declared kernel's arguments bound: the size symbols. */
typedef struct dlx_invoke_proof {
  int64_t value[32]; /* DLX_SIG_MAX_SYMBOLS */
  /* Bit i: the caller's out[i] itself meets declared result i (and binds no symbol), so a
   * kernel's result that matches out[i] (compared on every call) meets it too: a call that
   * reuses the proof skips the declaration's check of that result. */
  uint64_t results;
} dlx_invoke_proof;

/* The checks of dlx_invoke_run without running the kernel (a declared kernel only); on
 * success `proof` (if not NULL) keeps the symbols bound. 0, or -1 with the error set. */
int dlx_invoke_check(dlx_invoke *inv, dlx_invoke_proof *proof);

/* dlx_invoke_run for arguments that already passed dlx_invoke_check with `proof`: the
 * caller vouches that they are the same plan, kinds, dtypes and shapes, its out buffers'
 * included (only data pointers differ; an XLA call site, whose shapes are static), so the
 * per-argument checks are skipped. The kernel's results are still checked: each against
 * its out buffer, and against the declaration where the proof has not shown that out
 * buffer to meet it. `proof` is read in place while the kernel runs (never written): it
 * must stay alive and unchanged until the call returns. */
int dlx_invoke_run_checked(dlx_invoke *inv, const dlx_invoke_proof *proof);

/* ---- a compiled call's inputs to arguments ------------------------------------------- */

/* One attribute of a compiled call (an XLA FFI attribute, translated by the glue). */
enum {
  DLX_ATTR_OTHER = 0, /* a type dlx never sends: refused where a parameter's value is read */
  DLX_ATTR_I64 = 1,   /* int64 scalar */
  DLX_ATTR_F64 = 2,   /* double scalar */
  DLX_ATTR_STR = 3,   /* bytes (len), not NUL-terminated */
  DLX_ATTR_I64S = 4,  /* int64 array of len */
  DLX_ATTR_F64S = 5,  /* double array of len */
};

typedef struct dlx_attr {
  const char *name; /* not NUL-terminated */
  size_t name_len;
  int32_t type;     /* DLX_ATTR_* */
  const void *data;
  int64_t len;      /* bytes (STR) or elements (arrays); 1 for scalars */
} dlx_attr;

#define DLX_BIND_STR_MAX 4096 /* bytes of str arguments of one call, NUL-terminated copies */

/* Where one call's str arguments and sequences live (the caller's stack). */
typedef struct dlx_bind_store {
  dlx_arg_seq seqs[64];
  char text[DLX_BIND_STR_MAX];
} dlx_bind_store;

/* Fill args[plan->nparams] for a declared kernel from a compiled call: attribute
 * "dlx_none" (I64, bit i: parameter i was None; absent: none was) says which parameters
 * are absent; each other tensor parameter takes the next of `ins`, or when it is `mut`
 * the next of `muts` (the output XLA aliased to that input); each other scalar parameter
 * the attribute "p_<name>" of its type (I64 for int and bool, F64, STR, I64S, F64S).
 * Every input and mut output must be taken. 0, or -1 with the reason in err (the
 * attributes come from a traced program: nothing is trusted). */
int dlx_invoke_bind(const dlx_sig *plan, const dlx_attr *attrs, int32_t nattrs,
                    DLTensor *const *ins, int32_t nins, DLTensor *const *muts, int32_t nmuts,
                    dlx_arg *args, dlx_bind_store *store, char *err, size_t errlen);

/* The attribute named `name` (NUL-terminated), or NULL. */
const dlx_attr *dlx_attr_find(const dlx_attr *attrs, int32_t nattrs, const char *name);

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
  int (*bind)(const dlx_sig *plan, const dlx_attr *attrs, int32_t nattrs, DLTensor *const *ins,
              int32_t nins, DLTensor *const *muts, int32_t nmuts, dlx_arg *args,
              dlx_bind_store *store, char *err, size_t errlen);
  int32_t (*nparams)(const dlx_sig *plan);  /* args a bound call needs */
  int32_t (*nresults)(const dlx_sig *plan); /* declared results */
  const dlx_attr *(*find)(const dlx_attr *attrs, int32_t nattrs, const char *name);
  int (*check)(dlx_invoke *inv, dlx_invoke_proof *proof);               /* appended */
  int (*run_checked)(dlx_invoke *inv, const dlx_invoke_proof *proof);   /* appended */
  const char *(*param_name)(const dlx_sig *plan, int32_t i);            /* appended */
} dlx_invoke_api;

extern const dlx_invoke_api dlx_invoke_api_v1;

/* ---- torch parity: what the torch addon gives the call path (dlx_torch_parity_hooks) -- */

/* A torch tensor reaches a direct call as torch's own in-place operator would see it
 * (src/python/tables/torch_parity.c): the exports refuse a tensor that requires grad while grad
 * mode is on, and the call path asks the rest. All with the GIL held; -1 with a Python
 * error set. A later version appends fields (check `size`). */
typedef struct dlx_torch_parity {
  uint32_t size;                                         /* sizeof(dlx_torch_parity) */
  int (*view)(void *py_object, DLTensor *out);           /* the table's view export, checked */
  int (*managed)(void *py_object, DLManagedTensorVersioned **out); /* its owned export, checked */
  int (*modes)(void);            /* 1: a torch mode or the profiler would see an operator call */
  int (*writable)(void *py_object); /* 0, or -1: torch refuses to write it in place */
  int (*bump)(void *py_object);  /* the version counter, after a write: 0 or -1 */
  /* The view export of a `mut` tensor (NULL: not offered): `view`, and *version the
   * address of the tensor's version counter (torch's std::atomic<uint32_t>) when torch
   * lets an in-place operation write the tensor (no inference tensor), which the caller
   * then increments itself after the kernel, atomically, as `bump` would; NULL: the
   * caller asks `writable` and `bump`. */
  int (*view_mut)(void *py_object, DLTensor *out, uint32_t **version);
  /* Where the call path finds how the addon's torch lays out a plain tensor, so that it
   * describes one in line, without calling `view` (dlx_plain_view.h); *plain is NULL when
   * no layout is offered, and is published with release order, read with acquire. */
  const struct dlx_torch_plain *const *plain;
} dlx_torch_parity;

/* The dtype, device and key set of plain tensors the addon has checked, each as a kind. */
typedef struct dlx_torch_plain_kind {
  uint64_t word;    /* the bits word_mask selects: this dtype and device, default policies */
  uint64_t keys;    /* the dispatch key set: one that passed every export check */
  DLDevice device;  /* what the dtype and device describe as */
  DLDataType dtype;
  int32_t bumps;    /* 1: torch lets an in-place operation write such a tensor (no
                     * inference tensor), and bumps its version counter when one does */
  int64_t itemsize; /* the dtype's size in bytes */
} dlx_torch_plain_kind;

#define DLX_TORCH_PLAIN_KINDS 4

/* Where a plain tensor's fields lie, in bytes: the same for every layout one addon
 * publishes. */
typedef struct dlx_torch_plain_at {
  int32_t impl_at;      /* Python object: the TensorImpl pointer */
  int32_t meta_at;      /* TensorImpl: the autograd metadata pointer (NULL: no grad) */
  int32_t word_at;      /* TensorImpl: the 8 bytes of word_mask */
  int32_t keys_at;      /* TensorImpl: the dispatch key set (uint64) */
  int32_t storage_at;   /* TensorImpl: the StorageImpl pointer (NULL: no storage) */
  int32_t numel_at;     /* TensorImpl: the element count (int64) */
  int32_t offset_at;    /* TensorImpl: the storage offset, in elements (int64) */
  int32_t ndim_at;      /* TensorImpl: the number of dimensions (int64) */
  int32_t sizes_at;     /* TensorImpl: the shape, when ndim <= max_ndim (int64[]) */
  int32_t strides_at;   /* TensorImpl: the strides, likewise (int64[]) */
  int32_t max_ndim;     /* dimensions the TensorImpl holds itself */
  int32_t data_at;      /* StorageImpl: the data pointer */
  int32_t checks_at;    /* StorageImpl: the 8 bytes of checks_mask */
  int32_t version_at;   /* TensorImpl: its version counter's pointer (NULL: none) */
  int32_t counter_at;   /* version counter: the count (torch's std::atomic<uint32_t>) */
} dlx_torch_plain_at;

/* A plain torch tensor, laid out as the addon's torch lays it out, with the kinds of tensor the
 * addon checked last. No size field: an addon is built from this header (its identity hashes
 * it), so both sides always agree on this struct. The addon derives every offset from its
 * torch's own accessors and checks each on probe tensors before it offers any; a published
 * struct is never written again (a new one replaces it). The first, published with the hooks,
 * has no kind yet (nkinds 0, and kinds[0] holds a key set no tensor has). A tensor is described
 * in line only when every test holds; any other goes through `view`, which refuses or describes
 * it. */
typedef struct dlx_torch_plain {
  const void *type;     /* the tensor's exact Python type (torch.Tensor) */
  const void *vtable;   /* a TensorImpl's first word when it is no subclass of TensorImpl */
  uint64_t word_mask;   /* the bits of the 8 bytes at word_at that must equal a kind's word */
  uint64_t checks_mask; /* the bits of the 8 bytes at checks_at that must be clear: the
                         * storage's checks on mutable access (copy-on-write, refusals) */
  /* 1 when a TensorImpl with autograd metadata does not require grad, as torch's own
   * requires_grad() says (every view has metadata: a slice, a transpose); 0 when it does,
   * or asking failed. NULL: a tensor with metadata goes through `view`. */
  int (*meta_no_grad)(const void *impl);
  dlx_torch_plain_at at;
  int32_t nkinds;       /* kinds[] in use, up to DLX_TORCH_PLAIN_KINDS, the newest first */
  dlx_torch_plain_kind kinds[DLX_TORCH_PLAIN_KINDS];
} dlx_torch_plain;

#ifdef __cplusplus
}
#endif

#endif /* DLX_INVOKE_H_ */
