/*
 * module.c - dlx._core: module init and the small module-level functions.
 * The user-facing API is re-exported by python/dlx/__init__.py.
 */
#include "dlx_gil.h"
#include "dlx_py.h"

#include "dlx_invoke.h"

static void release_context(PyObject *capsule) { Py_XDECREF(PyCapsule_GetContext(capsule)); }

static PyObject *exchange_api(PyObject *self, PyObject *arg) {
  (void)self;
  PyTypeObject *tp = PyType_Check(arg) ? (PyTypeObject *)arg : Py_TYPE(arg);
  dlx_call_enter(); /* the entry (and its owner) stay while it is read: another thread may
                       refill its slot meanwhile */
  const dlx_type_info *info = dlx_type_info_get(tp);
  PyObject *owner = info && info->source == DLX_SRC_TABLE ? Py_NewRef(info->owner) : NULL;
  const DLPackExchangeAPI *api = owner ? dlx_table_shown(info->api) : NULL;
  int failed = !info;
  dlx_call_leave();
  if (failed) return NULL;
  if (!owner) Py_RETURN_NONE;
  if (PyCapsule_IsValid(owner, DLX_EXCHANGE_API_CAPSULE) &&
      PyCapsule_GetPointer(owner, DLX_EXCHANGE_API_CAPSULE) == (void *)api)
    return owner;
  /* A table found behind prev_api or a legacy int: the new capsule keeps what owns
   * the table alive, so it outlives the type's attribute. */
  PyObject *cap = dlx_table_capsule(api);
  if (cap && (PyCapsule_SetContext(cap, owner) ||
              PyCapsule_SetDestructor(cap, release_context))) {
    Py_CLEAR(cap); /* (no destructor: the reference given to it is ours to drop) */
  }
  if (!cap) Py_DECREF(owner);
  return cap;
}

static PyObject *register_provider(PyObject *self, PyObject *const *args, Py_ssize_t n) {
  (void)self;
  if (n != 2 || !PyType_Check(args[0])) {
    PyErr_SetString(PyExc_TypeError, "register_provider(type, capsule)");
    return NULL;
  }
  if (dlx_register_provider((PyTypeObject *)args[0], args[1], NULL)) return NULL;
  Py_RETURN_NONE;
}

/* Register dlx's numpy table for numpy.ndarray (numpy must be importable). */
static PyObject *install_numpy(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  const DLPackExchangeAPI *api = dlx_numpy_table();
  if (!api) return NULL;
  PyObject *np = PyImport_ImportModule("numpy");
  PyObject *ndarray = np ? PyObject_GetAttrString(np, "ndarray") : NULL;
  PyObject *cap = dlx_table_capsule(api);
  int rc = ndarray && cap && PyType_Check(ndarray)
               ? dlx_register_provider((PyTypeObject *)ndarray, cap, dlx_numpy_scratch_view)
               : -1;
  Py_XDECREF(np);
  Py_XDECREF(ndarray);
  Py_XDECREF(cap);
  if (rc) return NULL;
  Py_RETURN_NONE;
}

static PyObject *stats(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  unsigned long long handoffs, timeouts;
  int spinning;
  dlx_gil_counters(&handoffs, &timeouts, &spinning);
  return Py_BuildValue("{sKsIsKsKsi}", "type_lookups", dlx_relaxed_load(&dlx_stat_type_lookups),
                       "stream_pending", dlx_relaxed_load(&dlx_stream_pending), "gil_handoffs",
                       handoffs, "gil_spin_timeouts", timeouts, "gil_spinning", spinning);
}

/* _gil_spin_ns(ns) -> the previous bound of dlx_gil.h's spin (tests: one long enough that
 * a preempted holder cannot outlast it). 0 under a free-threaded build: nothing spins. */
static PyObject *gil_spin_ns(PyObject *self, PyObject *arg) {
  (void)self;
  long long ns = PyLong_AsLongLong(arg);
  if (ns == -1 && PyErr_Occurred()) return NULL;
  if (ns < 0 || ns > 10000000000LL) {
    PyErr_SetString(PyExc_ValueError, "_gil_spin_ns: 0 to 10 s in ns");
    return NULL;
  }
  return PyLong_FromLongLong(dlx_gil_set_spin_ns(ns));
}

/* The C call path for glue libraries (dlx_invoke.h): a capsule of a static struct. */
static PyObject *invoke_api(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  return PyCapsule_New((void *)&dlx_invoke_api_v1, DLX_INVOKE_API_CAPSULE, NULL);
}

static PyMethodDef methods[] = {
    {"_invoke_api", invoke_api, METH_NOARGS,
     "capsule 'dlx.invoke_api': dlx_invoke_run for glue libraries (XLA handler, torch ops)"},
    {"load", dlx_load, METH_O, "load(path) -> Library: load a shared library of dlx kernels"},
    {"exchange_api", exchange_api, METH_O,
     "exchange_api(type_or_obj) -> capsule or None: the exchange table dlx uses for it"},
    {"register_provider", (PyCFunction)(void (*)(void))register_provider, METH_FASTCALL,
     "register_provider(type, capsule): use this table for a type that cannot carry one"},
    {"_install_numpy", install_numpy, METH_NOARGS, "register dlx's numpy.ndarray table"},
    {"_stats", stats, METH_NOARGS,
     "internal counters (type-cache misses, stream_pending, GIL hand-offs), for tests"},
    {"_gil_spin_ns", gil_spin_ns, METH_O, "_gil_spin_ns(ns) -> previous: the GIL spin's bound"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, .m_name = "dlx._core", .m_doc = "dlx runtime", .m_size = -1,
    .m_methods = methods};

PyMODINIT_FUNC PyInit__core(void) {
  PyObject *m = PyModule_Create(&module_def);
  if (!m) return NULL;
#ifdef Py_GIL_DISABLED
  /* Every shared state is safe without the GIL (docs/design.md, "Threads"): importing dlx
   * leaves a free-threaded interpreter free-threaded. */
  if (PyUnstable_Module_SetGIL(m, Py_MOD_GIL_NOT_USED)) {
    Py_DECREF(m);
    return NULL;
  }
#endif
  if (dlx_tables_init(m) || dlx_torch_parity_init(m) || dlx_library_init(m) ||
      dlx_addon_init(m) || dlx_providers_init(m) || dlx_jax_init(m) || dlx_stream_init(m) ||
      PyModule_AddIntConstant(m, "DLPACK_MAJOR_VERSION", DLPACK_MAJOR_VERSION) ||
      PyModule_AddIntConstant(m, "DLPACK_MINOR_VERSION", DLPACK_MINOR_VERSION) ||
      PyModule_AddIntConstant(m, "ABI_VERSION", DLX_ABI_VERSION) ||
      PyModule_AddIntConstant(m, "MAX_ARGS", DLX_MAX_ARGS)) {
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
