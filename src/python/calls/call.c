/*
 * call.c - the per-call path, top to bottom:
 *
 *   bind positional and keyword arguments to the declared parameters (signed kernels)
 *   ->  convert each argument (convert.c), checking it against the plan (dlx_sig.h)
 *   ->  the call's device is the first non-CPU tensor's  ->  its table's
 *   current_work_stream, once, on this thread  ->  the kernel (without the GIL when it
 *   declares nogil)  ->  its results  ->  every owned export's deleter, exactly once.
 *
 * Everything a call needs lives on the C stack; nothing is allocated here (ints/floats
 * arguments longer than DLX_SCRATCH_DIMS are the exception). Every error raised during a
 * call starts with "<kernel>(): ".
 *
 * Unsigned and signed kernels have loops of their own (call_unsigned, call_signed), so
 * that the unsigned one pays nothing for signatures; both take arrays of the vouched
 * ndarray type (numpy_in_line), exact floats and small ints in line, and every other
 * object through one conversion (convert_rest: numpy
 * arrays and table views in line, the rest by dlx_convert_arg). What follows the loop is
 * shared (run_call).
 */
#include <string.h>

#include "dlx_gil.h"
#include "dlx_py.h"

#include "dlx_core.h"
#include "dlx_derive.h"
#include "dlx_numpy.h"
#include "dlx_plain_view.h"
#include "dlx_stream.h"
#include "dlx_suggest.h"

_Static_assert(sizeof(Py_ssize_t) == sizeof(int64_t), "buffer strides are read as int64_t");

#define MAX_RESULTS 16 /* values one call returns (a tuple beyond one) */

/* One dlx_return_*: a Python object, or a tensor imported after the kernel succeeded. */
typedef struct result {
  PyObject *obj;
  DLManagedTensorVersioned *tensor;
  const DLPackExchangeAPI *api; /* the table that allocated `tensor` */
} result;

/* The runtime's view of a call; `pub` is what the kernel sees. */
typedef struct call_state {
  dlx_call pub;
  const dlx_kernel_info *k;
  /* Zeroed by state_init, adjacent so that the compiler clears them in two stores. */
  int failed;                         /* a Python exception is pending (or carried, below) */
  int released;                       /* the GIL is released (nogil): services take it */
  int prefixed;                       /* ... and its message names the kernel already */
  int flags;                          /* DLX_CONVERT_* of the arguments dlx_convert_arg took */
  int32_t nresults;
  int32_t nowners;                    /* slots to release after the call: owners[] */
  /* signed calls: the `mut` slots whose version counter the call bumps itself
   * (dlx_slot.version); only read when the kernel has `mut` parameters */
  uint64_t versions;
  /* A type whose table is dlx's addon (views_writable: a view that runs no Python code
   * and is well formed), met in this call: its next tensors take the view without the
   * cache lookup. Its table is a checked copy, never rewritten once published (the cache
   * entry may be refilled meanwhile: only the table is read). In the state, not beside
   * the vouched ndarray: numpy's loop keeps its registers. */
  PyTypeObject *own_type;
  const DLPackExchangeAPI *own_api;                    /* read once own_type is set */
  int (*own_view_mut)(void *, DLTensor *, uint32_t **); /* the entry's view_mut, likewise */
  const dlx_torch_plain *own_plain; /* its plain layout for this call (NULL: not offered) */
  int own_known;                    /* ... and which layout it is (dlx_plain_known) */
  PyObject *const *objs;              /* the arguments, in argv's order (arg_readonly) */
  int32_t max_results;
  /* nogil: an exception a service raised, on whichever thread called it, carried to the
   * calling thread (a worker's thread state may not outlive the service) */
  PyObject *exc_type, *exc_value, *exc_tb;
  int32_t owners[DLX_MAX_ARGS];
  result results[MAX_RESULTS];
  dlx_arg argv[DLX_MAX_ARGS];
  dlx_slot slots[DLX_MAX_ARGS];       /* per-argument storage (dlx_arg_floats of ints) */
  /* Size symbols (signed kernels; unset otherwise). A member, not a pointer to a local:
   * the store that pointer took pays for `objs`. */
  dlx_sig_bindings binds;
} call_state;

/* Runtime services a nogil kernel calls take the GIL themselves, on whichever thread
 * calls them (the kernel's own, or a worker it started), and leave no exception behind on
 * that thread: it travels in the call state to the thread that made the call. */
typedef struct service {
  PyGILState_STATE gil;
} service;

static inline void service_enter(call_state *st, service *sv) {
  sv->gil = st->released ? PyGILState_Ensure() : PyGILState_LOCKED;
}

static inline void service_leave(call_state *st, service *sv) {
  if (!st->released) return;
  if (PyErr_Occurred()) {
    if (!st->exc_type)
      PyErr_Fetch(&st->exc_type, &st->exc_value, &st->exc_tb);
    else
      PyErr_Clear(); /* the first error is the cause; keep it */
  }
  PyGILState_Release(sv->gil);
}

/* The exception class a dlx_error kind names: a builtin ("ValueError"), or a dotted
 * path ("mypkg.errors.ShapeError") imported on use; NULL without an exception set. */
static PyObject *exception_class(const char *kind) {
  if (!kind) return NULL;
  const char *dot = strrchr(kind, '.');
  if (!dot) {
    PyObject *builtins = PyEval_GetBuiltins(); /* borrowed */
    PyObject *name = builtins ? PyUnicode_FromString(kind) : NULL, *cls = NULL;
    if (!name || PyDict_GetItemRef(builtins, name, &cls) < 0) PyErr_Clear();
    Py_XDECREF(name);
    if (cls && PyExceptionClass_Check(cls)) return cls;
    Py_XDECREF(cls);
    return NULL;
  }
  /* The longest importable module prefix, then attributes ("pkg.mod.Outer.Inner"). */
  for (const char *cut = dot; cut > kind; --cut) {
    if (*cut != '.') continue;
    PyObject *modname = PyUnicode_FromStringAndSize(kind, cut - kind);
    PyObject *obj = modname ? PyImport_Import(modname) : NULL;
    Py_XDECREF(modname);
    if (!obj) {
      PyErr_Clear();
      continue;
    }
    const char *p = cut + 1;
    while (obj && *p) {
      const char *e = strchr(p, '.');
      PyObject *attr = PyUnicode_FromStringAndSize(p, e ? e - p : (Py_ssize_t)strlen(p));
      PyObject *next = attr ? PyObject_GetAttr(obj, attr) : NULL;
      Py_XDECREF(attr);
      Py_DECREF(obj);
      obj = next;
      p = e ? e + 1 : p + strlen(p);
    }
    if (obj && PyExceptionClass_Check(obj)) return obj;
    Py_XDECREF(obj);
    PyErr_Clear();
    return NULL;
  }
  return NULL;
}

void dlx_raise_named_at(const char *where, const char *kind, const char *message) {
  if (!message) message = "(no message)"; /* SetError(ctx, NULL, NULL) is a producer bug */
  PyObject *cls = exception_class(kind);
  if (cls) {
    /* Built here, not by PyErr_Format: a class whose constructor wants other arguments
     * (UnicodeDecodeError, ExceptionGroup, a user class) or returns something else falls
     * back to RuntimeError like an unknown kind, instead of raising its TypeError. */
    PyObject *text = PyUnicode_FromFormat("%s%s", where, message);
    PyObject *exc = text ? PyObject_CallOneArg(cls, text) : NULL;
    Py_XDECREF(text);
    if (exc && PyObject_TypeCheck(exc, (PyTypeObject *)cls)) {
      PyErr_SetObject(cls, exc);
      Py_DECREF(exc);
      Py_DECREF(cls);
      return;
    }
    Py_XDECREF(exc);
    Py_DECREF(cls);
    if (PyErr_ExceptionMatches(PyExc_MemoryError)) return;
    PyErr_Clear();
  }
  /* unknown kinds still say what they were */
  PyErr_Format(PyExc_RuntimeError, "%s%s: %s", where, kind ? kind : "error", message);
}

void dlx_raise_named(const char *kind, const char *message) {
  dlx_raise_named_at("", kind, message);
}

/* Raise `kind` with "<kernel>(): message" (message may be NULL). */
static void raise_in_call(call_state *st, const char *kind, const char *message) {
  /* the whole name, however long (a cut one would not say which kernel) */
  size_t n = strlen(st->k->name);
  char buf[256], *where = n + 5 <= sizeof buf ? buf : PyMem_Malloc(n + 5);
  st->failed = 1;
  st->prefixed = 1;
  if (!where) {
    PyErr_NoMemory();
    return;
  }
  memcpy(where, st->k->name, n);
  memcpy(where + n, "(): ", 5);
  if (message && strncmp(message, where, n + 4) == 0)
    where[0] = '\0'; /* the kernel named itself already */
  dlx_raise_named_at(where, kind, message);
  if (where != buf) PyMem_Free(where);
}

/* With the GIL held. */
static int verror_locked(call_state *st, const char *kind, const char *fmt, va_list ap) {
  if (st->failed) return -1; /* the first error is the cause; keep it */
  char msg[1024];
  PyOS_vsnprintf(msg, sizeof msg, fmt ? fmt : "(no message)", ap);
  raise_in_call(st, kind, msg);
  return -1;
}

static int rt_verror(dlx_call *call, const char *kind, const char *fmt, va_list ap) {
  call_state *st = (call_state *)call;
  service sv;
  service_enter(st, &sv);
  verror_locked(st, kind, fmt, ap);
  service_leave(st, &sv);
  return -1;
}

/* An error of the runtime itself, with the GIL held. */
static int fail(call_state *st, const char *kind, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = verror_locked(st, kind, fmt, ap);
  va_end(ap);
  return rc;
}

/* The next result slot, or NULL after an error (more results than declared). With the
 * GIL held. */
static result *next_result(call_state *st) {
  if (st->failed) return NULL;
  if (st->nresults >= st->max_results) {
    if (st->k->sig)
      fail(st, "RuntimeError", "returned more than the %d result(s) its signature declares",
           (int)st->max_results);
    else
      fail(st, "RuntimeError", "returned more than %d values", MAX_RESULTS);
    return NULL;
  }
  result *r = &st->results[st->nresults++];
  r->obj = NULL;
  r->tensor = NULL;
  return r;
}

/* A result the declaration refuses (dlx_derive_check_result's fault), raised. With the GIL
 * held; error path only. */
static int result_refused(call_state *st, const DLTensor *t, const char *got_scalar,
                          const dlx_sig_fault *fault) {
  char msg[768];
  dlx_derive_result_message(st->k->sig, st->nresults, t, got_scalar, st->argv, st->pub.device,
                            &st->binds, fault, msg, sizeof msg);
  return fail(st, fault->code == DLX_FAULT_DTYPE || fault->code == DLX_FAULT_RESULT_KIND
                      ? "TypeError" : "ValueError", "%s", msg);
}

