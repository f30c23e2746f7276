/*
 * dlx_py.h - internal interfaces of the CPython layer (dlx._core).
 *
 *   tables.c   type -> how to get a tensor out of it (exchange table, provider,
 *              __dlpack__, buffer), validated and cached per type
 *   convert.c  one Python argument -> one dlx_arg, and its release
 *   call.c     the per-call path: convert, pick device and stream, run, return
 *   errors.c   exceptions by name; prefixing a pending one with where it happened
 *   library.c  dlx.Library / dlx.Kernel and kernel discovery
 *   numpy_table.c  dlx's exchange table for numpy.ndarray
 *   jax_table.c    dlx's exchange table for jax.Array (read-only exports)
 *   stream.c   the stream override (dlx.stream) and stream providers for producers
 *              without a table
 *   module.c   module init and the small module-level functions
 */
#ifndef DLX_PY_H_
#define DLX_PY_H_

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "dlx/dlx.h"
#include "dlx_sig.h"
#include "dlx_invoke.h"
#include "dlx_sync.h"

#define DLX_MAX_ARGS 64

/* How values of one Python type become tensors. */
typedef enum {
  DLX_SRC_NOT_TENSOR = 0, /* none of the ways below: a TypeError */
  DLX_SRC_TABLE = 1,      /* an exchange table (the type's own, or a registered provider) */
  DLX_SRC_DLPACK = 2,     /* the __dlpack__ protocol */
  DLX_SRC_BUFFER = 3,     /* the buffer protocol, CPU only */
} dlx_source;

#define DLX_SCRATCH_DIMS 32 /* per-argument room for shape + strides of up to 16 dims, or
                               the elements of an ints/floats argument of up to 32 */

/* A provider's own non-owning export into per-argument scratch (dlx-internal, for
 * producers such as numpy whose strides need converting): 1 done, 0 declined (use
 * the table), -1 error. */
typedef int (*dlx_scratch_view_fn)(PyObject *obj, DLTensor *out, int64_t *scratch,
                                   int32_t scratch_len, int32_t *readonly);

/* What dlx knows about one type; cached, keyed by the type and its version tag. */
typedef struct dlx_type_info {
  /* One cache line per entry: the slot of a type is then a shift, not a multiply. */
  _Alignas(64) PyTypeObject *type;
  unsigned int version_tag;     /* tp_version_tag when cached; a change invalidates */
  unsigned int meta_version_tag; /* the metaclass's: type attributes are found there too */
  unsigned int generation;      /* provider-registry generation when cached */
  dlx_source source;
  const DLPackExchangeAPI *api; /* DLX_SRC_TABLE: the validated major-1 table */
  dlx_scratch_view_fn scratch_view; /* a provider's fast view, or NULL */
  /* The table's view export when that is how this type converts (a table, no scratch
   * view, not a type the call path reads as a scalar first): the call loops take it in
   * line (dlx_convert_view). NULL otherwise. */
  int (*view)(void *py_object, DLTensor *out);
  /* DLX_CONVERT_TORCH when the table is a torch table's checked copy (torch_parity.c):
   * a conversion through it says so to the call, which then asks the parity hooks. */
  int call_flags;
  /* The table is dlx's addon's checked copy (dlx_torch_views_writable): it never exports
   * a read-only tensor, so a `mut` parameter takes the view export, not the owned one that
   * would carry the flag; and its view is well formed by construction (shape, strides,
   * ndim >= 0) and runs no Python code, so the call loops take it without the dims check
   * and keep using it for the rest of the call without a cache lookup (call.c). */
  int views_writable;
  /* ... and its parity hook's view of a `mut` tensor (dlx_torch_parity.view_mut), or NULL */
  int (*view_mut)(void *py_object, DLTensor *out, uint32_t **version);
  /* ... and where it publishes the plain layout (dlx_torch_parity.plain), or NULL when it
   * offers none; plain_known: which layout dlx knows it to be (dlx_plain_known), or 0 */
  const dlx_torch_plain *const *plain;
  int plain_known;
  PyObject *owner;              /* keeps the table's capsule (or int) alive */
#if DLX_FREE_THREADED
  struct dlx_type_info *retired_next; /* the retired list's link (in the line's padding) */
#endif
} dlx_type_info;

/* ---- tables.c ---- */
int dlx_tables_init(PyObject *module);
#define DLX_TYPE_CACHE_SIZE 128 /* power of two */
/* Table lifetime: a call uses raw table pointers for its whole duration, while only
 * the cache owns the capsules. Calls in progress (any thread) are counted, and an owner
 * the cache drops meanwhile is kept in a retired list until no call is in progress, so a
 * call never sees its table freed under it. */
