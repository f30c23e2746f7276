/*
 * stream.c - the call's stream for producers without a table (issue 13):
 *
 *   override   `with dlx.stream(s):` (python/dlx/__init__.py resolves s to a handle
 *              once, at __enter__); per thread, in C thread-local storage.
 *   pending    one global count: overrides in force (any thread) plus deferred
 *              producers not yet exported (convert.c). While it is 0, a call looks no
 *              further than its tables: one load.
 *   providers  dlx.register_stream_provider(type, fn): fn(device_type, device_id) -> int,
 *              looked up along the producer type's MRO; built in: CuPy arrays,
 *              cupy.cuda.get_current_stream(device_id).ptr (CuPy before 13: no
 *              argument, the current device's), found through sys.modules only (a
 *              CuPy array exists, so CuPy is imported already: dlx never imports it).
 * The decision which source answers is src/core/calls/dlx_stream.c; call.c drives it.
 */
#include "dlx_py.h"

DLX_ATOMIC(unsigned int) dlx_stream_pending;
static _Thread_local int override_active;
static _Thread_local uintptr_t override_handle;

void dlx_stream_settle(const dlx_arg *argv, const dlx_slot *slots, int32_t n) {
  for (int32_t i = 0; i < n; ++i)
    if (dlx_slot_deferred(&argv[i], &slots[i])) dlx_relaxed_sub(&dlx_stream_pending, 1);
}

int dlx_stream_override(uintptr_t *out) {
  if (!override_active) return 0;
  *out = override_handle;
  return 1;
}

/* A stream handle: an int in [0, 2**64). */
static int parse_handle(PyObject *v, uintptr_t *out) {
  if (!PyLong_Check(v)) {
    PyErr_Format(PyExc_TypeError, "a stream handle must be an int, not %.100s",
                 Py_TYPE(v)->tp_name);
    return -1;
  }
  unsigned long long h = PyLong_AsUnsignedLongLong(v);
  if (h == (unsigned long long)-1 && PyErr_Occurred()) {
    PyErr_Clear();
    PyErr_Format(PyExc_ValueError, "a stream handle is an address, 0 <= handle < 2**64; got %R",
                 v);
    return -1;
  }
  *out = (uintptr_t)h;
  return 0;
}

/* _stream_push(handle) -> what was in force before (None or the handle), for _stream_pop */
static PyObject *stream_push(PyObject *self, PyObject *arg) {
  (void)self;
  uintptr_t h;
  if (parse_handle(arg, &h)) return NULL;
  PyObject *prev = override_active ? PyLong_FromSize_t(override_handle) : Py_NewRef(Py_None);
  if (!prev) return NULL;
  if (!override_active) dlx_relaxed_add(&dlx_stream_pending, 1);
  override_active = 1;
  override_handle = h;
  return prev;
}

/* _stream_pop(prev): put back what _stream_push returned */
static PyObject *stream_pop(PyObject *self, PyObject *prev) {
  (void)self;
  if (prev == Py_None) {
    if (override_active) dlx_relaxed_sub(&dlx_stream_pending, 1);
    override_active = 0;
    Py_RETURN_NONE;
  }
  uintptr_t h;
  if (parse_handle(prev, &h)) return NULL;
  if (!override_active) dlx_relaxed_add(&dlx_stream_pending, 1);
  override_active = 1;
  override_handle = h;
  Py_RETURN_NONE;
}

/* _stream_current() -> this thread's override handle, or None */
static PyObject *stream_current(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  if (!override_active) Py_RETURN_NONE;
  return PyLong_FromSize_t(override_handle);
}

/* ---- providers ---- */

static PyObject *registry; /* {type: fn}, made at init; a dict locks itself */