static int return_object(call_state *st, int is_float, int64_t i, double f) {
  service sv;
  service_enter(st, &sv);
  int rc = -1;
  if (__builtin_expect(!st->failed && st->k->sig && st->nresults < st->k->sig->nresults &&
                           st->k->sig->results[st->nresults].kind == DLX_SIG_TENSOR, 0)) {
    dlx_sig_fault fault = {DLX_FAULT_RESULT_KIND, -1, -1};
    result_refused(st, NULL, is_float ? "float" : "int", &fault);
    service_leave(st, &sv);
    return -1;
  }
  result *r = next_result(st);
  if (r) {
    r->obj = is_float ? PyFloat_FromDouble(f) : PyLong_FromLongLong(i);
    if (r->obj)
      rc = 0;
    else
      st->failed = 1;
  }
  service_leave(st, &sv);
  return rc;
}

static int rt_return_int(dlx_call *call, int64_t value) {
  return return_object((call_state *)call, 0, value, 0.0);
}

static int rt_return_float(dlx_call *call, double value) {
  return return_object((call_state *)call, 1, 0, value);
}

/* SetError of the DLPack allocator contract. */
static void alloc_set_error(void *ctx, const char *kind, const char *message) {
  call_state *st = ctx;
  if (st->failed) return;
  raise_in_call(st, kind, message); /* either may be NULL from a sloppy producer */
}

/* The table of the first tensor argument that came with one: it allocates the results. */
static const DLPackExchangeAPI *first_table(const call_state *st) {
  for (int32_t i = 0; i < st->pub.num_args; ++i)
    if (st->argv[i].kind == DLX_ARG_TENSOR && st->slots[i].api) return st->slots[i].api;
  return NULL;
}

static int alloc_result(call_state *st, DLDevice device, int32_t ndim, const int64_t *shape,
                        int64_t *dims, int64_t *strides, DLDataType dtype, DLTensor **out);

static int return_new_tensor(call_state *st, DLDevice device, int32_t ndim,
                             const int64_t *shape, DLDataType dtype, DLTensor **out) {
  /* No limit of dlx's own on ndim, as for arguments (convert.c): the table's allocator
   * refuses what its framework cannot hold (numpy: 64 dimensions, 32 before numpy 2). */
  if (ndim < 0 || (ndim && !shape))
    return fail(st, "ValueError", "dlx_return_new_tensor: invalid ndim %d", (int)ndim);
  const dlx_sig *sig = st->k->sig;
  if (sig && st->nresults < sig->nresults && !st->failed) {
    /* the declared result, before anything is allocated: what every path checks */
    DLTensor asked = {.data = NULL, .device = device, .ndim = ndim, .dtype = dtype,
                      .shape = (int64_t *)shape, .strides = NULL, .byte_offset = 0};
    dlx_sig_fault fault;
    if (__builtin_expect(dlx_derive_check_result(sig, st->nresults, &asked, st->argv,
                                                 st->pub.device, &st->binds, &fault), 0))
      return result_refused(st, &asked, NULL, &fault);
  }
  int64_t local[2 * DLX_SCRATCH_DIMS];
  int64_t *dims = ndim <= DLX_SCRATCH_DIMS ? local : PyMem_RawMalloc(2 * sizeof(int64_t) *
                                                                    (size_t)ndim);
  if (!dims) return fail(st, "MemoryError", "dlx_return_new_tensor: out of memory");
  int64_t *strides = dims + (ndim <= DLX_SCRATCH_DIMS ? DLX_SCRATCH_DIMS : ndim);
  int rc = alloc_result(st, device, ndim, shape, dims, strides, dtype, out);
  if (dims != local) PyMem_RawFree(dims);
  return rc;
}

static int alloc_result(call_state *st, DLDevice device, int32_t ndim, const int64_t *shape,
                        int64_t *dims, int64_t *strides, DLDataType dtype, DLTensor **out) {
  for (int32_t i = 0; i < ndim; ++i) {
    if (shape[i] < 0)
      return fail(st, "ValueError", "dlx_return_new_tensor: negative extent %lld in dim %d",
                  (long long)shape[i], (int)i);
    dims[i] = shape[i];
  }
  if (dlx_compact_strides(ndim, dims, strides))
    return fail(st, "ValueError", "dlx_return_new_tensor: the shape is too large");
  const DLPackExchangeAPI *api = first_table(st);
  if (!api && !(api = dlx_numpy_table())) {
    st->failed = 1;
    return -1;
  }
  DLTensor proto = {.data = NULL, .device = device, .ndim = ndim, .dtype = dtype,
                    .shape = dims, .strides = strides, .byte_offset = 0};
  DLManagedTensorVersioned *m = NULL;
  if (api->managed_tensor_allocator(&proto, &m, st, alloc_set_error) || !m) {
    if (!st->failed && !PyErr_Occurred())
      fail(st, "RuntimeError", "the exchange table's allocator failed without an error");
    st->failed = 1;
    return -1;
  }
  if (m->version.major != 1) {
    unsigned major = m->version.major; /* read before the deleter frees it */
    if (m->deleter) m->deleter(m);
    return fail(st, "BufferError", "the allocator returned DLPack major version %u", major);
  }
  result *r = next_result(st);
  if (!r) {
    if (m->deleter) m->deleter(m);
    return -1;
  }
  r->tensor = m;
  r->api = api;
  *out = &m->dl_tensor;
  return 0;
}

static int rt_return_new_tensor(dlx_call *call, DLDevice device, int32_t ndim,
                                const int64_t *shape, DLDataType dtype, DLTensor **out) {
  call_state *st = (call_state *)call;
  service sv;
  service_enter(st, &sv);
  int rc = return_new_tensor(st, device, ndim, shape, dtype, out);
  service_leave(st, &sv);
  return rc;
}

static int symbol_size(call_state *st, const char *symbol, int64_t *out) {
  const dlx_sig *sig = st->k->sig;
  int32_t k = sig && symbol ? dlx_sig_symbol_index(sig, symbol) : -1;
  if (k < 0)
    return fail(st, "ValueError", "%s(): dlx_size: '%s' is not a size symbol of its signature",
                st->k->name, symbol ? symbol : "(null)");
  if (st->binds.value[k] < 0)
    return fail(st, "ValueError",
                "%s(): dlx_size: size symbol '%s' is not bound in this call (no tensor given "
                "has it)",
                st->k->name, symbol);
  *out = st->binds.value[k];
  return 0;
}

static int rt_size(dlx_call *call, const char *symbol, int64_t *out) {
  call_state *st = (call_state *)call;
  service sv;
  service_enter(st, &sv);
  int rc = symbol_size(st, symbol, out);
  service_leave(st, &sv);
  return rc;
}

/* dlx_arg_floats of an ints argument: converted once per call, into the slot. */
static int ints_as_floats(call_state *st, int32_t i, const double **v, int32_t *n) {
  dlx_call *call = &st->pub;
  if (i < 0 || i >= call->num_args || call->args[i].kind != DLX_ARG_INTS)
    return fail(st, "TypeError", "argument %d: expected a tuple or list of floats", (int)i);
  dlx_slot *slot = &st->slots[i];
  int64_t len = slot->seq.len;
  if (!slot->as_floats) {
    /* behind the ints in the scratch when both fit; PyMem_Raw: the GIL may be released */
    double *f = slot->seq.data == slot->scratch && 2 * len <= DLX_SCRATCH_DIMS
                    ? slot->fscratch + len
                    : PyMem_RawMalloc(sizeof(double) * (size_t)(len ? len : 1));
    if (!f) return fail(st, "MemoryError", "dlx_arg_floats: out of memory");
    const int64_t *iv = slot->seq.data;
    for (int64_t j = 0; j < len; ++j) f[j] = (double)iv[j];
    slot->as_floats = f;
  }
  *v = slot->as_floats;
  *n = (int32_t)len;
  return 0;
}

static int rt_ints_as_floats(dlx_call *call, int32_t i, const double **v, int32_t *n) {
  call_state *st = (call_state *)call;
  service sv;
  service_enter(st, &sv);
  int rc = ints_as_floats(st, i, v, n);
  service_leave(st, &sv);
  return rc;
}

/* dlx_arg_is_readonly of a tensor not known read-only. A table's view export carries no
 * flags: the table's owned export of the same object is asked (its deleter run at once).
 * Every other way in (numpy's view, owned exports, __dlpack__, buffers) set the flag
 * already. Only a kernel that asks pays; 1 also when the flags cannot be learnt. */