#if DLX_FREE_THREADED
/* Without the GIL an entry is immutable once published: a miss fills a new one and
 * publishes its pointer (atomic exchange); the replaced one is retired, with its owner,
 * until no call is in progress. A hit is an acquire load (a plain load on x86 and ARM64's
 * ldar) and the compares: no lock. docs/design.md, "Threads". */
extern dlx_type_info *_Atomic dlx_type_cache[DLX_TYPE_CACHE_SIZE];
extern _Atomic unsigned int dlx_provider_generation;
extern _Atomic unsigned int dlx_calls_active;
extern dlx_type_info *_Atomic dlx_retired;
#else
extern dlx_type_info dlx_type_cache[DLX_TYPE_CACHE_SIZE];
extern unsigned int dlx_provider_generation;
extern unsigned int dlx_calls_active; /* changed with the GIL */
extern PyObject *dlx_retired;         /* list, or NULL when empty */
#endif
/* Discover `tp` and cache it; NULL with an exception when its table is unusable. Only
 * between dlx_call_enter and dlx_call_leave: the entry lives until the call leaves. */
const dlx_type_info *dlx_type_info_miss(PyTypeObject *tp);

/* Drop the cache's reference to `owner` now, or when the last active call ends. */
void dlx_retire_owner(PyObject *owner);
/* Release the retired owners (may run capsule destructors: Python code). */
void dlx_release_retired(void);

#if DLX_FREE_THREADED
/* seq_cst: a call's increment is ordered before its cache loads, against a writer's
 * publish before its read of the count (dlx_release_retired). */
static inline void dlx_call_enter(void) { atomic_fetch_add(&dlx_calls_active, 1); }
static inline void dlx_call_leave(void) {
  if (atomic_fetch_sub(&dlx_calls_active, 1) == 1 &&
      atomic_load_explicit(&dlx_retired, memory_order_relaxed))
    dlx_release_retired();
}
#define dlx_tag_of(tp) _Py_atomic_load_uint_relaxed(&(tp)->tp_version_tag)
#else
static inline void dlx_call_enter(void) { ++dlx_calls_active; }
static inline void dlx_call_leave(void) {
  if (--dlx_calls_active == 0 && dlx_retired) dlx_release_retired();
}
#define dlx_tag_of(tp) ((tp)->tp_version_tag)
#endif

/* Whether `tp`'s version tag stands for its attributes as they are. Up to 3.12 CPython sets
 * Py_TPFLAGS_VALID_VERSION_TAG with the tag and clears both when the type changes; 3.13
 * keeps the flag only as a never-set legacy name (reading it would leave every type
 * uncached) and zeroes the tag alone. */
static inline int dlx_version_tag_valid(PyTypeObject *tp) {
#if PY_VERSION_HEX < 0x030D0000
  return PyType_HasFeature(tp, Py_TPFLAGS_VALID_VERSION_TAG) && tp->tp_version_tag != 0;
#else
  return dlx_tag_of(tp) != 0;
#endif
}

static inline size_t dlx_type_index(PyTypeObject *tp) {
  return ((uintptr_t)tp >> 4) & (DLX_TYPE_CACHE_SIZE - 1);
}

/* The cached info of `tp`: on a hit, a few compares and no Python lookup. An entry is
 * only kept with both tags valid, hence non-zero, and CPython zeroes a type's tag when
 * it invalidates it and never hands the same tag out twice: equal tags are valid ones. */
static inline const dlx_type_info *dlx_type_info_hit(PyTypeObject *tp) {
#if DLX_FREE_THREADED
  const dlx_type_info *e =
      atomic_load_explicit(&dlx_type_cache[dlx_type_index(tp)], memory_order_acquire);
  if (e && e->type == tp && e->version_tag == dlx_tag_of(tp) &&
      e->meta_version_tag == dlx_tag_of(Py_TYPE(tp)))
    return e;
#else
  dlx_type_info *e = &dlx_type_cache[dlx_type_index(tp)];
  /* (dlx_register_provider empties every entry: generations need no compare here) */
  if (e->type == tp && e->version_tag == tp->tp_version_tag &&
      e->meta_version_tag == Py_TYPE(tp)->tp_version_tag)
    return e;
#endif
  return NULL;
}

