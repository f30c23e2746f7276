/*
 * providers.c - runtime stream providers and the stream overlay.
 *
 * A provider answers "the current stream of device d on this thread" by calling the
 * framework's own raw-stream entry point, so dlx needs no compile-time link to it:
 *   cuda, rocm   torch._C._cuda_getCurrentRawStream(idx)   (ROCm masquerades as CUDA)
 *   torch_npu    torch_npu._C._npu_getCurrentRawStream(idx)
 * The callable is looked up once; the stream it returns is never cached (streams are
 * per thread and change inside `with torch.npu.stream(s):`).
 *
 * Which backend answers for a device type is data (src/core/addon/dlx_backend.c's device
 * map), not code here: kDLExtDev means Ascend only while torch_npu is the active
 * backend, and a future kDLAscend is one more row there.
 *
 * The overlay: a copy of a native exchange table (conversions stay the framework's own,
 * ABI-exact) whose current_work_stream answers the active backend's devices from the
 * provider and delegates every other device to the native function.
 */
#include "dlx_py.h"

#include "dlx_backend.h"

typedef struct {
  const char *module;   /* imported on first use */
  const char *attr;     /* dotted path inside the module */
  PyObject *fn;         /* resolved callable, or NULL until then */
} provider;

static provider providers[DLX_BACKEND_COUNT] = {
    [DLX_BACKEND_CUDA] = {"torch", "_C._cuda_getCurrentRawStream", NULL},
    [DLX_BACKEND_ROCM] = {"torch", "_C._cuda_getCurrentRawStream", NULL},
    [DLX_BACKEND_TORCH_NPU] = {"torch_npu", "_C._npu_getCurrentRawStream", NULL},
};
static DLX_ATOMIC(int) active = DLX_BACKEND_CPU; /* a dlx_backend */
static DLX_ATOMIC(unsigned long long) dlx_stat_provider_calls; /* for provider_info() */
/* providers[].fn once resolved, and the overlay's setting up. Never held across Python
 * code: a resolve runs unlocked and the first result is kept (the same callable). */
static dlx_mutex lock;

/* The callable, a new reference; NULL with an exception. */
static PyObject *resolve(provider *p) {
  DLX_LOCK(&lock);
  PyObject *fn = Py_XNewRef(p->fn);
  DLX_UNLOCK(&lock);
  if (fn) return fn;
  PyObject *obj = PyImport_ImportModule(p->module);
  char path[128];
  snprintf(path, sizeof path, "%s", p->attr);
  for (char *part = path, *dot; obj && part; part = dot) {
    dot = strchr(part, '.');
    if (dot) *dot++ = '\0';
    PyObject *next = PyObject_GetAttrString(obj, part);
    Py_DECREF(obj);
    obj = next;
  }
  if (!obj) {
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyErr_NormalizeException(&et, &ev, &tb);
    PyErr_Format(PyExc_RuntimeError, "no stream provider: %s.%s is not available (%S)",
                 p->module, p->attr, ev ? ev : Py_None);
    Py_XDECREF(et);
    Py_XDECREF(ev);
    Py_XDECREF(tb);
    return NULL;
  }
  DLX_LOCK(&lock);
  if (!p->fn) p->fn = Py_NewRef(obj); /* the callable, kept for the process: looked up once */
  DLX_UNLOCK(&lock);
  return obj;
}

/* Ask backend b's entry point for device `device_id`'s current stream on this thread. */
static int provider_call(dlx_backend b, int32_t device_id, void **out) {
  PyObject *fn = resolve(&providers[b]);
  if (!fn) return -1;
  dlx_relaxed_add(&dlx_stat_provider_calls, 1);
  PyObject *idx = PyLong_FromLong(device_id);
  PyObject *r = idx ? PyObject_CallOneArg(fn, idx) : NULL;
  Py_XDECREF(idx);
  Py_DECREF(fn);
  if (!r) return -1;
  void *stream = PyLong_AsVoidPtr(r);
  Py_DECREF(r);
  if (!stream && PyErr_Occurred()) return -1;
  *out = stream;
  return 0;
}

int dlx_provider_current_stream(DLDeviceType device_type, int32_t device_id, void **out) {
  *out = NULL;
  dlx_backend b;
  if (device_type == kDLCPU ||
      dlx_device_stream_backend(device_type, (dlx_backend)dlx_relaxed_load(&active), &b) != 0 ||
      !providers[b].module)
    return 0; /* no backend claims it: no stream */
  return provider_call(b, device_id, out);
}

/* ---- the overlay ---- */