static int arg_readonly(call_state *st, int32_t i) {
  dlx_arg *a = &st->argv[i];
  dlx_slot *slot = &st->slots[i];
  const DLPackExchangeAPI *api = slot->api;
  /* Every conversion that leaves the tensor in slot->view writes slot->api (a table's, or
   * NULL); `managed` is stale there (a view's slot is not cleaned). An owned export's
   * tensor is its own, except when compact strides were added: asked again then. */
  if (a->readonly || a->kind != DLX_ARG_TENSOR || !api || a->value.tensor != &slot->view ||
      dlx_torch_views_writable(api))
    return a->readonly;
  PyObject *et, *ev, *tb; /* an error the kernel recorded before asking stays its own */
  PyErr_Fetch(&et, &ev, &tb);
  DLManagedTensorVersioned *m = NULL;
  int ro = 1;
  if (api->managed_tensor_from_py_object_no_sync(st->objs[i], &m) == 0 && m) {
    if (m->version.major == 1) ro = (m->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
    if (m->deleter) m->deleter(m);
  }
  PyErr_Clear(); /* a question, not a failure of the call: unknowable is read-only */
  PyErr_Restore(et, ev, tb);
  if (ro) a->readonly = 1; /* asked again, answered without the export */
  return ro;
}

static int rt_arg_readonly(const dlx_call *call, int32_t i) {
  call_state *st = (call_state *)call; /* the runtime's own state, writable */
  if (i < 0 || i >= call->num_args) return 0;
  service sv;
  service_enter(st, &sv);
  int rc = arg_readonly(st, i);
  service_leave(st, &sv);
  return rc;
}

static const dlx_runtime runtime = {
    .abi_version = DLX_ABI_VERSION,
    .size = sizeof(dlx_runtime),
    .verror = rt_verror,
    .return_int = rt_return_int,
    .return_float = rt_return_float,
    .return_new_tensor = rt_return_new_tensor,
    .symbol_size = rt_size,
    .ints_as_floats = rt_ints_as_floats,
    .arg_readonly = rt_arg_readonly,
};

/* "cuda:0", or "device type 99:0" for a type DLPack does not name. */
static void device_text(DLDevice d, char *buf, size_t n) {
  const char *name = dlx_device_type_name(d.device_type);
  if (name)
    PyOS_snprintf(buf, n, "%s:%d", name, (int)d.device_id);
  else
    PyOS_snprintf(buf, n, "device type %d:%d", (int)d.device_type, (int)d.device_id);
}

static inline int same_device(DLDevice a, DLDevice b) {
  uint64_t x, y; /* one compare for type and id */
  _Static_assert(sizeof(DLDevice) == sizeof x, "DLDevice is two 32-bit fields");
  memcpy(&x, &a, sizeof x);
  memcpy(&y, &b, sizeof y);
  return x == y;
}

/* How errors name argument i: a declared kernel's parameter ('x'), else its position
 * (and the type of `obj`, when given). Error paths only. */
static const char *arg_label(const dlx_kernel_info *k, int32_t i, PyObject *obj, char *buf,
                             size_t n) {
  if (k->sig)
    PyOS_snprintf(buf, n, "'%s'", dlx_sig_param_name(k->sig, i));
  else if (obj)
    PyOS_snprintf(buf, n, "argument %d (%.100s)", (int)i, Py_TYPE(obj)->tp_name);
  else
    PyOS_snprintf(buf, n, "argument %d", (int)i);
  return buf;
}

/* Two non-CPU tensors of one call on different devices: no stream serves both. */
static int device_mismatch(call_state *st, int32_t first, DLDevice a, int32_t second,
                           DLDevice b) {
  char da[48], db[48], la[160], lb[160];
  device_text(a, da, sizeof da);
  device_text(b, db, sizeof db);
  return fail(st, "ValueError",
              "%s is on %s but %s is on %s; the tensors of one call must "
              "share one device (CPU tensors may accompany it)",
              arg_label(st->k, first, NULL, la, sizeof la), da,
              arg_label(st->k, second, NULL, lb, sizeof lb), db);
}

/* ---- binding: Python's own words for an equivalent `def` ---------------------------- */

static int too_many_positional(const dlx_kernel_info *k, Py_ssize_t nargs) {
  const dlx_sig *sig = k->sig;
  if (sig->nrequired == sig->nparams)
    PyErr_Format(PyExc_TypeError, "%s() takes %d positional argument%s but %zd %s given",
                 k->name, (int)sig->nparams, sig->nparams == 1 ? "" : "s", nargs,
                 nargs == 1 ? "was" : "were");
  else
    PyErr_Format(PyExc_TypeError, "%s() takes from %d to %d positional arguments but %zd %s given",
                 k->name, (int)sig->nrequired, (int)sig->nparams, nargs,
                 nargs == 1 ? "was" : "were");
  return -1;
}

static int missing(const dlx_kernel_info *k, PyObject **bound) {
  int32_t n = 0, which[DLX_MAX_ARGS];
  for (int32_t i = 0; i < k->sig->nparams; ++i)
    if (!bound[i]) which[n++] = i;
  char names[1024];
  size_t len = 0;
  for (int32_t j = 0; j < n && len < sizeof names; ++j) {
    const char *sep = j == 0 ? "" : n == 2 ? " and " : j == n - 1 ? ", and " : ", ";
    len += (size_t)PyOS_snprintf(names + len, sizeof names - len, "%s'%s'", sep,
                                 dlx_sig_param_name(k->sig, which[j]));
  }
  PyErr_Format(PyExc_TypeError, "%s() missing %d required positional argument%s: %s", k->name,
               (int)n, n == 1 ? "" : "s", names);
  return -1;
}

/* Where keyword `key` binds: a pointer compare at the position keyword j usually names (in
 * declared order after the positional ones), else a scan by pointer (names are interned),
 * else by value. -1 when no parameter has that name. */
static inline int32_t keyword_index(const dlx_kernel_info *k, int32_t np, int32_t guess,
                                    PyObject *key) {
  PyObject *const *names = k->param_names;
  if (guess < np && names[guess] == key) return guess;
  for (int32_t i = 0; i < np; ++i)
    if (names[i] == key) return i;
  if (!PyUnicode_Check(key)) return -1; /* from C only: Python refuses such names itself */
  for (int32_t i = 0; i < np; ++i)
    if (PyUnicode_Compare(key, names[i]) == 0) return i;
  return -1;
}

/* The TypeError a def gives for `key`, which no parameter has; from 3.13 on with the
 * interpreter's "Did you mean" for a near name. */
static __attribute__((cold)) int unexpected_keyword(const dlx_kernel_info *k, PyObject *key) {
#if PY_VERSION_HEX >= 0x030D0000
  const char *names[DLX_MAX_ARGS];
  int32_t np = k->sig->nparams;
  for (int32_t i = 0; i < np; ++i) names[i] = dlx_sig_param_name(k->sig, i);
  Py_ssize_t len;
  const char *wrong = PyUnicode_AsUTF8AndSize(key, &len);
  int near = wrong ? dlx_suggest(wrong, (size_t)len, names, (size_t)np) : -1;
  if (!wrong) PyErr_Clear(); /* a name with no UTF-8 form: no suggestion, the same error */
  if (near >= 0) {
    PyErr_Format(PyExc_TypeError,
                 "%s() got an unexpected keyword argument '%S'. Did you mean '%s'?", k->name,
                 key, names[near]);
    return -1;
  }
#endif
  PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%S'", k->name, key);
  return -1;
}

static __attribute__((cold)) int multiple_values(const dlx_kernel_info *k, int32_t at) {
  PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'", k->name,
               dlx_sig_param_name(k->sig, at));
  return -1;
}

/* More positional arguments than parameters: as a def, the keywords' errors come first
 * (every parameter is bound by position, so any keyword naming one is given twice). */
static __attribute__((cold)) int surplus_positional(const dlx_kernel_info *k, Py_ssize_t nargs,
                                                    PyObject *kwnames) {
  if (kwnames && PyTuple_GET_SIZE(kwnames) > 0) {
    PyObject *key = PyTuple_GET_ITEM(kwnames, 0);
    int32_t at = keyword_index(k, k->sig->nparams, 0, key);
    return at < 0 ? unexpected_keyword(k, key) : multiple_values(k, at);
  }
  return too_many_positional(k, nargs);
}

/* Positional and keyword arguments -> bound[nparams] in declared order (borrowed). Out of
 * line: a call giving every parameter by position never comes here (inlined, it cost that
 * call ~10 Ir of register shuffling). */
static __attribute__((noinline)) int bind_args(const dlx_kernel_info *k,
                                               PyObject *const *args, Py_ssize_t nargs,
                                               PyObject *kwnames, PyObject **bound) {
  const dlx_sig *sig = k->sig;
  int32_t np = sig->nparams;
  if (nargs > np) return surplus_positional(k, nargs, kwnames);
  /* which parameters are bound, a bit each (at most DLX_MAX_ARGS = 64) */
  _Static_assert(DLX_MAX_ARGS <= 64, "one bit per parameter");
  uint64_t have = nargs >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << nargs) - 1;
  for (int32_t i = 0; i < nargs; ++i) bound[i] = args[i];
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  PyObject *const *kwvalues = args + nargs;
  for (Py_ssize_t j = 0; j < nkw; ++j) {
    PyObject *key = PyTuple_GET_ITEM(kwnames, j);
    int32_t at = keyword_index(k, np, (int32_t)(nargs + j), key);
    if (at < 0) return unexpected_keyword(k, key);
    if (have >> at & 1) return multiple_values(k, at);
    have |= (uint64_t)1 << at;
    bound[at] = kwvalues[j];
  }
  int lacking = 0;
  for (int32_t i = (int32_t)nargs; i < np; ++i) /* those before are bound by position */
    if (!(have >> i & 1) && !(bound[i] = k->defaults[i])) lacking = 1;
  return lacking ? missing(k, bound) : 0;
}

/* ---- conversion against the declared parameter ----------------------------------- */

static int wrong_kind(const dlx_kernel_info *k, int32_t i, PyObject *obj) {
  char want[256];
  dlx_sig_format_type(k->sig, &k->sig->params[i].type, want, sizeof want);
  PyErr_Format(PyExc_TypeError, "%s(): '%s' must be %s, got %.100s", k->name,
               dlx_sig_param_name(k->sig, i), want, Py_TYPE(obj)->tp_name);
  return -1;
}

static int bad_element(const dlx_kernel_info *k, int32_t i, PyObject *obj, Py_ssize_t bad) {
  char want[256];
  dlx_sig_format_type(k->sig, &k->sig->params[i].type, want, sizeof want);
  PyObject *e = bad < PySequence_Fast_GET_SIZE(obj) ? PySequence_Fast_ITEMS(obj)[bad] : Py_None;
  PyErr_Format(PyExc_TypeError, "%s(): '%s' must be %s, got a %.100s whose element %zd is %.100s",
               k->name, dlx_sig_param_name(k->sig, i), want, Py_TYPE(obj)->tp_name, bad,
               Py_TYPE(e)->tp_name);
  return -1;
}

/* The pending exception becomes the __cause__ of the one `raise_new` raises (cold). */
static __attribute__((cold)) void cause_of_next(PyObject **cause) {
  PyObject *et, *tb;
  PyErr_Fetch(&et, cause, &tb);
  PyErr_NormalizeException(&et, cause, &tb);
  if (tb && *cause) PyException_SetTraceback(*cause, tb);
  Py_XDECREF(et);
  Py_XDECREF(tb);
}

static __attribute__((cold)) int caused_by(PyObject *cause) {
  if (!cause) return -1;
  PyObject *et, *ev, *tb;
  PyErr_Fetch(&et, &ev, &tb);
  PyErr_NormalizeException(&et, &ev, &tb);
  if (ev) PyException_SetCause(ev, cause); /* steals */
  else Py_DECREF(cause);
  PyErr_Restore(et, ev, tb);
  return -1;
}

/* Parameter i of a declared kernel failed to convert with an exception of its own (an
 * __index__ or __float__ that raised, an overflow, a list changed meanwhile): the same
 * class, named after the kernel and the parameter, the original as __cause__ (cold). */
static __attribute__((cold, noinline)) int param_error(const dlx_kernel_info *k, int32_t i) {
  return dlx_prefix_error("%s(): '%s': ", k->name, dlx_sig_param_name(k->sig, i));
}

/* wrong_kind, the pending exception as its cause (numpy's "only integer scalar arrays
 * can be converted to a scalar index" for an array given as an int). */
static __attribute__((cold, noinline)) int wrong_kind_caused(const dlx_kernel_info *k, int32_t i,
                                                             PyObject *obj) {
  PyObject *cause;
  cause_of_next(&cause);
  wrong_kind(k, i, obj);
  return caused_by(cause);
}

