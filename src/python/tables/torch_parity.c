/*
 * torch_parity.c - a torch tensor reaches a direct call as torch's own in-place operator
 * would see it (issue 30: the direct call is an optimisation of the operator, and must
 * be invisible).
 *
 * Every table torch.Tensor brings, torch's native one (torch >= 2.10) or dlx's addon, is
 * used through a checked copy made once per table, whose exports also refuse
 *   - a conjugate or negative view (native table: its export hands out the raw storage,
 *     whose values are not the tensor's; the addon refuses those itself),
 *   - a tensor that requires grad while grad mode is on, with dlx_torch_operator_path: the call
 *     path then asks dlx._trace, where dlx.torch_ops sends the call to the operator (whose
 *     autograd formula, or torch's "not implemented" node, sees it) or raises;
 * and whose hooks the call path asks for calls that met such a table (DLX_CONVERT_TORCH):
 *   - modes: a TorchFunctionMode, TorchDispatchMode or the profiler is watching; a kernel
 *     registered as an operator then takes the operator's path, so that they see it,
 *   - writable: a `mut` tensor torch would refuse to write (an inference tensor outside
 *     inference mode),
 *   - bump: a `mut` tensor's version counter, once per successful call, as torch's
 *     in-place ops do (autograd checks it on saved tensors).
 * The addon implements the hooks on ATen (dlx_torch_parity_hooks); the native table's are
 * torch's Python bindings, read once (method descriptors called directly: no attribute
 * lookup per call). Types with other tables, and numpy or JAX calls, pay nothing.
 */
#include "dlx_py.h"
#include "dlx_plain_view.h"

PyObject *dlx_torch_operator_path;
_Thread_local int dlx_torch_direct;

/* ---- torch's native table, through its Python bindings ---- */
static struct {
  DLPackDLTensorFromPyObjectNoSync view;
  DLPackManagedTensorFromPyObjectNoSync managed;
  PyObject *owner;              /* the native table's capsule, kept for the process */
  PyObject *is_conj, *is_neg;   /* torch._C.TensorBase's method descriptors */
  PyObject *is_inference;
  getter requires_grad;         /* TensorBase.requires_grad's C getter */
  void *requires_grad_closure;
  PyObject *grad_enabled;       /* torch._C.is_grad_enabled */
  PyObject *inference_enabled;  /* torch.is_inference_mode_enabled */
  PyObject *dispatch_modes;     /* torch._C._len_torch_dispatch_stack */
  PyObject *function_modes;     /* torch._C._is_torch_function_mode_enabled */
  PyObject *profiler;           /* torch._C._autograd._profiler_enabled */
  PyObject *increment_version;  /* torch._C._increment_version */
  PyTypeObject *tensor;         /* torch.Tensor: its instances skip the subclass check */
  PyObject *dispatch_name;      /* "__torch_dispatch__" */
  PyObject *plain_dispatch;     /* torch.Tensor's, as its type holds it */
} native;

static dlx_mutex parity_lock;

dlx_torch_checked dlx_torch_checked_tables[DLX_TORCH_CHECKED_MAX];

static struct {
  const DLPackExchangeAPI *api; /* the addon's table, once loaded */
  const dlx_torch_parity *hooks;
} addon;

/* A builtin's answer is true (1), false (0), or -1 with its error. */
static int ask(PyObject *fn, PyObject *arg) {
  PyObject *r = arg ? PyObject_Vectorcall(fn, &arg, 1, NULL) : PyObject_CallNoArgs(fn);
  if (!r) return -1;
  int yes = PyObject_IsTrue(r);
  Py_DECREF(r);
  return yes;
}

/* 0 when `obj` (exported as `dtype`) reads as its memory says; -1 with a BufferError when a
 * bit is set, or torch's own error. is_conj only for complex dtypes: the only ones that
 * carry the bit. */
static int native_unresolved(PyObject *obj, DLDataType dtype) {
  int bit = dtype.code == kDLComplex ? ask(native.is_conj, obj) : 0;
  if (bit == 0) bit = ask(native.is_neg, obj);
  if (bit <= 0) return bit;
  PyErr_SetString(PyExc_BufferError,
                  "a conjugate/negative view (torch's conj or neg bit is set): its memory does "
                  "not hold its values; call .resolve_conj() / .resolve_neg() first");
  return -1;
}

static int grad_refused(void) {
  PyErr_SetString(dlx_torch_operator_path,
                  "requires grad while grad mode is on: a direct call would drop its gradient");
  return -1;
}