static PyObject *register_stream_provider(PyObject *self, PyObject *const *args, Py_ssize_t n) {
  (void)self;
  if (n != 2) {
    PyErr_SetString(PyExc_TypeError, "register_stream_provider(type, fn) takes two arguments");
    return NULL;
  }
  if (!PyType_Check(args[0])) {
    PyErr_Format(PyExc_TypeError, "register_stream_provider: expected a type, got %.100s",
                 Py_TYPE(args[0])->tp_name);
    return NULL;
  }
  if (args[1] != Py_None && !PyCallable_Check(args[1])) {
    PyErr_Format(PyExc_TypeError,
                 "register_stream_provider: fn must be callable as fn(device_type, device_id) "
                 "-> int (or None to remove it), got %.100s",
                 Py_TYPE(args[1])->tp_name);
    return NULL;
  }
  if (args[1] == Py_None) {
    if (PyDict_DelItem(registry, args[0]) && !PyErr_ExceptionMatches(PyExc_KeyError)) return NULL;
    PyErr_Clear();
  } else if (PyDict_SetItem(registry, args[0], args[1])) {
    return NULL;
  }
  Py_RETURN_NONE;
}

/* _stream_providers() -> {type: fn}: a copy of what is registered (doctor, tests) */
static PyObject *stream_providers(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  return PyDict_Copy(registry);
}

/* CuPy: the module object the cached function came from, and the function (both under
 * cupy_lock); whether it takes the device (CuPy 13: get_current_stream(device_id=-1);
 * before: no arguments). */
static PyObject *cupy_module, *cupy_get_stream;
static DLX_ATOMIC(int) cupy_takes_device;
static dlx_mutex cupy_lock;

/* The CuPy module in sys.modules (a new reference), or NULL (none, or an exception). */
static PyObject *imported_cupy(void) {
  PyObject *name = PyUnicode_FromString("cupy");
  PyObject *cupy = name ? PyImport_GetModule(name) : NULL;
  Py_XDECREF(name);
  return cupy;
}

/* 1 when obj is a cupy.ndarray, 0 not, -1 error. The type's module name is asked first,
 * so that no other producer pays for more; CuPy is never imported here (an array of it
 * exists: it is imported already). */
static int is_cupy_array(PyObject *obj) {
  PyObject *mod = PyObject_GetAttrString((PyObject *)Py_TYPE(obj), "__module__");
  const char *m = mod && PyUnicode_Check(mod) ? PyUnicode_AsUTF8(mod) : NULL;
  int named = m && strncmp(m, "cupy", 4) == 0 && (m[4] == '\0' || m[4] == '.');
  Py_XDECREF(mod);
  PyErr_Clear(); /* a type without __module__ is no CuPy type */
  if (!named) return 0;
  PyObject *cupy = imported_cupy();
  if (!cupy) return PyErr_Occurred() ? -1 : 0;
  PyObject *ndarray = PyObject_GetAttrString(cupy, "ndarray");
  Py_DECREF(cupy);
  if (!ndarray) {
    PyErr_Clear(); /* not the CuPy we know: no built-in provider */
    return 0;
  }
  int rc = PyType_Check(ndarray) ? PyObject_IsInstance(obj, ndarray) : 0;
  Py_DECREF(ndarray);
  return rc;
}

/* The built-in provider's function for the CuPy now in sys.modules (looked up again only
 * when that module object changes). A new reference; NULL with an exception. The lookup
 * runs unlocked (it is Python code); the pair is swapped in under the lock. */
static PyObject *cupy_stream_fn(void) {
  PyObject *cupy = imported_cupy();
  if (!cupy) {
    if (!PyErr_Occurred())
      PyErr_SetString(PyExc_RuntimeError, "a CuPy array was passed but cupy is not imported");
    return NULL;
  }
  DLX_LOCK(&cupy_lock);
  PyObject *fn = cupy == cupy_module ? Py_NewRef(cupy_get_stream) : NULL;
  DLX_UNLOCK(&cupy_lock);
  if (fn) {
    Py_DECREF(cupy);
    return fn;
  }
  PyObject *cuda = PyObject_GetAttrString(cupy, "cuda");
  fn = cuda ? PyObject_GetAttrString(cuda, "get_current_stream") : NULL;
  Py_XDECREF(cuda);
  if (!fn) {
    Py_DECREF(cupy);
    return NULL;
  }
  DLX_LOCK(&cupy_lock);
  PyObject *old_fn = cupy_get_stream, *old_mod = cupy_module;
  cupy_get_stream = Py_NewRef(fn);
  cupy_module = cupy; /* our reference */
  dlx_relaxed_store(&cupy_takes_device, 1);
  DLX_UNLOCK(&cupy_lock);
  Py_XDECREF(old_fn); /* outside the lock: a release may run Python code */
  Py_XDECREF(old_mod);
  return fn;
}