/* An int beyond 64 bits, without its repr (10**100000 has none on 3.11+). */
static __attribute__((cold, noinline)) int int_overflow(const dlx_kernel_info *k, int32_t i,
                                                        PyObject *obj) {
  PyObject *nbits = PyObject_CallMethod(obj, "bit_length", NULL);
  long long bits = nbits ? PyLong_AsLongLong(nbits) : -1;
  Py_XDECREF(nbits);
  PyErr_Clear();
  if (bits >= 0 && bits <= 128)
    PyErr_Format(PyExc_OverflowError, "%s(): '%s' = %R does not fit in 64 bits", k->name,
                 dlx_sig_param_name(k->sig, i), obj);
  else
    PyErr_Format(PyExc_OverflowError, "%s(): '%s' (an int of %lld bits) does not fit in 64 bits",
                 k->name, dlx_sig_param_name(k->sig, i), bits);
  return -1;
}

/* A str with no UTF-8 form (lone surrogates): the ValueError a kernel's parameter gets,
 * the UnicodeEncodeError as its cause. */
static __attribute__((cold, noinline)) int str_not_utf8(const dlx_kernel_info *k, int32_t i) {
  if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) return param_error(k, i);
  PyObject *cause;
  cause_of_next(&cause);
  PyErr_Format(PyExc_ValueError, "%s(): '%s' must be a str with a UTF-8 form: %S", k->name,
               dlx_sig_param_name(k->sig, i), cause ? cause : Py_None);
  return caused_by(cause);
}

/* A declared tensor that failed conversion's kind or the plan's check (cold). */
static int tensor_refused(const dlx_kernel_info *k, int32_t i, PyObject *obj, dlx_arg *a,
                          dlx_slot *slot, const dlx_sig_bindings *binds,
                          const dlx_sig_fault *fault) {
  if (a->kind != DLX_ARG_TENSOR) {
    if (a->kind == DLX_ARG_INTS || a->kind == DLX_ARG_FLOATS) dlx_release_seq(slot);
    a->kind = DLX_ARG_NONE; /* nothing left for the caller to release */
    return wrong_kind(k, i, obj);
  }
  char msg[512];
  dlx_sig_fault_message(k->sig, i, a->value.tensor, binds, fault, msg, sizeof msg);
  PyErr_Format(fault->code == DLX_FAULT_DTYPE ? PyExc_TypeError : PyExc_ValueError, "%s(): %s",
               k->name, msg);
  return -1;
}

/* Every declared kind but a tensor, and None (cold next to tensors). */
static int convert_other(const dlx_kernel_info *k, int32_t i, PyObject *obj, dlx_arg *a,
                         dlx_slot *slot) {
  const dlx_sig_type *ty = &k->sig->params[i].type;
  a->readonly = 0;
  if (obj == Py_None) {
    if (!ty->optional) return wrong_kind(k, i, obj);
    a->kind = DLX_ARG_NONE;
    a->value.i = 0;
    return 0;
  }
  switch (ty->kind) {
    case DLX_SIG_INT:
    case DLX_SIG_FLOAT: {
      int is_float = PyFloat_Check(obj);
      if (ty->kind == DLX_SIG_INT && is_float) return wrong_kind(k, i, obj);
      if (!is_float && !PyLong_Check(obj)) {
        PyNumberMethods *nb = Py_TYPE(obj)->tp_as_number; /* numpy scalars */
        if (nb && nb->nb_index) {
          PyObject *v = PyNumber_Index(obj);
          if (!v)
            return PyErr_ExceptionMatches(PyExc_TypeError) && PyObject_CheckBuffer(obj)
                       ? wrong_kind_caused(k, i, obj) /* an array */
                       : param_error(k, i);
          int rc = convert_other(k, i, v, a, slot);
          Py_DECREF(v);
          return rc;
        }
        if (ty->kind == DLX_SIG_INT || !nb || !nb->nb_float || PyUnicode_Check(obj))
          return wrong_kind(k, i, obj);
        int cplx = dlx_is_complex(obj); /* float(1+2j) is a TypeError too */
        if (cplx) return cplx > 0 ? wrong_kind(k, i, obj) : param_error(k, i);
        is_float = 1;
      }
      if (ty->kind == DLX_SIG_FLOAT) {
        a->kind = DLX_ARG_FLOAT;
        a->value.f = is_float ? PyFloat_AsDouble(obj) : PyLong_AsDouble(obj);
        if (a->value.f == -1.0 && PyErr_Occurred()) return param_error(k, i);
        return 0;
      }
      int overflow = 0;
      a->kind = DLX_ARG_INT;
      a->value.i = PyLong_AsLongLongAndOverflow(obj, &overflow);
      if (overflow) return int_overflow(k, i, obj);
      return a->value.i == -1 && PyErr_Occurred() ? param_error(k, i) : 0;
    }
    case DLX_SIG_BOOL:
      if (!PyBool_Check(obj)) return wrong_kind(k, i, obj);
      a->kind = DLX_ARG_BOOL;
      a->value.i = obj == Py_True;
      return 0;
    case DLX_SIG_STR:
      if (!PyUnicode_Check(obj)) return wrong_kind(k, i, obj);
      return dlx_convert_str(obj, i, a, slot) ? str_not_utf8(k, i) : 0;
    case DLX_SIG_INTS:
    case DLX_SIG_FLOATS: {
      if (!PyTuple_Check(obj) && !PyList_Check(obj)) return wrong_kind(k, i, obj);
      Py_ssize_t bad = 0;
      int rc = dlx_convert_seq(obj, ty->kind == DLX_SIG_INTS ? DLX_ARG_INTS : DLX_ARG_FLOATS, a,
                               slot, &bad);
      return rc == -2 ? bad_element(k, i, obj, bad) : rc ? param_error(k, i) : 0;
    }
    default: /* a tensor given None */
      return wrong_kind(k, i, obj);
  }
}

/* Scalar parameter i of a declared kernel, checked and converted as the eager call does
 * (convert_other, so the same errors word for word): the value a staged call carries
 * (int, float, bool, str, a tuple of ints or floats, None), or NULL with the eager call's
 * error. For glue that stages calls (dlx.jax's attributes); never on the call path. */
PyObject *dlx_convert_scalar(const dlx_kernel_info *k, int32_t i, PyObject *obj) {
  dlx_arg a;
  dlx_slot slot;
  if (convert_other(k, i, obj, &a, &slot)) return NULL;
  switch (a.kind) {
    case DLX_ARG_NONE: return Py_NewRef(Py_None);
    case DLX_ARG_INT: return PyLong_FromLongLong(a.value.i);
    case DLX_ARG_BOOL: return PyBool_FromLong((long)a.value.i);
    case DLX_ARG_FLOAT: return PyFloat_FromDouble(a.value.f);
    case DLX_ARG_STR: return PyUnicode_FromStringAndSize(a.value.seq->data, a.value.seq->len);
    case DLX_ARG_INTS:
    case DLX_ARG_FLOATS: {
      PyObject *t = PyTuple_New(a.value.seq->len);
      for (int64_t j = 0; t && j < a.value.seq->len; ++j) {
        PyObject *v = a.kind == DLX_ARG_INTS
                          ? PyLong_FromLongLong(((const int64_t *)a.value.seq->data)[j])
                          : PyFloat_FromDouble(((const double *)a.value.seq->data)[j]);
        if (!v) Py_CLEAR(t);
        else PyTuple_SET_ITEM(t, j, v);
      }
      dlx_release_seq(&slot);
      return t;
    }
    default: /* a tensor parameter: convert_other refused it already */
      return wrong_kind(k, i, obj), NULL;
  }
}

/* A declared tensor parameter, converted as any argument: check it against the plan; -1
 * with an exception (the slot then holds something to release exactly when arg->kind is
 * DLX_ARG_TENSOR). */
static inline int check_declared(const dlx_kernel_info *k, int32_t i, PyObject *obj, dlx_arg *a,
                                 dlx_slot *slot, dlx_sig_bindings *binds) {
  dlx_sig_fault fault;
  if (a->kind == DLX_ARG_TENSOR &&
      dlx_sig_check_type(k->sig, &k->sig->params[i].type, i, a->value.tensor, a->readonly,
                         binds, &fault) == 0)
    return 0;
  return tensor_refused(k, i, obj, a, slot, binds, &fault);
}

/* The kernel's results: None, the one value, or a tuple in call order. Steals them. */
static PyObject *build_result(call_state *st) {
  for (int32_t j = 0; j < st->nresults; ++j) {
    result *r = &st->results[j];
    if (!r->tensor) continue;
    void *obj = NULL;
    DLManagedTensorVersioned *m = r->tensor;
    r->tensor = NULL; /* stolen by the import, also when it fails */
    if (r->api->managed_tensor_to_py_object_no_sync(m, &obj) || !obj) {
      if (!PyErr_Occurred()) /* else the call would return None, a silent wrong result */
        PyErr_SetString(PyExc_RuntimeError,
                        "the exchange table's managed_tensor_to_py_object_no_sync failed "
                        "without setting an error");
      return NULL;
    }
    r->obj = obj;
  }
  if (st->nresults == 0) return Py_NewRef(Py_None);
  if (st->nresults == 1) {
    st->nresults = 0;
    return st->results[0].obj;
  }
  PyObject *t = PyTuple_New(st->nresults);
  if (!t) return NULL;
  for (int32_t j = 0; j < st->nresults; ++j) PyTuple_SET_ITEM(t, j, st->results[j].obj);
  st->nresults = 0;
  return t;
}

/* The call's stream when a __dlpack__ producer waits for it or an override is in force
 * (issue 13): gather the facts, let src/core/calls/dlx_stream.c choose the source, ask it, then
 * export the waiting producers with that stream, each checked like any tensor. Calls whose
 * tensors all bring tables never come here. -1 with the exception set and prefixed. */