static inline const dlx_type_info *dlx_type_info_get(PyTypeObject *tp) {
  const dlx_type_info *e = dlx_type_info_hit(tp);
  return e ? e : dlx_type_info_miss(tp);
}
/* The usable major-1 table at or behind `head` (walking prev_api); NULL with an
 * exception naming `who` when there is none or a required function is NULL. */
const DLPackExchangeAPI *dlx_table_validate(const DLPackExchangeAPIHeader *head, const char *who);
/* Validate a capsule as a usable major-1 table; NULL with an exception naming `who`. */
const DLPackExchangeAPI *dlx_table_from_capsule(PyObject *capsule, const char *who);
/* Register a provider table for a type that cannot carry the attribute;
 * `view` is optional (dlx's own providers). */
int dlx_register_provider(PyTypeObject *tp, PyObject *capsule, dlx_scratch_view_fn view);
/* current_work_stream for dlx's own tables of host-only frameworks (numpy, JAX): NULL, no stream */
int dlx_no_stream(DLDeviceType device_type, int32_t device_id, void **out);
PyObject *dlx_table_capsule(const DLPackExchangeAPI *api);
/* The table a type brought for the one dlx uses (a torch table for its checked copy:
 * torch_parity.c); `api` itself otherwise. */
const DLPackExchangeAPI *dlx_table_shown(const DLPackExchangeAPI *api);

/* ---- torch_parity.c: torch tensors as torch's own in-place operators see them ---- */
int dlx_torch_parity_init(PyObject *module);
/* The table dlx uses for a table torch.Tensor brought: a checked copy of torch's native
 * table or of dlx's addon table, else `api` itself (cold: once per type). */
const DLPackExchangeAPI *dlx_torch_checked_table(const DLPackExchangeAPI *api);
/* 1 when `api` is one of those checked copies. */
int dlx_torch_is_checked(const DLPackExchangeAPI *api);
/* 1 when `api` never exports a read-only tensor: the addon's checked copy (its exports
 * set no flags; torch has no read-only tensors, and an inference tensor outside inference
 * mode is refused as not writable before a kernel runs). */
int dlx_torch_views_writable(const DLPackExchangeAPI *api);
/* The addon's table and its parity hooks (addon.c, when it loads the addon). */
void dlx_torch_parity_addon(const DLPackExchangeAPI *api, const dlx_torch_parity *hooks);
/* dlx._core.OperatorPath: a torch call that only the operator's path keeps exact (a tensor
 * that requires grad under grad mode, a mode watching a registered kernel); dlx._trace
 * hands it to dlx.torch_ops. */
extern PyObject *dlx_torch_operator_path;
/* The checked copies, each its table first: a table's hooks are one range test away. */
/* (Aligned to a power of two: dlx_torch_hooks_of's "is a table's start" test is then a
 * mask, not a division, 6 Ir less per `mut` torch tensor and hook.) */
typedef struct __attribute__((aligned(128))) dlx_torch_checked {
  DLPackExchangeAPI table;
  DLX_ATOMIC(const dlx_torch_parity *) hooks; /* published after `table` (release) */
  const DLPackExchangeAPI *of;               /* the table it checks */
} dlx_torch_checked;
_Static_assert((sizeof(dlx_torch_checked) & (sizeof(dlx_torch_checked) - 1)) == 0,
               "dlx_torch_checked: a power-of-two size");
#define DLX_TORCH_CHECKED_MAX 4 /* the native table, an overlay over it, the addon, a spare */
extern dlx_torch_checked dlx_torch_checked_tables[DLX_TORCH_CHECKED_MAX];
/* The hooks of a checked copy (NULL for other tables). */
static inline const dlx_torch_parity *dlx_torch_hooks_of(const DLPackExchangeAPI *api) {
  uintptr_t at = (uintptr_t)api - (uintptr_t)dlx_torch_checked_tables;
  if (at >= sizeof dlx_torch_checked_tables || at % sizeof(dlx_torch_checked)) return NULL;
  return dlx_acquire_load(&((const dlx_torch_checked *)(const void *)api)->hooks);
}
/* This thread runs a kernel for its own operator (Kernel._call_direct): no reroute. */
extern _Thread_local int dlx_torch_direct;
extern DLX_ATOMIC(unsigned long long) dlx_stat_type_lookups; /* cache misses, for tests */

/* ---- numpy_table.c ---- */
/* Imports numpy's C API and returns dlx's ndarray table; NULL with an exception. */
const DLPackExchangeAPI *dlx_numpy_table(void);
/* The numpy provider's fast view (see dlx_scratch_view_fn). */
int dlx_numpy_scratch_view(PyObject *obj, DLTensor *out, int64_t *scratch, int32_t scratch_len,
                           int32_t *readonly);
