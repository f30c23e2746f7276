/*
 * jax_table.c - a DLPack exchange table for jax.Array, written by dlx.
 *
 * JAX brings no exchange table, and its arrays are immutable: what a kernel gets from
 * one must be read-only, and a kernel's new result for a call that passed JAX arrays
 * should come back as a jax.Array. This provider does both through JAX's own DLPack
 * entry points, so it needs no link to jaxlib:
 *   export   array.__dlpack__(max_version=(1, 3)); JAX answers with a legacy capsule,
 *            which is wrapped into a versioned tensor flagged READ_ONLY
 *   import   jax.dlpack.from_dlpack(host array): dlx's numpy table turns the tensor
 *            into an ndarray first (JAX takes objects, not capsules)
 *   allocate host memory through dlx's numpy table (JAX on the CPU)
 *   stream   none: JAX exposes no current stream to ask. So this table serves host
 *            arrays only: a JAX array on a device with streams is exported like any
 *            __dlpack__ producer, with the call's stream (convert.c, dlx_jax_device_table)
 * Registered lazily (python/dlx/__init__.py): the first jax.Array that reaches a call
 * installs it, so `import dlx` never imports jax.
 */
#include "dlx_py.h"

/* A legacy export seen as a versioned one: JAX's tensor and deleter, dlx's flags. */
typedef struct jax_export {
  DLManagedTensorVersioned m;
  DLManagedTensor *legacy;
} jax_export;

static PyObject *from_dlpack; /* jax.dlpack.from_dlpack, looked up once (from_dlpack_lock) */
static dlx_mutex from_dlpack_lock;

static void legacy_deleter(DLManagedTensorVersioned *m) {
  jax_export *e = (jax_export *)m;
  if (e->legacy->deleter) e->legacy->deleter(e->legacy);
  PyMem_RawFree(e);
}

static int jax_from_py(void *py_object, DLManagedTensorVersioned **out) {
  PyObject *cap = dlx_call_dlpack(py_object, NULL, 0);
  if (!cap) return -1;
  int rc = -1;
  if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
    DLManagedTensorVersioned *m = PyCapsule_GetPointer(cap, "dltensor_versioned");
    PyCapsule_SetName(cap, "used_dltensor_versioned"); /* consumed: ours to delete */
    m->flags |= DLPACK_FLAG_BITMASK_READ_ONLY;
    *out = m;
    rc = 0;
  } else if (PyCapsule_IsValid(cap, "dltensor")) {
    jax_export *e = PyMem_RawMalloc(sizeof *e);
    if (!e) {
      PyErr_NoMemory(); /* the capsule keeps the tensor and frees it */
    } else {
      DLManagedTensor *legacy = PyCapsule_GetPointer(cap, "dltensor");
      PyCapsule_SetName(cap, "used_dltensor");
      *e = (jax_export){.m = {.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION},
                              .manager_ctx = legacy,
                              .deleter = legacy_deleter,
                              .flags = DLPACK_FLAG_BITMASK_READ_ONLY,
                              .dl_tensor = legacy->dl_tensor},
                        .legacy = legacy};
      *out = &e->m;
      rc = 0;
    }
  } else {
    PyErr_Format(PyExc_TypeError, "%.100s.__dlpack__() returned %.100s, not a DLPack capsule",
                 Py_TYPE(py_object)->tp_name, Py_TYPE(cap)->tp_name);
  }
  Py_DECREF(cap);
  return rc;
}

static int jax_to_py(DLManagedTensorVersioned *m, void **out) {
  const DLPackExchangeAPI *np = dlx_numpy_table();
  DLX_LOCK(&from_dlpack_lock);
  PyObject *fn = Py_XNewRef(from_dlpack);
  DLX_UNLOCK(&from_dlpack_lock);
  if (!fn) { /* looked up unlocked (Python code); the first one kept */
    PyObject *mod = PyImport_ImportModule("jax.dlpack");
    fn = mod ? PyObject_GetAttrString(mod, "from_dlpack") : NULL;
    Py_XDECREF(mod);
    DLX_LOCK(&from_dlpack_lock);
    if (fn && !from_dlpack) from_dlpack = Py_NewRef(fn);
    DLX_UNLOCK(&from_dlpack_lock);
  }
  if (!np || !fn) {
    Py_XDECREF(fn);
    if (m->deleter) m->deleter(m); /* the import owns `m`, also when it fails */
    return -1;
  }
  void *arr = NULL;
  if (np->managed_tensor_to_py_object_no_sync(m, &arr)) { /* it released `m` */
    Py_DECREF(fn);
    return -1;
  }
  PyObject *r = PyObject_CallOneArg(fn, arr);
  Py_DECREF(fn);
  Py_DECREF((PyObject *)arr);
  if (!r) return -1;
  *out = r;
  return 0;
}

static int jax_alloc(DLTensor *proto, DLManagedTensorVersioned **out, void *ctx,
                     void (*SetError)(void *, const char *, const char *)) {
  if (proto->device.device_type != kDLCPU) {
    char msg[160];
    snprintf(msg, sizeof msg, "dlx's JAX provider allocates host memory only, not device type %d",
             (int)proto->device.device_type);
    SetError(ctx, "ValueError", msg);
    return -1;
  }
  const DLPackExchangeAPI *np = dlx_numpy_table();
  if (!np) {
    PyErr_Clear();
    SetError(ctx, "ImportError", "dlx's JAX provider needs numpy to allocate");
    return -1;
  }
  return np->managed_tensor_allocator(proto, out, ctx, SetError);
}

static const DLPackExchangeAPI jax_api = {
    .header = {.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION}, .prev_api = NULL},
    .managed_tensor_allocator = jax_alloc,
    .managed_tensor_from_py_object_no_sync = jax_from_py,
    .managed_tensor_to_py_object_no_sync = jax_to_py,
    .dltensor_from_py_object_no_sync = NULL,
    .current_work_stream = dlx_no_stream, /* JAX has no current stream to ask */
};

const DLPackExchangeAPI *dlx_jax_device_table;

/* _install_jax(jax.Array, device_backends=True): register the provider for that type and
 * its subclasses. Without device backends (a CPU-only JAX) every array is in host memory:
 * convert.c then skips the device check. Once some JAX had them, the check stays. */
static PyObject *install_jax(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *type;
  int device_backends = 1;
  if (!PyArg_ParseTuple(args, "O|p:_install_jax", &type, &device_backends)) return NULL;
  if (!PyType_Check(type)) {
    PyErr_Format(PyExc_TypeError, "_install_jax: expected jax.Array, got %.100s",
                 Py_TYPE(type)->tp_name);
    return NULL;
  }
  PyObject *capsule = dlx_table_capsule(&jax_api);
  if (!capsule) return NULL;
  /* Before the table can be found: no thread may see it without this (once set, it stays) */
  if (device_backends) dlx_jax_device_table = &jax_api;
  int rc = dlx_register_provider((PyTypeObject *)type, capsule, NULL);
  Py_DECREF(capsule);
  if (rc) return NULL;
  Py_RETURN_NONE;
}

static PyMethodDef jax_methods[] = {
    {"_install_jax", install_jax, METH_VARARGS,
     "_install_jax(jax.Array, device_backends=True): dlx's exchange table for JAX arrays (read-only exports, "
     "results as jax.Array)"},
    {NULL, NULL, 0, NULL}};

int dlx_jax_init(PyObject *module) { return PyModule_AddFunctions(module, jax_methods); }