__attribute__((noinline, cold)) static int finish_streams(call_state *st, PyObject *const *objs,
                                                          dlx_arg *argv, dlx_slot *slots,
                                                          dlx_sig_bindings *binds) {
  const dlx_kernel_info *k = st->k;
  int32_t n = st->pub.num_args;
  dlx_stream_settle(argv, slots, n); /* before any Python code runs: nested calls count */
  DLDevice dev = st->pub.device;
  uintptr_t handle = 0;
  dlx_stream_facts f = {.has_device = dev.device_type != kDLCPU};
  f.override_active = dlx_stream_override(&handle);
  int32_t table_arg = -1, provider_arg = -1, first_device = -1;
  PyObject *provider = NULL;
  for (int32_t i = 0; i < n; ++i) {
    if (argv[i].kind != DLX_ARG_TENSOR || argv[i].value.tensor->device.device_type == kDLCPU)
      continue;
    if (first_device < 0) first_device = i;
    if (slots[i].api && table_arg < 0) table_arg = i;
    f.deferred |= dlx_slot_deferred(&argv[i], &slots[i]);
  }
  if (!f.deferred && table_arg != first_device) table_arg = -1; /* as without this pass */
  f.table_device = table_arg >= 0;
  for (int32_t i = 0; i < n && f.deferred && !f.override_active && !f.table_device; ++i) {
    if (!dlx_slot_deferred(&argv[i], &slots[i])) continue;
    int rc = dlx_stream_provider_find(objs[i], &provider);
    if (rc != 0) provider_arg = i;
    if (rc < 0) goto producer_error;
    if (rc > 0) break;
  }
  f.provider = provider_arg >= 0;
  dlx_stream_source source = dlx_stream_choose(&f);
  if (source != DLX_STREAM_PROVIDER) dlx_stream_provider_release(provider);
  switch (source) {
    case DLX_STREAM_NONE:
      handle = 0; /* the CPU (whatever the override), or nothing to ask */
      break;
    case DLX_STREAM_OVERRIDE:
      break;
    case DLX_STREAM_TABLE: {
      void *s = NULL;
      if (slots[table_arg].api->current_work_stream(dev.device_type, dev.device_id, &s)) {
        if (!PyErr_Occurred())
          PyErr_SetString(PyExc_RuntimeError, "current_work_stream failed without an error");
        return -1;
      }
      handle = (uintptr_t)s;
      break;
    }
    case DLX_STREAM_PROVIDER:
      if (dlx_stream_provider_call(provider, dev, &handle)) {
        char l[160];
        dlx_prefix_error("%s(): %s: stream provider: ", k->name,
                         arg_label(k, provider_arg, objs[provider_arg], l, sizeof l));
        st->prefixed = 1;
        return -1;
      }
      break;
    case DLX_STREAM_DEFAULT:
      handle = dlx_stream_default_handle(dev.device_type);
      break;
  }
  st->pub.stream = (void *)handle;
  for (int32_t i = 0; i < n; ++i) {
    if (!dlx_slot_deferred(&argv[i], &slots[i])) continue;
    uint64_t v = 0;
    PyObject *stream = NULL;
    int how = dlx_stream_dlpack_arg(dev.device_type, handle, &v);
    if (how == DLX_DLPACK_BAD_STREAM) {
      char d[48], l[160];
      device_text(dev, d, sizeof d);
      return fail(st, "ValueError",
                  "%s is on %s, where DLPack has no stream number for the "
                  "call's stream %#llx (ROCm allows 0 or a stream pointer > 2)",
                  arg_label(k, i, objs[i], l, sizeof l), d, (unsigned long long)handle);
    }
    if (how == DLX_DLPACK_STREAM && !(stream = PyLong_FromUnsignedLongLong(v))) return -1;
    int rc = dlx_export_deferred(objs[i], stream, &argv[i], &slots[i]);
    Py_XDECREF(stream);
    if (rc < 0) {
      provider_arg = i;
      goto producer_error;
    }
    DLDevice got = argv[i].value.tensor->device;
    if (!same_device(got, dev)) {
      char dg[48], dd[48], l[160];
      device_text(got, dg, sizeof dg);
      device_text(dev, dd, sizeof dd);
      return fail(st, "ValueError",
                  "%s: __dlpack__ exported a tensor on %s, but the call's "
                  "device is %s (from __dlpack_device__ and the other arguments)",
                  arg_label(k, i, objs[i], l, sizeof l), dg, dd);
    }
    if (k->sig && check_declared(k, i, objs[i], &argv[i], &slots[i], binds)) {
      st->prefixed = 1;
      return -1;
    }
  }
  return 0;
producer_error: {
  char l[160];
  dlx_prefix_error("%s(): %s: ", k->name, arg_label(k, provider_arg, objs[provider_arg], l,
                                                    sizeof l));
}
  st->prefixed = 1;
  return -1;
}

/* ---- the call ----------------------------------------------------------------------- */

/* `objs` takes the store that a pointer to the bindings took: a call that never asks
 * arg_readonly pays nothing for it. */
static inline void state_init(call_state *st, const dlx_kernel_info *k, int32_t nargs,
                              int32_t max_results, PyObject *const *objs) {
  st->pub = (dlx_call){.rt = &runtime, .args = st->argv, .num_args = nargs,
                       .device = {kDLCPU, 0}, .stream = NULL};
  st->k = k;
  st->failed = st->released = st->prefixed = st->flags = 0;
  st->nresults = st->nowners = 0;
  st->objs = objs;
  st->own_type = NULL;
  st->max_results = max_results;
}

/* Release what the call still holds: every owning slot, results not handed out. Deleters
 * may run Python code, so a pending error is kept out of their way. Then the call leaves:
 * `result`, or NULL with the error (named after the kernel) when one was pending or a
 * deleter raised. */
static PyObject *release_all(call_state *st, PyObject *result) {
  PyObject *et = NULL, *ev = NULL, *tb = NULL;
  int failed = PyErr_Occurred() != NULL;
  if (failed) PyErr_Fetch(&et, &ev, &tb);
  for (int32_t j = 0; j < st->nowners; ++j) {
    int32_t i = st->owners[j];
    int32_t kind = st->argv[i].kind;
    if (kind == DLX_ARG_TENSOR)
      dlx_release_slot(&st->slots[i]);
    else if (kind == DLX_ARG_INTS || kind == DLX_ARG_FLOATS)
      dlx_release_seq(&st->slots[i]);
  }
  for (int32_t j = 0; j < st->nresults; ++j) { /* results not handed out */
    Py_CLEAR(st->results[j].obj);
    DLManagedTensorVersioned *m = st->results[j].tensor;
    if (m && m->deleter) m->deleter(m);
  }
  dlx_call_leave();
  if (failed) PyErr_Restore(et, ev, tb);
  if (failed || PyErr_Occurred()) { /* PyErr_Occurred: a deleter raised */
    if (!st->prefixed || !failed) dlx_prefix_error("%s(): ", st->k->name);
    Py_XDECREF(result);
    return NULL;
  }
  return result;
}

/* A call that ends before the streams pass (finish_streams) takes its deferred producers
 * among argv[0..n) off dlx_stream_pending itself. */
static inline void settle(call_state *st, int32_t n) {
  if (st->flags & DLX_CONVERT_DEFERRED) dlx_stream_settle(st->argv, st->slots, n);
}

/* A call that failed before or in the kernel: release everything, raise. */
static __attribute__((noinline, cold)) PyObject *call_failed(call_state *st) {
  return release_all(st, NULL);
}

/* The kernel failed (rc != 0, or a service failed) without an exception (cold). */
static __attribute__((noinline, cold)) PyObject *kernel_failed(call_state *st, int rc) {
  if (!PyErr_Occurred()) {
    char msg[96];
    PyOS_snprintf(msg, sizeof msg, "the kernel failed (returned %d) without setting an error",
                  rc);
    raise_in_call(st, "RuntimeError", msg);
  }
  return release_all(st, NULL);
}

/* dlx_convert_arg failed on argument i (cold): name it, release what the slot holds. */
static __attribute__((noinline, cold)) PyObject *convert_failed(call_state *st, int32_t i,
                                                                PyObject *obj) {
  settle(st, i);
  const dlx_kernel_info *k = st->k;
  if (k->sig && PyErr_ExceptionMatches(PyExc_BufferError) &&
      dlx_numpy_dtype_inexpressible(obj)) {
    /* a dtype DLPack cannot express is not among the declared ones: the documented
     * TypeError, numpy's BufferError as its cause */
    char want[256];
    dlx_sig_format_type(k->sig, &k->sig->params[i].type, want, sizeof want);
    PyObject *cause;
    cause_of_next(&cause);
    PyErr_Format(PyExc_TypeError, "%s(): '%s' must be %s: %S", k->name,
                 dlx_sig_param_name(k->sig, i), want, cause ? cause : Py_None);
    caused_by(cause);
  } else {
    char l[160];
    dlx_prefix_error("%s(): %s: ", k->name, arg_label(k, i, obj, l, sizeof l));
  }
  st->prefixed = 1;
  if (st->argv[i].kind == DLX_ARG_TENSOR) { /* partial: release it, error kept aside */
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    dlx_release_slot(&st->slots[i]);
    PyErr_Restore(et, ev, tb);
  }
  return release_all(st, NULL);
}

/* Argument i was refused by the signature (cold): its error names the kernel and the
 * parameter already; what its slot owns is among the owners. It is never a deferred
 * producer, and a scalar refused while converting leaves its slot as an earlier call left
 * it: only the arguments before it are settled. */
static __attribute__((noinline, cold)) PyObject *param_refused(call_state *st, int32_t i) {
  settle(st, i);
  st->prefixed = 1;
  return release_all(st, NULL);
}

/* Argument i is on another device than the call's (cold; device_mismatch raised). */
static __attribute__((noinline, cold)) PyObject *device_refused(call_state *st, int32_t i) {
  settle(st, i + 1);
  return release_all(st, NULL);
}

/* An argument could not be converted, and the call has failed (cold): a tracer (a JAX
 * tracer under jax.jit, a torch fake tensor) may be why. dlx._trace.dispatch decides: a
 * handler that claims the call gives its result (or its own error, the conversion error as
 * its __cause__); NotImplemented leaves the original error unchanged. A signed kernel's
 * arguments come bound, in declared order, defaults filled (what the loop holds anyway:
 * passing the caller's keywords kept three more registers live, ~6 Ir a call). */
static __attribute__((noinline, cold)) PyObject *traced_or_raise(const dlx_kernel_info *k,
                                                                 PyObject *const *args,
                                                                 Py_ssize_t nargs,
                                                                 PyObject *kwnames) {
  if (!k->self || !PyErr_Occurred()) return NULL;
  PyObject *et, *ev, *tb;
  PyErr_Fetch(&et, &ev, &tb);
  PyErr_NormalizeException(&et, &ev, &tb); /* dispatch is told the error (OperatorPath) */
  PyObject *mod = PyImport_ImportModule("dlx._trace");
  PyObject *pos = mod ? PyTuple_New(nargs) : NULL;
  PyObject *kw = pos ? PyDict_New() : NULL;
  PyObject *r = NULL;
  if (kw) {
    for (Py_ssize_t i = 0; i < nargs; ++i) PyTuple_SET_ITEM(pos, i, Py_NewRef(args[i]));
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    int bad = 0;
    for (Py_ssize_t j = 0; j < nkw && !bad; ++j)
      bad = PyDict_SetItem(kw, PyTuple_GET_ITEM(kwnames, j), args[nargs + j]) != 0;
    if (!bad) r = PyObject_CallMethod(mod, "dispatch", "OOOO", k->self, pos, kw, ev ? ev : Py_None);
  }
  Py_XDECREF(mod);
  Py_XDECREF(pos);
  Py_XDECREF(kw);
  if (r == Py_NotImplemented) {
    Py_DECREF(r);
    PyErr_Restore(et, ev, tb);
    return NULL;
  }
  if (!r) { /* the handler's error, caused by the conversion's */
    PyObject *nt, *nv, *ntb;
    PyErr_Fetch(&nt, &nv, &ntb);
    PyErr_NormalizeException(&nt, &nv, &ntb);
    PyErr_NormalizeException(&et, &ev, &tb);
    if (nv && ev) {
      if (tb) PyException_SetTraceback(ev, tb);
      PyException_SetCause(nv, Py_NewRef(ev));
    }
    Py_XDECREF(et);
    Py_XDECREF(ev);
    Py_XDECREF(tb);
    PyErr_Restore(nt, nv, ntb);
    return NULL;
  }
  Py_XDECREF(et);
  Py_XDECREF(ev);
  Py_XDECREF(tb);
  return r;
}