/* 1 when `obj` is an ndarray whose dtype DLPack cannot express (object, structured,
 * non-native byte order...), else 0; never raises. For error messages. */
int dlx_numpy_dtype_inexpressible(PyObject *obj);
/* dlx's ndarray table (what dlx_numpy_table returns once numpy's C API is imported). */
extern const DLPackExchangeAPI *const dlx_numpy_api;
/* numpy.ndarray, once the type cache found it converted by dlx's numpy provider (tables.c),
 * else NULL. An immutable type under an immutable metatype: nothing but a provider's
 * registration (which clears this) changes how its objects convert, so every call starts
 * vouched for it (call.c) and views its arrays in line without a cache lookup. */
extern DLX_ATOMIC(PyTypeObject *) dlx_numpy_vouched;

/* ---- jax_table.c: dlx's exchange table for jax.Array (module function _install_jax) ---- */
int dlx_jax_init(PyObject *module);
/* The table _install_jax registers, once a JAX with device backends was seen (else NULL):
 * convert.c sends a JAX array on a device with streams down the __dlpack__ producer path
 * instead (the table cannot pass a stream). */
extern const DLPackExchangeAPI *dlx_jax_device_table;

/* One argument slot: what must be released after the kernel. */
typedef struct dlx_slot {
  DLTensor view;                      /* storage for a non-owning view */
  union {
    int64_t scratch[DLX_SCRATCH_DIMS]; /* its shape and strides, when the producer needs room */
    double fscratch[DLX_SCRATCH_DIMS]; /* a floats argument's elements */
  };
  dlx_arg_seq seq;                    /* str / ints / floats: what value.seq points to */
  void *heap;                         /* ints / floats beyond the scratch (PyMem_Raw) */
  double *as_floats;                  /* ints read by dlx_arg_floats, converted once */
  int64_t *heap_strides;              /* compact strides beyond the scratch (ndim > 16) */
  DLManagedTensorVersioned *managed;  /* owned export: deleter after the call */
  DLManagedTensor *legacy;            /* owned legacy export: deleter after the call */
  void *buffer;                       /* buffer-protocol block (convert.c) */
  const DLPackExchangeAPI *api;       /* the table the tensor came through, or NULL */
  uint32_t *version;                  /* a `mut` torch tensor's counter (view_mut), when
                                         the call's `versions` mask has the slot's bit */
} dlx_slot;

/* ---- convert.c ---- */
/* Convert args[i] into arg/slot: 0 or a set of DLX_CONVERT_* bits; -1 with an exception
 * (not yet saying which kernel and argument: the caller prefixes that), and then the slot
 * may own something exactly when arg->kind is DLX_ARG_TENSOR. A slot converted with any
 * bit but DLX_CONVERT_NUMPY is released after the call (dlx_release_slot for tensors,
 * dlx_release_seq for ints/floats); one converted with 0 or DLX_CONVERT_NUMPY alone owns
 * nothing, and its other fields are not read again. */
#define DLX_CONVERT_OWNS 1  /* the slot owns an export or a block */
/* A __dlpack__ producer on a device, whose export waits for the call's stream (the slot's
 * view holds only its device until dlx_export_deferred); released like an owner. */
#define DLX_CONVERT_DEFERRED 2
#define DLX_CONVERT_NUMPY 4 /* a view by numpy's fast export, for a type the cache vouched
                               for, with nothing but dlx's own code run since: the call may
                               view later arrays of the same type in line (dlx_numpy.h) */
/* A torch tensor through a checked table (torch_parity.c): the call asks the parity hooks
 * (modes, writability, version counters). Owns nothing by itself. */
#define DLX_CONVERT_TORCH 8
#define DLX_CONVERT_RELEASE (DLX_CONVERT_OWNS | DLX_CONVERT_DEFERRED) /* bits with a release */
int dlx_convert_arg(PyObject *obj, int32_t index, dlx_arg *arg, dlx_slot *slot);
/* Export a deferred producer with __dlpack__(stream=stream) (NULL: no stream): 1 (the
 * slot owns the export), -1 with an exception (the slot may own it: release it). */