/* One overlay per process (current_work_stream gets no table pointer, so each overlay
 * needs its own function; torch.Tensor is the only type that needs one). */
static const DLPackExchangeAPI *overlay_native;
static PyObject *overlay_native_owner; /* keeps the native table's capsule alive */
static DLPackExchangeAPI overlay;

/* Devices of the active torch_npu backend come from its provider (native tables have
 * no NPU stream); everything else is the native table's own answer. */
static int overlay_stream(DLDeviceType device_type, int32_t device_id, void **out) {
  dlx_backend b, now = (dlx_backend)dlx_relaxed_load(&active);
  if (now == DLX_BACKEND_TORCH_NPU && device_type != kDLCPU &&
      dlx_device_stream_backend(device_type, now, &b) == 0 && b == DLX_BACKEND_TORCH_NPU)
    return provider_call(b, device_id, out);
  return overlay_native->current_work_stream(device_type, device_id, out);
}

/* stream_overlay(native_capsule) -> capsule of the overlay table over it */
static PyObject *stream_overlay(PyObject *self, PyObject *capsule) {
  (void)self;
  const DLPackExchangeAPI *native = dlx_table_from_capsule(capsule, "native table");
  if (!native) return NULL;
  if (native == &overlay) return Py_NewRef(capsule); /* already in force */
  /* Filled once, before any capsule of it is handed out (the table is never rewritten
   * under a reader: the same native table again leaves it as it is). */
  DLX_LOCK(&lock);
  int other = overlay_native && overlay_native != native;
  if (!other && !overlay_native) {
    overlay_native_owner = Py_NewRef(capsule);
    overlay = *native;
    overlay.header.prev_api = NULL; /* the copy is major 1 itself */
    if (overlay.header.version.minor > DLPACK_MINOR_VERSION) /* only 1.3's fields were copied */
      overlay.header.version.minor = DLPACK_MINOR_VERSION;
    overlay.current_work_stream = overlay_stream;
    overlay_native = native;
  }
  DLX_UNLOCK(&lock);
  if (other) {
    PyErr_SetString(PyExc_RuntimeError,
                    "a stream overlay is already in force over another native table");
    return NULL;
  }
  return dlx_table_capsule(&overlay);
}

static PyObject *set_active_backend(PyObject *self, PyObject *arg) {
  (void)self;
  const char *name = PyUnicode_AsUTF8(arg);
  dlx_backend b;
  if (!name) return NULL;
  if (dlx_backend_parse(name, &b)) {
    PyErr_Format(PyExc_ValueError, "unknown backend '%s'", name);
    return NULL;
  }
  dlx_relaxed_store(&active, (int)b);
  Py_RETURN_NONE;
}

/* provider_stream(device_type, device_id) -> int: what a provider answers now */
static PyObject *provider_stream(PyObject *self, PyObject *args) {
  (void)self;
  int type, id;
  if (!PyArg_ParseTuple(args, "ii", &type, &id)) return NULL;
  void *s;
  if (dlx_provider_current_stream((DLDeviceType)type, id, &s)) return NULL;
  return PyLong_FromVoidPtr(s);
}

/* provider_info() -> {"active": name, "providers": {backend: "module.attr"}, "calls": n} */
static PyObject *provider_info(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  PyObject *d = PyDict_New();
  for (int b = 0; d && b < DLX_BACKEND_COUNT; ++b) {
    if (!providers[b].module) continue;
    DLX_LOCK(&lock);
    int resolved = providers[b].fn != NULL;
    DLX_UNLOCK(&lock);
    PyObject *v = PyUnicode_FromFormat("%s.%s%s", providers[b].module, providers[b].attr,
                                       resolved ? "" : " (not resolved yet)");
    if (!v || PyDict_SetItemString(d, dlx_backend_name((dlx_backend)b), v)) Py_CLEAR(d);
    Py_XDECREF(v);
  }
  if (!d) return NULL;
  return Py_BuildValue("{sssNsK}", "active",
                       dlx_backend_name((dlx_backend)dlx_relaxed_load(&active)), "providers", d,
                       "calls", dlx_relaxed_load(&dlx_stat_provider_calls));
}

static PyMethodDef provider_methods[] = {
    {"stream_overlay", stream_overlay, METH_O, NULL},
    {"set_active_backend", set_active_backend, METH_O, NULL},
    {"provider_stream", provider_stream, METH_VARARGS, NULL},
    {"provider_info", provider_info, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL}};

int dlx_providers_init(PyObject *module) {
  return PyModule_AddFunctions(module, provider_methods);
}