/* A kernel declared `; effects` (cold: only such kernels come here). While a framework
 * traces (jax.jit, ...), its result would become a constant of the traced program, run
 * once: dlx._trace.effects stages the call instead, even when no argument is traced, and
 * gives the staged result (or its error); NotImplemented when nothing traces: the call
 * then runs now. `objs`: the arguments bound in declared order, defaults filled. */
static __attribute__((noinline, cold)) PyObject *effects_staged(const dlx_kernel_info *k,
                                                                PyObject *const *objs,
                                                                int32_t n) {
  if (!k->self) return Py_NewRef(Py_NotImplemented);
  /* sys.modules' entry when there is one: a fraction of an import statement's cost */
  PyObject *name = PyUnicode_InternFromString("dlx._trace");
  PyObject *mod = name ? PyImport_GetModule(name) : NULL;
  if (!mod && name && !PyErr_Occurred()) mod = PyImport_Import(name);
  Py_XDECREF(name);
  PyObject *args = mod ? PyTuple_New(n) : NULL;
  PyObject *r = NULL;
  if (args) {
    for (int32_t i = 0; i < n; ++i) PyTuple_SET_ITEM(args, i, Py_NewRef(objs[i]));
    r = PyObject_CallMethod(mod, "effects", "OO", k->self, args);
  }
  Py_XDECREF(mod);
  Py_XDECREF(args);
  return r;
}

/* A tensor on a device: the call's device is the first one's; another device is refused.
 * -1 with the error (arguments up to `i` are converted). Cold next to CPU tensors. */
static __attribute__((noinline)) int on_device(call_state *st, int32_t i, int32_t *device_arg) {
  DLDevice dev = st->argv[i].value.tensor->device;
  if (*device_arg < 0) {
    *device_arg = i;
    st->pub.device = dev;
    return 0;
  }
  if (same_device(dev, st->pub.device)) return 0;
  device_mismatch(st, *device_arg, st->pub.device, i, dev);
  return -1;
}

/* A tensor argument just converted by dlx_convert_arg: its device. */
static inline int tensor_converted(call_state *st, int32_t i, int32_t *device_arg) {
  if (st->argv[i].value.tensor->device.device_type == kDLCPU) return 0;
  return on_device(st, i, device_arg);
}

/* ---- torch's rules (torch_parity.c): calls that met a torch table only ---------------- */

/* The parity hooks of argument i, when it came through a torch table's checked copy. */
static inline const dlx_torch_parity *torch_hooks(const call_state *st, int32_t i) {
  return st->argv[i].kind == DLX_ARG_TENSOR && st->slots[i].api
             ? dlx_torch_hooks_of(st->slots[i].api)
             : NULL;
}


/* Before the kernel: a kernel registered as an operator takes the operator's path while a
 * torch mode or the profiler watches (dlx_torch_operator_path, for dlx._trace); a `mut`
 * tensor torch would not write is refused, naming the parameter. 0, or -1 with the error. */
static __attribute__((noinline)) int torch_before(call_state *st) {
  const dlx_kernel_info *k = st->k;
  int32_t n = st->pub.num_args;
  if (dlx_relaxed_load(&k->torch_op) && !dlx_torch_direct) {
    for (int32_t i = 0; i < n; ++i) {
      const dlx_torch_parity *h = torch_hooks(st, i);
      if (!h) continue;
      int watched = h->modes();
      if (watched > 0)
        PyErr_SetString(dlx_torch_operator_path,
                        "a torch mode or the profiler is active: the operator's path serves");
      if (watched) return -1;
      break;
    }
  }
  for (uint64_t m = k->mut_params & ~st->versions; m; m &= m - 1) {
    int32_t i = __builtin_ctzll(m); /* (a slot with a counter passed the test in view_mut) */
    const dlx_torch_parity *h = torch_hooks(st, i);
    if (h && h->writable(st->objs[i])) {
      dlx_prefix_error("%s(): '%s' ", k->name, dlx_sig_param_name(k->sig, i));
      st->prefixed = 1;
      return -1;
    }
  }
  return 0;
}

/* torch_before refused (cold): release, then dlx._trace may claim the call. */
static __attribute__((noinline, cold)) PyObject *torch_refused(call_state *st) {
  int reroute = PyErr_ExceptionMatches(dlx_torch_operator_path);
  release_all(st, NULL);
  if (!reroute) return NULL;
  /* release_all named the kernel; dlx._trace's handler speaks for itself */
  return traced_or_raise(st->k, st->objs, st->pub.num_args, NULL);
}

/* After the kernel wrote: each `mut` torch tensor's version counter, once, as torch's
 * in-place operators bump it (autograd checks it on the tensors it saved). */
static __attribute__((noinline)) int torch_written(call_state *st) {
  for (uint64_t m = st->versions; m; m &= m - 1) /* view_mut's counters: no hook */
    __atomic_fetch_add(st->slots[__builtin_ctzll(m)].version, 1, __ATOMIC_SEQ_CST);
  for (uint64_t m = st->k->mut_params & ~st->versions; m; m &= m - 1) {
    int32_t i = __builtin_ctzll(m);
    const dlx_torch_parity *h = torch_hooks(st, i);
    if (h && h->bump(st->objs[i])) return -1;
  }
  return 0;
}

/* After conversion: the stream, the kernel (without the GIL when `nogil`), its results,
 * the releases. */
static inline __attribute__((always_inline)) PyObject *run_call(call_state *st,
                                                                PyObject *const *objs,
                                                                int32_t device_arg, int nogil) {
  const dlx_kernel_info *k = st->k;
  if (__builtin_expect(st->flags & DLX_CONVERT_TORCH, 0) &&
      ((k->mut_params & ~st->versions) || dlx_relaxed_load(&k->torch_op)) &&
      torch_before(st))
    return torch_refused(st);
  /* The stream is the caller's, on this thread, now: asked once, never cached. CPU-only
   * calls have none (and no deferred producer: those are on a device). */
  if (device_arg >= 0) {
    const DLPackExchangeAPI *api = st->slots[device_arg].api;
    if (__builtin_expect(dlx_relaxed_load(&dlx_stream_pending) != 0, 0)) {
      if (finish_streams(st, objs, st->argv, st->slots, k->sig ? &st->binds : NULL))
        return call_failed(st);
    } else if (api && api->current_work_stream(st->pub.device.device_type,
                                               st->pub.device.device_id, &st->pub.stream)) {
      if (!PyErr_Occurred())
        PyErr_SetString(PyExc_RuntimeError, "current_work_stream failed without an error");
      return call_failed(st);
    }
  }
  int rc;
  if (nogil) {
    st->exc_type = st->exc_value = st->exc_tb = NULL;
    PyThreadState *ts = dlx_gil_release();
    st->released = 1;
    rc = k->fn(&st->pub);
    st->released = 0;
    dlx_gil_reacquire(ts);
    if (st->exc_type) PyErr_Restore(st->exc_type, st->exc_value, st->exc_tb);
  } else {
    rc = k->fn(&st->pub);
  }
  if (__builtin_expect(rc != 0 || st->failed, 0) || PyErr_Occurred()) return kernel_failed(st, rc);
  if (__builtin_expect(st->flags & DLX_CONVERT_TORCH, 0) && k->mut_params) {
    if (__builtin_expect(k->mut_params == st->versions, 1)) { /* every counter in hand */
      for (uint64_t m = st->versions; m; m &= m - 1)
        __atomic_fetch_add(st->slots[__builtin_ctzll(m)].version, 1, __ATOMIC_SEQ_CST);
    } else if (torch_written(st)) {
      return call_failed(st);
    }
  }
  PyObject *result = st->nresults == 0 ? Py_NewRef(Py_None) : build_result(st);
  if (__builtin_expect(!result || st->nowners, 0)) return release_all(st, result);
  dlx_call_leave();
  return result;
}

/* An ndarray of a type whose cache entry (a hit) has numpy's own view: viewed in line,
 * as dlx_convert_arg would (1), or 0 when it needs the general path. */
static inline int numpy_vouched(const dlx_type_info *info, PyObject *obj,
                                dlx_arg *a, dlx_slot *slot) {
  if (info->scratch_view != dlx_numpy_scratch_view ||
      !dlx_numpy_view_fast(obj, &slot->view, slot->scratch, &a->readonly))
    return 0;
  a->kind = DLX_ARG_TENSOR;
  a->value.tensor = &slot->view;
  slot->api = info->api;
  return 1;
}

/* An ndarray type the cache vouched for in this call, since when nothing but dlx's own
 * code ran (no table, no Python code could have replaced its table): its next arrays are
 * viewed in line without a cache lookup. */
typedef struct vouched {
  PyTypeObject *type;
  const DLPackExchangeAPI *api; /* its table */
} vouched;

/* Argument i in line when it is an array of the vouched ndarray type that needs no more
 * than the fast view: 1, else 0 (nothing written that matters). */
static inline __attribute__((always_inline)) int numpy_in_line(call_state *st, int32_t i,
                                                               PyObject *obj, PyTypeObject *tp,
                                                               const vouched *np) {
  dlx_arg *a = &st->argv[i];
  dlx_slot *slot = &st->slots[i];
  if (tp != np->type || !dlx_numpy_view_fast(obj, &slot->view, slot->scratch, &a->readonly))
    return 0;
  a->kind = DLX_ARG_TENSOR;
  a->value.tensor = &slot->view;
  slot->api = np->api;
  return 1;
}

/* The start of every call: vouched for ndarray when the cache has found it on dlx's numpy
 * provider (dlx_numpy_vouched), which saves the first array its cache lookup. */
