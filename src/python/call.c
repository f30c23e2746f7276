/*
 * call.c - the per-call path, top to bottom:
 *
 *   convert each argument (convert.c)  ->  the call's device is the first non-CPU
 *   tensor's  ->  its table's current_work_stream, once, on this thread  ->  the
 *   kernel  ->  its result  ->  every owned export's deleter, exactly once.
 *
 * Everything a call needs lives on the C stack; nothing is allocated here.
 */
#include "dlx_py.h"

#include "dlx_core.h"

_Static_assert(sizeof(Py_ssize_t) == sizeof(int64_t), "buffer strides are read as int64_t");

/* The runtime's view of a call; `pub` is what the kernel sees. */
typedef struct call_state {
  dlx_call pub;
  const char *name;
  int failed;                         /* a Python exception is pending */
  PyObject *result;                   /* dlx_return_int / dlx_return_float */
  DLManagedTensorVersioned *ret;      /* dlx_return_new_tensor */
  const DLPackExchangeAPI *ret_api;   /* the table that allocated `ret` */
  const DLPackExchangeAPI *first_api; /* the first tensor argument's table */
} call_state;

void dlx_raise_named(const char *kind, const char *message) {
  PyObject *cls = NULL;
  PyObject *builtins = PyEval_GetBuiltins(); /* borrowed */
  if (builtins && kind) cls = PyDict_GetItemString(builtins, kind);
  if (cls && PyExceptionClass_Check(cls)) {
    PyErr_SetString(cls, message);
  } else {
    PyErr_Format(PyExc_RuntimeError, "%s: %s", kind ? kind : "error", message);
  }
}

static int rt_verror(dlx_call *call, const char *kind, const char *fmt, va_list ap) {
  call_state *st = (call_state *)call;
  if (st->failed) return -1; /* the first error is the cause; keep it */
  char msg[1024];
  PyOS_vsnprintf(msg, sizeof msg, fmt, ap);
  dlx_raise_named(kind, msg);
  st->failed = 1;
  return -1;
}

static int fail(call_state *st, const char *kind, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = rt_verror(&st->pub, kind, fmt, ap);
  va_end(ap);
  return rc;
}

static int result_free(call_state *st) {
  if (st->result || st->ret)
    return fail(st, "RuntimeError", "kernel '%s' returned more than one value", st->name);
  return 0;
}

static int rt_return_int(dlx_call *call, int64_t value) {
  call_state *st = (call_state *)call;
  if (result_free(st)) return -1;
  st->result = PyLong_FromLongLong(value);
  return st->result ? 0 : (st->failed = 1, -1);
}

static int rt_return_float(dlx_call *call, double value) {
  call_state *st = (call_state *)call;
  if (result_free(st)) return -1;
  st->result = PyFloat_FromDouble(value);
  return st->result ? 0 : (st->failed = 1, -1);
}

/* SetError of the DLPack allocator contract. */
static void alloc_set_error(void *ctx, const char *kind, const char *message) {
  call_state *st = ctx;
  if (st->failed) return;
  dlx_raise_named(kind, message);
  st->failed = 1;
}

static int rt_return_new_tensor(dlx_call *call, DLDevice device, int32_t ndim,
                                const int64_t *shape, DLDataType dtype, DLTensor **out) {
  call_state *st = (call_state *)call;
  if (result_free(st)) return -1;
  if (ndim < 0 || ndim > DLX_MAX_ARGS || (ndim && !shape))
    return fail(st, "ValueError", "dlx_return_new_tensor: invalid ndim %d", (int)ndim);
  int64_t dims[DLX_MAX_ARGS], strides[DLX_MAX_ARGS];
  for (int32_t i = 0; i < ndim; ++i) {
    if (shape[i] < 0)
      return fail(st, "ValueError", "dlx_return_new_tensor: negative extent %lld in dim %d",
                  (long long)shape[i], (int)i);
    dims[i] = shape[i];
  }
  dlx_compact_strides(ndim, dims, strides);
  const DLPackExchangeAPI *api = st->first_api;
  if (!api && !(api = dlx_numpy_table())) {
    st->failed = 1;
    return -1;
  }
  DLTensor proto = {.data = NULL, .device = device, .ndim = ndim, .dtype = dtype,
                    .shape = dims, .strides = strides, .byte_offset = 0};
  DLManagedTensorVersioned *m = NULL;
  if (api->managed_tensor_allocator(&proto, &m, st, alloc_set_error) || !m) {
    if (!st->failed && !PyErr_Occurred())
      fail(st, "RuntimeError", "the exchange table's allocator failed");
    st->failed = 1;
    return -1;
  }
  if (m->version.major != 1) {
    if (m->deleter) m->deleter(m);
    return fail(st, "BufferError", "allocator returned DLPack major version %u",
                (unsigned)m->version.major);
  }
  st->ret = m;
  st->ret_api = api;
  *out = &m->dl_tensor;
  return 0;
}