/* 0, or -1 with dlx_torch_operator_path when `obj` requires grad under grad mode. */
static int native_grad(PyObject *obj) {
  PyObject *r = native.requires_grad(obj, native.requires_grad_closure);
  if (!r) return -1;
  Py_DECREF(r); /* a bool */
  if (r != Py_True) return 0;
  int on = ask(native.grad_enabled, NULL);
  return on < 0 ? -1 : on ? grad_refused() : 0;
}

/* 0, or -1 with a TypeError for a tensor subclass with its own __torch_dispatch__ (DTensor,
 * other wrapper subclasses): it may own no memory (torch's export of a DTensor crashes), its
 * operations are its own. The call path then asks dlx._trace, which hands it to the kernel's
 * operator where there is one (dlx.torch.register; DTensor shards it); else this error.
 * A plain torch.Tensor pays one pointer compare; a subclass, a cached type lookup. */
static int native_wrapper(PyObject *obj) {
  PyTypeObject *tp = Py_TYPE(obj);
  if (tp == native.tensor) return 0;
  PyObject *own = _PyType_Lookup(tp, native.dispatch_name);
  if (!own || own == native.plain_dispatch) return 0;
  PyErr_Format(PyExc_TypeError,
               "a %s: a tensor subclass with its own __torch_dispatch__, whose operations "
               "torch dispatches to it; a kernel cannot read it directly: register the "
               "kernel with dlx.torch.register(lib, namespace) and call it (or its operator) "
               "with such tensors, or pass a plain tensor (for a DTensor: .to_local() or "
               ".full_tensor())", tp->tp_name);
  return -1;
}

static int native_view(void *obj, DLTensor *out) {
  if (native_wrapper(obj) || native.view(obj, out)) return -1;
  return native_unresolved(obj, out->dtype) ? -1 : native_grad(obj);
}

static int native_managed(void *obj, DLManagedTensorVersioned **out) {
  if (native_wrapper(obj) || native.managed(obj, out)) return -1;
  DLManagedTensorVersioned *m = *out;
  if (!m || (!native_unresolved(obj, m->dl_tensor.dtype) && !native_grad(obj))) return 0;
  *out = NULL;
  PyObject *et, *ev, *tb; /* the deleter must not see the error */
  PyErr_Fetch(&et, &ev, &tb);
  if (m->deleter) m->deleter(m);
  PyErr_Restore(et, ev, tb);
  return -1;
}

static int native_modes(void) {
  PyObject *n = PyObject_CallNoArgs(native.dispatch_modes);
  if (!n) return -1;
  long depth = PyLong_AsLong(n);
  Py_DECREF(n);
  if (depth == -1 && PyErr_Occurred()) return -1;
  if (depth > 0) return 1;
  int on = ask(native.function_modes, NULL);
  return on ? on : ask(native.profiler, NULL);
}

static int native_writable(void *obj) {
  int inference = ask(native.is_inference, obj);
  if (inference <= 0) return inference;
  int mode = ask(native.inference_enabled, NULL);
  if (mode) return mode < 0 ? -1 : 0;
  PyErr_SetString(PyExc_RuntimeError,
                  "is an inference tensor, which torch does not let an in-place operation "
                  "update outside inference mode (make a clone, or call inside "
                  "torch.inference_mode())");
  return -1;
}

static int native_bump(void *obj) {
  PyObject *one = PyTuple_Pack(1, (PyObject *)obj);
  PyObject *r = one ? PyObject_Vectorcall(native.increment_version, &one, 1, NULL) : NULL;
  Py_XDECREF(one);
  Py_XDECREF(r);
  return r ? 0 : -1;
}

static const dlx_torch_parity native_hooks = {
    .size = sizeof(dlx_torch_parity),
    .view = native_view,
    .managed = native_managed,
    .modes = native_modes,
    .writable = native_writable,
    .bump = native_bump,
};

static PyObject *attr_path(PyObject *root, const char *a, const char *b) {
  PyObject *x = PyObject_GetAttrString(root, a);
  if (!x || !b) return x;
  PyObject *y = PyObject_GetAttrString(x, b);
  Py_DECREF(x);
  return y;
}

/* torch's native table and bindings, learnt once torch is imported and has a table; 0
 * found, else 1 (torch before 2.10, or not imported). */