int dlx_export_deferred(PyObject *obj, PyObject *stream, dlx_arg *arg, dlx_slot *slot);
/* A slot dlx_convert_arg left waiting for dlx_export_deferred (no owner, no table). */
static inline int dlx_slot_deferred(const dlx_arg *arg, const dlx_slot *slot) {
  return arg->kind == DLX_ARG_TENSOR && arg->value.tensor == &slot->view && !slot->api &&
         !slot->managed && !slot->legacy && !slot->buffer;
}
/* obj.__dlpack__(stream=stream, max_version=(1, 3)); `stream` NULL: not passed. With
 * `fallback`, a TypeError (a producer older than those keywords) is retried with fewer:
 * the stream alone, then none; a type that said "keyword" is remembered. */
PyObject *dlx_call_dlpack(PyObject *obj, PyObject *stream, int fallback);
/* A tensor of a table type through the table's owned export (flags included), whatever
 * view export the table has: for `mut` parameters, whose read-only tensors are refused.
 * dlx_convert_arg's results (1: the slot owns the export). */
int dlx_convert_owned(const DLPackExchangeAPI *api, PyObject *obj, dlx_arg *arg,
                      dlx_slot *slot);
/* The cold ends of dlx_convert_view: the export failed; the tensor lacks strides or is
 * malformed. Same results as dlx_convert_arg. */
int dlx_view_failed(dlx_arg *arg, dlx_slot *slot);
int dlx_view_fix_dims(dlx_arg *arg, dlx_slot *slot);
/* dlx_convert_arg for a type whose cache entry (a hit, `info`) has a view export: the
 * same conversion, in line; with_flags (a constant): the entry's call_flags too (only
 * signed kernels have torch parity work: `mut` parameters, operators). */
static inline int dlx_convert_view(const dlx_type_info *info, PyObject *obj, dlx_arg *arg,
                                   dlx_slot *slot, int with_flags) {
  int (*view)(void *, DLTensor *) = info->view; /* `info` may be refilled by the export */
  slot->api = info->api;
  arg->kind = DLX_ARG_TENSOR; /* also when it fails: the caller then releases the slot */
  arg->readonly = 0;
  arg->value.tensor = &slot->view;
  int flags = with_flags ? info->call_flags : 0; /* with_flags: a constant, for signed calls */
  if (__builtin_expect(view(obj, &slot->view) != 0, 0)) return dlx_view_failed(arg, slot);
  const DLTensor *t = &slot->view;
  if (__builtin_expect(t->strides && t->shape && t->ndim >= 0, 1)) return flags;
  int rc = dlx_view_fix_dims(arg, slot);
  return rc < 0 ? rc : rc | flags;
}
/* An exact int of one digit (most ints): 1 with its value, read in place; else 0. */
static inline int dlx_long_compact(PyObject *obj, int64_t *out) {
#if PY_VERSION_HEX >= 0x030C0000
  if (!PyUnstable_Long_IsCompact((PyLongObject *)obj)) return 0;
  *out = PyUnstable_Long_CompactValue((PyLongObject *)obj);
#else
  if ((size_t)(Py_SIZE(obj) + 1) > 2) return 0; /* size -1, 0 or 1: the sign times one digit */
  *out = Py_SIZE(obj) * (int64_t)((PyLongObject *)obj)->ob_digit[0];
#endif
  return 1;
}
void dlx_release_slot(dlx_slot *slot);
/* str -> DLX_ARG_STR (no copy: the UTF-8 the str object caches). -1 with an exception. */
int dlx_convert_str(PyObject *obj, int32_t index, dlx_arg *arg, dlx_slot *slot);
/* tuple/list -> DLX_ARG_INTS or DLX_ARG_FLOATS (`want`; 0: whichever the elements make).
 * 0; -1 with an exception; -2 without one when element *bad has the wrong kind. Holds
 * memory only when it returned 0 (dlx_release_seq frees it). */
int dlx_convert_seq(PyObject *obj, int want, dlx_arg *arg, dlx_slot *slot, Py_ssize_t *bad);

/* 1 when `obj` is a complex number (complex, numpy.complex64/128: numbers.Complex but not
 * numbers.Real), which a float or int must not take as its real part; -1 with an error. */
int dlx_is_complex(PyObject *obj);
static inline void dlx_release_seq(dlx_slot *slot) {
  if (slot->heap) PyMem_RawFree(slot->heap), slot->heap = NULL;
  if (slot->as_floats && slot->as_floats != slot->fscratch + slot->seq.len)
    PyMem_RawFree(slot->as_floats);
  slot->as_floats = NULL;
}