/* The object dlx_stream_provider_find hands out for the built-in CuPy provider. */
static PyObject cupy_marker_obj; /* never a Python object: compared by address only */
#define CUPY_PROVIDER (&cupy_marker_obj)

int dlx_stream_provider_find(PyObject *obj, PyObject **fn) {
  PyObject *mro = Py_TYPE(obj)->tp_mro;
  if (registry && mro && PyTuple_Check(mro)) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(mro); ++i) {
      int found = PyDict_GetItemRef(registry, PyTuple_GET_ITEM(mro, i), fn);
      if (found) return found; /* 1: a reference of ours, for the call */
    }
  }
  int rc = is_cupy_array(obj);
  if (rc <= 0) return rc;
  *fn = CUPY_PROVIDER;
  return 1;
}

void dlx_stream_provider_release(PyObject *fn) {
  if (fn && fn != CUPY_PROVIDER) Py_DECREF(fn);
}

int dlx_stream_provider_call(PyObject *fn, DLDevice dev, uintptr_t *out) {
  PyObject *r;
  if (fn == CUPY_PROVIDER) {
    /* A reference of our own: the call may run code that replaces the cached function. */
    PyObject *get = cupy_stream_fn(), *s = NULL;
    if (!get) return -1;
    /* The current stream of the array's device, which need not be CuPy's current device. */
    if (dlx_relaxed_load(&cupy_takes_device)) {
      s = PyObject_CallFunction(get, "i", (int)dev.device_id);
      if (!s && PyErr_ExceptionMatches(PyExc_TypeError)) { /* an older CuPy: no argument */
        PyErr_Clear();
        dlx_relaxed_store(&cupy_takes_device, 0);
      }
    }
    if (!s && !PyErr_Occurred()) s = PyObject_CallNoArgs(get);
    Py_DECREF(get);
    r = s ? PyObject_GetAttrString(s, "ptr") : NULL;
    Py_XDECREF(s);
    if (!r) return -1;
    if (!PyLong_Check(r)) {
      PyErr_Format(PyExc_TypeError, "cupy.cuda.get_current_stream().ptr is %.100s, not an int",
                   Py_TYPE(r)->tp_name);
      Py_DECREF(r);
      return -1;
    }
  } else {
    /* (ours, from dlx_stream_provider_find: the provider may unregister itself) */
    r = PyObject_CallFunction(fn, "ii", (int)dev.device_type, (int)dev.device_id);
    Py_DECREF(fn);
    if (!r) return -1;
    if (!PyLong_Check(r)) {
      PyErr_Format(PyExc_TypeError,
                   "the stream provider returned %.100s, not an int (a stream handle)",
                   Py_TYPE(r)->tp_name);
      Py_DECREF(r);
      return -1;
    }
  }
  int rc = parse_handle(r, out);
  Py_DECREF(r);
  return rc;
}

static PyMethodDef stream_methods[] = {
    {"_stream_push", stream_push, METH_O, "_stream_push(handle) -> previous (None or handle)"},
    {"_stream_pop", stream_pop, METH_O, "_stream_pop(previous): undo _stream_push"},
    {"_stream_current", stream_current, METH_NOARGS,
     "_stream_current() -> this thread's override handle, or None"},
    {"register_stream_provider", (PyCFunction)(void (*)(void))register_stream_provider,
     METH_FASTCALL,
     "register_stream_provider(type, fn): fn(device_type, device_id) -> int gives the stream "
     "for device tensors of `type` that bring no exchange table (None removes it)"},
    {"_stream_providers", stream_providers, METH_NOARGS, "{type: fn} registered"},
    {NULL, NULL, 0, NULL}};

int dlx_stream_init(PyObject *module) {
  registry = PyDict_New();
  return registry ? PyModule_AddFunctions(module, stream_methods) : -1;
}