static int native_known(void) {
  DLX_LOCK(&parity_lock);
  int known = native.owner != NULL;
  DLX_UNLOCK(&parity_lock);
  if (known) return 0;
  PyObject *name = PyUnicode_FromString("torch");
  PyObject *torch = name ? PyImport_GetModule(name) : NULL; /* never imports */
  Py_XDECREF(name);
  if (!torch) {
    PyErr_Clear();
    return 1;
  }
  PyObject *fn = attr_path(torch, "_C", "_dlpack_exchange_api");
  PyObject *cap = fn ? PyObject_CallNoArgs(fn) : NULL;
  Py_XDECREF(fn);
  const DLPackExchangeAPI *api = cap ? dlx_table_from_capsule(cap, "torch's native table") : NULL;
  PyObject *got[10] = {0};
  const char *where[10][2] = {{"_C", "TensorBase"}, {"_C", "is_grad_enabled"},
                              {"is_inference_mode_enabled", NULL},
                              {"_C", "_len_torch_dispatch_stack"},
                              {"_C", "_is_torch_function_mode_enabled"},
                              {"_C", "_increment_version"}, {"_C", "_autograd"}};
  int ok = api != NULL;
  for (int i = 0; ok && i < 7; ++i) ok = (got[i] = attr_path(torch, where[i][0], where[i][1])) != NULL;
  PyObject *base = got[0];
  if (ok) {
    got[7] = PyObject_GetAttrString(got[6], "_profiler_enabled");
    got[8] = PyObject_GetAttrString(base, "is_conj");
    got[9] = PyObject_GetAttrString(base, "is_neg");
    ok = got[7] && got[8] && got[9];
  }
  PyObject *inference = ok ? PyObject_GetAttrString(base, "is_inference") : NULL;
  PyObject *rg = inference ? PyObject_GetAttrString(base, "requires_grad") : NULL;
  ok = rg && PyObject_TypeCheck(rg, &PyGetSetDescr_Type);
  PyObject *tensor = ok ? attr_path(torch, "Tensor", NULL) : NULL;
  PyObject *dname = tensor ? PyUnicode_InternFromString("__torch_dispatch__") : NULL;
  PyObject *plain = dname && PyType_Check(tensor) ? _PyType_Lookup((PyTypeObject *)tensor, dname)
                                                  : NULL; /* borrowed */
  ok = plain != NULL;
  if (ok) {
    DLX_LOCK(&parity_lock); /* free-threaded builds: two threads may learn it at once */
    if (!native.owner) {
      PyGetSetDef *def = ((PyGetSetDescrObject *)rg)->d_getset;
      native.view = api->dltensor_from_py_object_no_sync;
      native.managed = api->managed_tensor_from_py_object_no_sync;
      native.requires_grad = def->get;
      native.requires_grad_closure = def->closure;
      native.grad_enabled = Py_NewRef(got[1]);
      native.inference_enabled = Py_NewRef(got[2]);
      native.dispatch_modes = Py_NewRef(got[3]);
      native.function_modes = Py_NewRef(got[4]);
      native.increment_version = Py_NewRef(got[5]);
      native.profiler = Py_NewRef(got[7]);
      native.is_conj = Py_NewRef(got[8]);
      native.is_neg = Py_NewRef(got[9]);
      native.is_inference = Py_NewRef(inference);
      native.tensor = (PyTypeObject *)Py_NewRef(tensor);
      native.dispatch_name = Py_NewRef(dname);
      native.plain_dispatch = Py_NewRef(plain);
      native.owner = Py_NewRef(cap); /* also keeps `rg`'s getter alive: the type lives */
    }
    DLX_UNLOCK(&parity_lock);
  }
  PyErr_Clear(); /* no native table: 1 */
  for (int i = 0; i < 10; ++i) Py_XDECREF(got[i]);
  Py_XDECREF(inference);
  Py_XDECREF(rg);
  Py_XDECREF(tensor);
  Py_XDECREF(dname);
  Py_XDECREF(cap);
  Py_DECREF(torch);
  return ok ? 0 : 1;
}

void dlx_torch_parity_addon(const DLPackExchangeAPI *api, const dlx_torch_parity *hooks) {
  DLX_LOCK(&parity_lock);
  addon.api = api;
  addon.hooks = hooks;
  DLX_UNLOCK(&parity_lock);
}

const DLPackExchangeAPI *dlx_table_shown(const DLPackExchangeAPI *api) {
  const DLPackExchangeAPI *shown = api;
  DLX_LOCK(&parity_lock);
  for (int k = 0; k < DLX_TORCH_CHECKED_MAX; ++k) {
    const dlx_torch_checked *c = &dlx_torch_checked_tables[k];
    if (c->of && api == &c->table) shown = c->of;
  }
  DLX_UNLOCK(&parity_lock);
  return shown;
}

int dlx_torch_is_checked(const DLPackExchangeAPI *api) {
  return dlx_torch_hooks_of(api) != NULL;
}

int dlx_torch_views_writable(const DLPackExchangeAPI *api) {
  const dlx_torch_parity *hooks = dlx_torch_hooks_of(api);
  if (!hooks) return 0;
  DLX_LOCK(&parity_lock);
  int yes = hooks == addon.hooks;
  DLX_UNLOCK(&parity_lock);
  return yes;
}