static const dlx_runtime runtime = {
    .abi_version = DLX_ABI_VERSION,
    .size = sizeof(dlx_runtime),
    .verror = rt_verror,
    .return_int = rt_return_int,
    .return_float = rt_return_float,
    .return_new_tensor = rt_return_new_tensor,
};

PyObject *dlx_call_kernel(dlx_kernel_fn fn, const char *name, PyObject *const *args,
                          Py_ssize_t nargs) {
  if (nargs > DLX_MAX_ARGS) {
    PyErr_Format(PyExc_TypeError, "kernel '%s' takes at most %d arguments, got %zd", name,
                 DLX_MAX_ARGS, nargs);
    return NULL;
  }
  dlx_arg argv[DLX_MAX_ARGS];
  dlx_slot slots[DLX_MAX_ARGS];
  call_state st = {.pub = {.rt = &runtime, .args = argv, .num_args = (int32_t)nargs,
                           .device = {kDLCPU, 0}, .stream = NULL},
                   .name = name};
  const dlx_slot *device_slot = NULL;
  int32_t converted = 0;
  for (; converted < nargs; ++converted) {
    dlx_arg *a = &argv[converted];
    if (dlx_convert_arg(args[converted], converted, a, &slots[converted])) {
      if (a->kind == DLX_ARG_TENSOR) { /* partial: release it, error kept aside */
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        dlx_release_slot(&slots[converted]);
        PyErr_Restore(et, ev, tb);
      }
      goto out;
    }
    if (a->kind != DLX_ARG_TENSOR) continue;
    if (!st.first_api) st.first_api = slots[converted].api;
    if (!device_slot && a->value.tensor->device.device_type != kDLCPU) {
      device_slot = &slots[converted];
      st.pub.device = a->value.tensor->device;
    }
  }
  /* The stream is the caller's, on this thread, now: asked once, never cached. */
  if (device_slot && device_slot->api &&
      device_slot->api->current_work_stream(st.pub.device.device_type, st.pub.device.device_id,
                                            &st.pub.stream)) {
    if (!PyErr_Occurred())
      PyErr_SetString(PyExc_RuntimeError, "current_work_stream failed without an error");
    goto out;
  }
  int rc = fn(&st.pub);
  if (rc != 0 || st.failed || PyErr_Occurred()) {
    if (!PyErr_Occurred())
      PyErr_Format(PyExc_RuntimeError, "kernel '%s' failed (returned %d) without an error",
                   name, rc);
    goto out;
  }
  if (st.ret) {
    DLManagedTensorVersioned *m = st.ret;
    void *obj = NULL;
    st.ret = NULL; /* stolen by the import, also when it fails */
    if (st.ret_api->managed_tensor_to_py_object_no_sync(m, &obj)) goto out;
    st.result = obj;
  }
out:;
  /* Deleters may run Python code: keep a pending error out of their way. */
  PyObject *et = NULL, *ev = NULL, *tb = NULL;
  int failed = PyErr_Occurred() != NULL;
  if (failed) PyErr_Fetch(&et, &ev, &tb);
  for (int32_t i = 0; i < converted; ++i)
    if (argv[i].kind == DLX_ARG_TENSOR &&
        (slots[i].managed || slots[i].legacy || slots[i].buffer)) /* views own nothing */
      dlx_release_slot(&slots[i]);
  if (st.ret && st.ret->deleter) st.ret->deleter(st.ret);
  if (failed) PyErr_Restore(et, ev, tb);
  if (failed || PyErr_Occurred()) { /* PyErr_Occurred: a deleter raised */
    Py_CLEAR(st.result);
    return NULL;
  }
  return st.result ? st.result : Py_NewRef(Py_None);
}