static inline vouched vouched_at_start(void) {
  return (vouched){dlx_relaxed_load(&dlx_numpy_vouched), dlx_numpy_api};
}

/* A call's loop begins, its state set: the ndarray type vouched for now, and the call
 * counted in (the tables it uses stay alive until it leaves). */
static inline vouched call_begin(void) {
  const vouched np = vouched_at_start();
  dlx_call_enter();
  return np;
}

/* Argument i of the call's own-view type (st->own_type) into its slot: described in line
 * from the plain layout when it is a plain tensor (dlx_plain_view.h), else the view (for
 * a `mut` parameter, with its version counter), without the dims check. The flags of
 * dlx_convert_view (with_flags: a constant), or -1 as it. */
static inline __attribute__((always_inline)) int own_view(call_state *st, int32_t i,
                                                          PyObject *obj, int with_flags,
                                                          int mut) {
  dlx_arg *a = &st->argv[i];
  dlx_slot *slot = &st->slots[i];
  const DLPackExchangeAPI *api = st->own_api;
  slot->api = api;
  a->kind = DLX_ARG_TENSOR; /* also when it fails: the caller then releases the slot */
  a->readonly = 0;
  a->value.tensor = &slot->view;
  const dlx_torch_plain *plain = st->own_plain;
  if (plain && dlx_plain_view_known(st->own_known, plain, obj, &slot->view,
                                    mut ? &slot->version : NULL)) {
    if (mut) st->versions |= 1ull << i;
    return with_flags ? DLX_CONVERT_TORCH : 0; /* described in line, as the view would */
  }
  int failed;
  if (mut && st->own_view_mut) {
    failed = st->own_view_mut(obj, &slot->view, &slot->version);
    if (!failed && slot->version) st->versions |= 1ull << i;
  } else {
    failed = api->dltensor_from_py_object_no_sync(obj, &slot->view);
  }
  if (__builtin_expect(failed, 0)) return dlx_view_failed(a, slot);
  return with_flags ? DLX_CONVERT_TORCH : 0; /* the addon's table is a checked copy */
}

/* A cache hit whose table is dlx's addon (views_writable): vouched for the rest of the
 * call, then own_view. */
static inline __attribute__((always_inline)) int own_vouched(call_state *st, int32_t i,
                                                             PyObject *obj, PyTypeObject *tp,
                                                             const dlx_type_info *info,
                                                             int with_flags, int mut) {
  st->own_type = tp;
  st->own_api = info->api;
  st->own_view_mut = info->view_mut;
  /* the layout published now, read once: a later one does not undo this one */
  const dlx_torch_plain *plain =
      info->plain ? __atomic_load_n(info->plain, __ATOMIC_ACQUIRE) : NULL;
  st->own_plain = plain && plain->type == (const void *)tp ? plain : NULL;
  st->own_known = info->plain_known;
  return own_view(st, i, obj, with_flags, mut);
}

/* Argument i, an object the loop took neither in line as a scalar nor by numpy_in_line,
 * into its slot by the quickest path that gives what dlx_convert_arg gives:
 * DLX_CONVERT_NUMPY for an ndarray (host memory, owns nothing), else dlx_convert_arg's
 * result (-1 with an exception; the slot is the caller's to release then). Both loops
 * share it; own_tested (a constant): the caller compared tp with st->own_type already. */
static inline __attribute__((always_inline)) int convert_rest(call_state *st, int32_t i,
                                                              PyObject *obj, PyTypeObject *tp,
                                                              vouched *np, int with_flags,
                                                              int own_tested) {
  dlx_arg *a = &st->argv[i];
  dlx_slot *slot = &st->slots[i];
  if (!own_tested && tp == st->own_type) return own_view(st, i, obj, with_flags, 0);
  const dlx_type_info *info = dlx_type_info_hit(tp);
  if (info && info->view) {
    np->type = NULL; /* the table's code runs */
    if (info->views_writable) return own_vouched(st, i, obj, tp, info, with_flags, 0);
    return dlx_convert_view(info, obj, a, slot, with_flags);
  }
  if (info && numpy_vouched(info, obj, a, slot)) {
    np->type = tp;
    np->api = info->api;
    return DLX_CONVERT_NUMPY;
  }
  int rc = dlx_convert_arg(obj, i, a, slot);
  np->type = rc == DLX_CONVERT_NUMPY ? tp : NULL;
  np->api = slot->api;
  return rc;
}

/* The type info of a `mut` tensor's type the cache has not seen (cold): NULL when the
 * type yields no tensor (the general path then raises, naming the parameter). */
static __attribute__((noinline, cold)) const dlx_type_info *mut_type_miss(PyTypeObject *tp) {
  const dlx_type_info *info = dlx_type_info_miss(tp);
  if (!info) PyErr_Clear();
  return info;
}

/* Argument i in line, as both unsigned loops take it first: an array of the vouched
 * ndarray type (host memory), an exact int that fits, an exact float. 1 when taken. */
static inline __attribute__((always_inline)) int in_line(call_state *st, int32_t i,
                                                         PyObject *obj, PyTypeObject *tp,
                                                         dlx_arg *a, vouched *np) {
  if (__builtin_expect(numpy_in_line(st, i, obj, tp, np), 1)) return 1;
  if (tp == &PyLong_Type && dlx_long_compact(obj, &a->value.i)) {
    a->kind = DLX_ARG_INT;
    a->readonly = 0;
    return 1;
  }
  if (tp == &PyFloat_Type) {
    a->kind = DLX_ARG_FLOAT;
    a->readonly = 0;
    a->value.f = PyFloat_AS_DOUBLE(obj);
    return 1;
  }
  return 0;
}

/* The unsigned loop from argument i on, every kind of argument: table views (the torch
 * addon's plain tensors in line) among them. Arguments before i are host memory or
 * scalars. In line in its two callers below. */
static inline __attribute__((always_inline)) PyObject *unsigned_loop(
    call_state *st, const dlx_kernel_info *k, PyObject *const *args, int32_t nargs, int32_t i,
    vouched np) {
  int32_t device_arg = -1;
  for (; i < nargs; ++i) {
    PyObject *obj = args[i];
    PyTypeObject *tp = Py_TYPE(obj);
    dlx_arg *a = &st->argv[i];
    if (in_line(st, i, obj, tp, a, &np)) continue;
    int rc = convert_rest(st, i, obj, tp, &np, 0, 0); /* no parity work: no flags */
    if (rc == DLX_CONVERT_NUMPY) continue; /* host memory, owns nothing */
    if (__builtin_expect(rc != 0, 0)) {
      if (rc < 0) {
        convert_failed(st, i, obj);
        return traced_or_raise(k, args, nargs, NULL);
      }
      st->flags |= rc;
      if (rc & DLX_CONVERT_RELEASE) st->owners[st->nowners++] = i;
    }
    if (a->kind == DLX_ARG_TENSOR && tensor_converted(st, i, &device_arg))
      return device_refused(st, i);
  }
  return run_call(st, args, device_arg, 0);
}

/* The rest of an array call's loop, from the first object that is neither an array of the
 * vouched ndarray type nor a scalar. */
static __attribute__((noinline)) PyObject *unsigned_rest(call_state *st, const dlx_kernel_info *k,
                                                         PyObject *const *args, int32_t nargs,
                                                         int32_t i, vouched np) {
  return unsigned_loop(st, k, args, nargs, i, np);
}

/* A call whose first argument is neither: its state on its own frame, the whole loop. */
static __attribute__((noinline)) PyObject *call_unsigned_any(const dlx_kernel_info *k,
                                                             PyObject *const *args,
                                                             int32_t nargs) {
  call_state st; /* field by field (state_init): an initializer would zero it all */
  state_init(&st, k, nargs, MAX_RESULTS, args);
  vouched np = call_begin();
  return unsigned_loop(&st, k, args, nargs, 0, np);
}

/* Kernels without a signature: positional arguments, each converted by what it is. Two
 * loops, so that each keeps its registers for what it meets most: a call that starts with
 * an array of the vouched ndarray type takes call_unsigned_arrays, arrays and scalars in
 * line, which hands the rest to unsigned_rest at the first other object; any other call
 * (a torch tensor first, a scalar, none) takes call_unsigned_any. */
static __attribute__((noinline)) PyObject *call_unsigned_arrays(const dlx_kernel_info *k,
                                                                PyObject *const *args,
                                                                int32_t nargs) {
  call_state st; /* field by field (state_init): an initializer would zero it all */
  state_init(&st, k, nargs, MAX_RESULTS, args);
  vouched np = call_begin();
  for (int32_t i = 0; i < nargs; ++i) {
    PyObject *obj = args[i];
    PyTypeObject *tp = Py_TYPE(obj);
    dlx_arg *a = &st.argv[i];
    if (in_line(&st, i, obj, tp, a, &np)) continue;
    return unsigned_rest(&st, k, args, nargs, i, np);
  }
  return run_call(&st, args, -1, 0); /* host memory and scalars only: no device */
}

static inline PyObject *call_unsigned(const dlx_kernel_info *k, PyObject *const *args,
                                      int32_t nargs) {
  if (nargs > 0 && Py_TYPE(args[0]) == dlx_relaxed_load(&dlx_numpy_vouched))
    return call_unsigned_arrays(k, args, nargs);
  return call_unsigned_any(k, args, nargs);
}

/* A declared int or float parameter given an exact int that fits or an exact float, into
 * argument a: 1 when taken, 0 for the general conversion. Both signed loops start so. */
static inline __attribute__((always_inline)) int scalar_in_line(const dlx_sig_quick *q,
                                                                PyObject *obj, PyTypeObject *tp,
                                                                dlx_arg *a) {
  if (q->kind == DLX_SIG_INT && tp == &PyLong_Type && dlx_long_compact(obj, &a->value.i)) {
    a->kind = DLX_ARG_INT;
    a->readonly = 0;
    return 1;
  }
  if (q->kind == DLX_SIG_FLOAT && tp == &PyFloat_Type) {
    a->kind = DLX_ARG_FLOAT;
    a->readonly = 0;
    a->value.f = PyFloat_AS_DOUBLE(obj);
    return 1;
  }
  return 0;
}

/* Signed calls start here: the declared parameters' state, the size symbols unbound. */
static inline void signed_init(call_state *st, const dlx_kernel_info *k, PyObject *const *objs) {
  state_init(st, k, k->sig->nparams, k->sig->nresults, objs);
  st->versions = 0;
  dlx_sig_bindings_init(&st->binds, k->sig);
}

/* The signed loop from parameter i on, every kind of argument; parameters before i are
 * in their slots already (vouched ndarrays, scalars). In line in its two callers below. */