const DLPackExchangeAPI *dlx_torch_checked_table(const DLPackExchangeAPI *api) {
  const dlx_torch_parity *hooks = NULL;
  DLX_LOCK(&parity_lock);
  if (addon.api && api == addon.api) hooks = addon.hooks;
  DLX_UNLOCK(&parity_lock);
  if (!hooks) {
    if (native_known() || api->managed_tensor_from_py_object_no_sync != native.managed)
      return api;
    hooks = &native_hooks;
  }
  const DLPackExchangeAPI *copy = api; /* more torch tables than any process makes: as is */
  DLX_LOCK(&parity_lock);
  for (int k = 0; k < DLX_TORCH_CHECKED_MAX; ++k) {
    if (dlx_torch_checked_tables[k].of == api) {
      copy = &dlx_torch_checked_tables[k].table;
      break;
    }
    if (dlx_torch_checked_tables[k].of) continue;
    DLPackExchangeAPI *t = &dlx_torch_checked_tables[k].table;
    *t = *api;
    t->header.prev_api = NULL; /* the copy is major 1 itself; only 1.3's fields copied */
    if (t->header.version.minor > DLPACK_MINOR_VERSION) t->header.version.minor = DLPACK_MINOR_VERSION;
    t->managed_tensor_from_py_object_no_sync = hooks->managed;
    /* an overlay over the native table may lack the view export: keep it lacking */
    if (t->dltensor_from_py_object_no_sync) t->dltensor_from_py_object_no_sync = hooks->view;
    dlx_torch_checked_tables[k].of = api;
    dlx_release_store(&dlx_torch_checked_tables[k].hooks, hooks);
    copy = t;
    break;
  }
  DLX_UNLOCK(&parity_lock);
  return copy;
}

/* _torch_plain() -> None, or what the addon's plain layout holds now (tests, and how one
 * learns whether a torch's tensors take the call loop's in-line path): the offsets, which
 * known layout dlx took them for, the kinds (dtype code, bits, device type, bumps), the
 * newest first, and whether views (tensors with autograd metadata) take it too. */
static PyObject *torch_plain(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  DLX_LOCK(&parity_lock);
  const dlx_torch_parity *hooks = addon.hooks;
  DLX_UNLOCK(&parity_lock);
  const dlx_torch_plain *p = dlx_plain_current(hooks);
  if (!p) Py_RETURN_NONE;
  const int32_t *at = &p->at.impl_at;
  const int32_t nat = (int32_t)(sizeof p->at / sizeof *at);
  PyObject *offsets = PyTuple_New(nat), *kinds = PyList_New(0);
  for (int32_t i = 0; offsets && i < nat; ++i)
    PyTuple_SET_ITEM(offsets, i, PyLong_FromLong(at[i]));
  for (int32_t k = 0; kinds && k < p->nkinds && k < DLX_TORCH_PLAIN_KINDS; ++k) {
    const dlx_torch_plain_kind *kind = &p->kinds[k];
    PyObject *item = Py_BuildValue("(iiii)", kind->dtype.code, kind->dtype.bits,
                                   kind->device.device_type, kind->bumps);
    if (!item || PyList_Append(kinds, item)) Py_CLEAR(kinds);
    Py_XDECREF(item);
  }
  PyObject *r = offsets && kinds
                    ? Py_BuildValue("{sOsisOsO}", "offsets", offsets, "known",
                                    dlx_plain_known(&p->at), "kinds", kinds, "views",
                                    p->meta_no_grad ? Py_True : Py_False)
                    : NULL;
  Py_XDECREF(offsets);
  Py_XDECREF(kinds);
  return r;
}

static PyMethodDef parity_methods[] = {
    {"_torch_plain", torch_plain, METH_NOARGS,
     "_torch_plain() -> None or dict: the torch addon's plain layout, for tests"},
    {NULL, NULL, 0, NULL}};

int dlx_torch_parity_init(PyObject *module) {
  if (PyModule_AddFunctions(module, parity_methods)) return -1;
  dlx_torch_operator_path =
      PyErr_NewExceptionWithDoc("dlx._core.OperatorPath",
                                "A torch call that only the operator's path keeps exact (a "
                                "tensor that requires grad under grad mode, a torch mode "
                                "watching a registered kernel); dlx._trace hands it on.",
                                PyExc_RuntimeError, NULL);
  return dlx_torch_operator_path ? PyModule_AddObjectRef(module, "OperatorPath",
                                                      dlx_torch_operator_path)
                              : -1;
}