/* ---- call.c ---- */
/* What a call needs of a kernel; built once at load (library.c). */
typedef struct dlx_kernel_info {
  dlx_kernel_fn fn;
  const char *name;       /* owned by the record; the library is never unloaded */
  const dlx_sig *sig;     /* the declared signature's plan, or NULL */
  PyObject **param_names; /* sig->nparams interned names */
  PyObject **defaults;    /* sig->nparams default values, NULL where required */
  const dlx_sig_quick *quick; /* sig->nparams quick checks (dlx_sig_quick_plan) */
  PyObject *self;         /* the dlx.Kernel holding this (borrowed), for dlx._trace */
  /* dlx.torch.register made it an operator: under a torch mode or the profiler a direct
   * call takes the operator's path (torch_parity.c). Written once, before any such call. */
  DLX_ATOMIC(int) torch_op;
  uint64_t mut_params; /* bit i: parameter i is a `mut` tensor (DLX_MAX_ARGS <= 64) */
} dlx_kernel_info;

PyObject *dlx_call_kernel(const dlx_kernel_info *k, PyObject *const *args, Py_ssize_t nargs,
                          PyObject *kwnames);
/* Scalar parameter i converted and checked as a call does it (staged calls' attributes). */
PyObject *dlx_convert_scalar(const dlx_kernel_info *k, int32_t i, PyObject *obj);

/* ---- addon.c: backend selection, addon build and load (bindings of src/core) ---- */
int dlx_addon_init(PyObject *module);

/* ---- providers.c: runtime stream providers and the stream overlay ---- */
int dlx_providers_init(PyObject *module);
/* The current stream of a device on this thread, asked of the active backend's
 * framework entry point; NULL for devices no backend claims. Needs the GIL. */
int dlx_provider_current_stream(DLDeviceType device_type, int32_t device_id, void **out);

/* ---- stream.c: `with dlx.stream(s):` and dlx.register_stream_provider ---- */
int dlx_stream_init(PyObject *module);
/* Overrides in force on any thread plus deferred producers not yet exported (changed
 * with the GIL): while 0, a call looks no further than its tables (one load). A call that
 * deferred producers takes them off again (dlx_stream_settle). */
extern DLX_ATOMIC(unsigned int) dlx_stream_pending; /* relaxed: a thread's own changes
                                                        are what its calls need to see */
/* Take the deferred producers among argv[0..n) off dlx_stream_pending. */
void dlx_stream_settle(const dlx_arg *argv, const dlx_slot *slots, int32_t n);
/* 1 and *out: this thread's override; 0: none. */
int dlx_stream_override(uintptr_t *out);
/* The stream provider for a device producer without a table: one registered for its type
 * (or a base), else the built-in one for CuPy arrays. 1 with *fn, 0
 * none, -1 with an exception. *fn is the caller's: dlx_stream_provider_call or
 * dlx_stream_provider_release takes it (another thread may remove it from the registry). */
int dlx_stream_provider_find(PyObject *obj, PyObject **fn);
void dlx_stream_provider_release(PyObject *fn);
/* Ask provider `fn` (from dlx_stream_provider_find, taken) for device `dev`'s stream: 0 and
 * *out, -1 with an exception (TypeError when it did not return an int). */
int dlx_stream_provider_call(PyObject *fn, DLDevice dev, uintptr_t *out);

/* ---- library.c ---- */
int dlx_library_init(PyObject *module);
PyObject *dlx_load(PyObject *self, PyObject *path);
/* The library open (and checked) as *fd, loaded through that descriptor, shown as
 * `shown`. The descriptor stays open with the library (dlx_cache_dir.h says why); it may
 * have been moved to another number. */
PyObject *dlx_load_fd(int *fd, PyObject *shown);

/* ---- build.c: dlx.build (bindings of src/core/toolchain/compile/dlx_kernel_build) ---- */
int dlx_build_init(PyObject *module);
/* A progress line to stderr; callable without the GIL. */
void dlx_say_stderr(void *ctx, const char *line);

/* ---- errors.c ---- */
/* Raise `kind` (a builtin exception name) with `message`; unknown kinds → RuntimeError;
 * either may be NULL. */
void dlx_raise_named(const char *kind, const char *message);
/* The same, the message preceded by `where` ("saxpy(): "). */
void dlx_raise_named_at(const char *where, const char *kind, const char *message);
/* Prefix the pending exception's message (PyUnicode_FromFormat `fmt`), keeping its
 * class; a RuntimeError when none is pending. Returns -1. */
int dlx_prefix_error(const char *fmt, ...);

#endif /* DLX_PY_H_ */