static inline __attribute__((always_inline)) PyObject *signed_loop(call_state *st,
                                                                   const dlx_kernel_info *k,
                                                                   PyObject *const *objs,
                                                                   int32_t i, vouched npv) {
  const dlx_sig *sig = k->sig;
  const int32_t np = sig->nparams;
  dlx_sig_bindings *const binds = &st->binds;
  int32_t device_arg = -1;
  const dlx_sig_quick *q = k->quick + i;
  for (; i < np; ++i, ++q) {
    PyObject *obj = objs[i];
    PyTypeObject *tp = Py_TYPE(obj);
    dlx_arg *a = &st->argv[i];
    dlx_slot *slot = &st->slots[i];
    if (q->kind != DLX_SIG_TENSOR || obj == Py_None) {
      /* declared scalars: exact ints and floats in line, the rest (and None) by kind */
      if (scalar_in_line(q, obj, tp, a)) continue;
      if (convert_other(k, i, obj, a, slot)) { /* holds nothing */
        param_refused(st, i);
        return traced_or_raise(k, objs, np, NULL);
      }
      if (a->kind == DLX_ARG_INTS || a->kind == DLX_ARG_FLOATS) st->owners[st->nowners++] = i;
      continue;
    }
    int rc;
    /* A call that starts with arrays is signed_arrays's: here the addon's type first */
    if (tp == st->own_type) { /* the addon's type, met earlier in this call: st->flags has
                                its flags, the view holds nothing to release */
      if (__builtin_expect(q->mut ? own_view(st, i, obj, 0, 1) : own_view(st, i, obj, 0, 0),
                           0)) {
        convert_failed(st, i, obj);
        return traced_or_raise(k, objs, np, NULL);
      }
      goto viewed;
    }
    if (numpy_in_line(st, i, obj, tp, &npv)) { /* the vouched ndarray */
      rc = DLX_CONVERT_NUMPY;
      goto converted;
    }
    /* A `mut` tensor of a table type: a table's view export carries no flags (DLPack's
     * READ_ONLY travels with the owned export only), so the owned export is asked and a
     * read-only tensor is refused by the check; a table known never to export a read-only
     * tensor (dlx's addon) is viewed as usual. Everything else (numpy, __dlpack__,
     * buffers) carries its flags already; an ndarray type vouched for costs one compare. */
    if (__builtin_expect(q->mut, 0) && tp != npv.type) {
      const dlx_type_info *info = dlx_type_info_hit(tp);
      if (!info) info = mut_type_miss(tp);
      if (info && info->view && info->views_writable) {
        rc = own_vouched(st, i, obj, tp, info, 1, 1);
        goto converted;
      }
      if (info && info->view) {
        npv.type = NULL; /* the table's code runs */
        int flags = info->call_flags; /* `info` may be refilled by the export */
        rc = dlx_convert_owned(info->api, obj, a, slot);
        if (rc > 0) rc |= flags;
        goto converted;
      }
    }
    rc = convert_rest(st, i, obj, tp, &npv, 1, 1); /* own type tested above */
  converted:
    if (rc == DLX_CONVERT_NUMPY) { /* a host tensor owning nothing: only its check */
      if (__builtin_expect(dlx_sig_check_quick(q, i, a->value.tensor, a->readonly, binds), 0) &&
          check_declared(k, i, obj, a, slot, binds))
        return param_refused(st, i);
      continue;
    }
    if (rc < 0) {
      convert_failed(st, i, obj);
      return traced_or_raise(k, objs, np, NULL);
    }
    st->flags |= rc;
    if (rc & DLX_CONVERT_RELEASE) st->owners[st->nowners++] = i;
    /* A deferred producer is checked once exported (finish_streams). */
    if (rc & DLX_CONVERT_DEFERRED) goto placed;
  viewed: /* the full check also refuses what is no tensor (a scalar, a list: released there) */
    if (__builtin_expect(a->kind != DLX_ARG_TENSOR ||
                             dlx_sig_check_quick(q, i, a->value.tensor, a->readonly, binds),
                         0) &&
        check_declared(k, i, obj, a, slot, binds)) {
      param_refused(st, i);
      return traced_or_raise(k, objs, np, NULL);
    }
  placed:
    if (tensor_converted(st, i, &device_arg)) return device_refused(st, i);
  }
  return run_call(st, objs, device_arg, (sig->options & DLX_SIG_NOGIL) != 0);
}

/* The rest of a signed array call, from the first parameter that is neither a vouched
 * ndarray nor an exact int or float. */
static __attribute__((noinline)) PyObject *signed_rest(call_state *st, const dlx_kernel_info *k,
                                                       PyObject *const *objs, int32_t i,
                                                       vouched npv) {
  return signed_loop(st, k, objs, i, npv);
}

/* A signed call whose first argument is an ndarray of the vouched type: arrays and exact
 * scalars in line with their checks, on a frame of its own (the torch path's registers
 * would spill in numpy's way, as in the unsigned loop), the rest in signed_rest. */
static __attribute__((noinline)) PyObject *signed_arrays(const dlx_kernel_info *k,
                                                         PyObject *const *objs) {
  const dlx_sig *sig = k->sig;
  const int32_t np = sig->nparams;
  call_state st;
  signed_init(&st, k, objs);
  vouched npv = call_begin();
  const dlx_sig_quick *q = k->quick;
  for (int32_t i = 0; i < np; ++i, ++q) {
    PyObject *obj = objs[i];
    PyTypeObject *tp = Py_TYPE(obj);
    dlx_arg *a = &st.argv[i];
    if (q->kind == DLX_SIG_TENSOR) {
      if (!numpy_in_line(&st, i, obj, tp, &npv)) return signed_rest(&st, k, objs, i, npv);
      if (__builtin_expect(dlx_sig_check_quick(q, i, a->value.tensor, a->readonly, &st.binds),
                           0) &&
          check_declared(k, i, obj, a, &st.slots[i], &st.binds))
        return param_refused(&st, i);
      continue;
    }
    if (scalar_in_line(q, obj, tp, a)) continue;
    return signed_rest(&st, k, objs, i, npv);
  }
  return run_call(&st, objs, -1, (sig->options & DLX_SIG_NOGIL) != 0); /* host memory only */
}

/* The general loop from the first parameter, on a frame of its own. */
static __attribute__((noinline)) PyObject *signed_general(const dlx_kernel_info *k,
                                                          PyObject *const *objs) {
  call_state st;
  signed_init(&st, k, objs);
  vouched npv = call_begin();
  return signed_loop(&st, k, objs, 0, npv);
}

/* A signed call from its first parameter: arrays first on their own loop (signed_arrays),
 * else the general one. */
static inline __attribute__((always_inline)) PyObject *signed_from_first(
    const dlx_kernel_info *k, PyObject *const *objs) {
  if (k->sig->nparams > 0 && Py_TYPE(objs[0]) == dlx_relaxed_load(&dlx_numpy_vouched))
    return signed_arrays(k, objs);
  return signed_general(k, objs);
}

/* A call that binds by keyword (or fills defaults), or an effectful kernel's: the
 * arguments in parameter order on this frame, then the loops. */
static __attribute__((noinline)) PyObject *call_signed_bound(const dlx_kernel_info *k,
                                                             PyObject *const *args,
                                                             Py_ssize_t nargs, PyObject *kwnames) {
  const dlx_sig *sig = k->sig;
  PyObject *bound[DLX_MAX_ARGS];
  PyObject *const *objs = args; /* the arguments in parameter order */
  if (kwnames || nargs != sig->nparams) { /* else: all given by position, nothing to bind */
    if (bind_args(k, args, nargs, kwnames, bound)) return NULL;
    objs = bound;
  }
  /* effectful kernels ask whether a trace must stage them */
  if (__builtin_expect(sig->options & DLX_SIG_EFFECTS, 0)) {
    PyObject *r = effects_staged(k, objs, sig->nparams);
    if (r != Py_NotImplemented) return r; /* the staged call's result, or NULL */
    Py_DECREF(r);
  }
  return signed_from_first(k, objs);
}

/* Whether the keywords name the parameters after the positional ones, each once, in
 * declared order (`f(a, y=b, z=c)`, `f(x=a, y=b, z=c)`): vectorcall lays their values out
 * right after the positional ones, so `args` is already in parameter order and there is
 * nothing to bind. One pointer compare a keyword: the parameters' names are interned, and
 * so are the keywords of a call written in source; any other name takes bind_args. */
static inline int keywords_in_order(const dlx_kernel_info *k, Py_ssize_t nargs,
                                     PyObject *kwnames) {
  const Py_ssize_t nkw = PyTuple_GET_SIZE(kwnames);
  if (nargs + nkw != k->sig->nparams) return 0;
  PyObject *const *names = k->param_names + nargs;
  for (Py_ssize_t j = 0; j < nkw; ++j)
    if (PyTuple_GET_ITEM(kwnames, j) != names[j]) return 0;
  return 1;
}

/* Kernels with a signature: bound to the declared parameters, each checked on the plan.
 * The usual call (all by position or by keyword in declared order, a pure kernel) makes
 * tail calls only: the loops' frames are their own. */
static PyObject *call_signed(const dlx_kernel_info *k, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames) {
  const dlx_sig *sig = k->sig;
  if (__builtin_expect(kwnames != NULL || nargs != sig->nparams ||
                           (sig->options & DLX_SIG_EFFECTS) != 0,
                       0)) {
    if (kwnames && !(sig->options & DLX_SIG_EFFECTS) && keywords_in_order(k, nargs, kwnames))
      return signed_from_first(k, args);
    return call_signed_bound(k, args, nargs, kwnames);
  }
  return signed_from_first(k, args);
}

/* An unsigned kernel's arguments refused before conversion (out of line: the call's entry
 * then makes tail calls only). */
static __attribute__((noinline, cold)) PyObject *unsigned_refused(const dlx_kernel_info *k,
                                                                  Py_ssize_t nargs,
                                                                  PyObject *kwnames) {
  if (kwnames && PyTuple_GET_SIZE(kwnames))
    PyErr_Format(PyExc_TypeError,
                 "%s() takes no keyword arguments (its DLX_KERNEL declares no signature)",
                 k->name);
  else
    PyErr_Format(PyExc_TypeError, "%s() takes at most %d arguments (%zd given)", k->name,
                 DLX_MAX_ARGS, nargs);
  return NULL;
}

PyObject *dlx_call_kernel(const dlx_kernel_info *k, PyObject *const *args, Py_ssize_t nargs,
                          PyObject *kwnames) {
  if (k->sig) return call_signed(k, args, nargs, kwnames);
  if (__builtin_expect((kwnames && PyTuple_GET_SIZE(kwnames)) || nargs > DLX_MAX_ARGS, 0))
    return unsigned_refused(k, nargs, kwnames);
  return call_unsigned(k, args, (int32_t)nargs);
}
