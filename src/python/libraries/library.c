/*
 * library.c - dlx.Library and dlx.Kernel.
 *
 * A library's kernels are the symbols DLX_KERNEL exported a registration record
 * for (listed from the ELF dynamic symbol table, then checked record by record),
 * so no symbol with another signature can ever be called.
 *
 * Each loaded library is an instance of a type of its own, a subclass of dlx.Library made
 * at load with one slot (`__slots__`: a T_OBJECT_EX member) per kernel, so that `lib.k` is
 * a slot read: CPython 3.12+ specializes `lib.k(...)` to LOAD_ATTR_SLOT, about what a
 * module function costs; the helpful AttributeError for a missing name comes from
 * `__getattr__`, which 3.12+ specializes around. 3.11 specializes no lookup on a type
 * with its own tp_getattro or `__getattr__` (and LOAD_METHOD, which `lib.k(...)` compiles
 * to, not slots at all), so there the type has a tp_getattro that remembers, by name
 * pointer, where a name's slot is: `lib.k` is a pointer compare and a load. A kernel named
 * like an attribute of dlx.Library (`path`, `kernels`), starting with "__", or not a Python
 * identifier (`cost$k`: C compilers accept '$') gets no slot: it is an entry of the instance
 * dict, which the type's attributes take precedence over. Every kernel is also
 * `lib["name"]`, whatever its name (a dict of its own, which setting attributes cannot change).
 */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <string.h>

#include "dlx_py.h"

#include <structmember.h>

#include "dlx_cache_dir.h"
#include "dlx_core.h"
#include "dlx_derive.h"
#include "dlx_discover.h"
#include "dlx_invoke.h"

typedef struct {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  dlx_kernel_info info; /* what a call needs: function, name, plan, names, defaults */
  PyObject *path;   /* the library's path, for repr (no reference to the Library: no cycle) */
  PyObject *signature; /* the declared text, or None */
  PyObject *doc;
  PyObject *pysig;     /* inspect.Signature, made on first use */
  PyObject **owned;    /* param_names then defaults: 2 * nparams references */
  dlx_sig *plan;
  dlx_sig_quick *quick; /* nparams quick checks of the plan */
  PyObject *weakrefs;   /* jax.jit(lib.k) keeps a weak reference to the function */
} KernelObject;

/* 3.11 cannot specialize `lib.k` on a type with a `__getattr__` (it needs tp_getattro to
 * be PyObject_GenericGetAttr, and then no helpful message is possible): a tp_getattro of
 * our own serves the names it has seen. 3.12+ specializes slots next to `__getattr__`. */
#define DLX_LIB_HITS (PY_VERSION_HEX < 0x030C0000)

typedef struct {
  PyObject_HEAD
  PyObject *dict;    /* set attributes, and kernels named like a Library attribute */
  PyObject *path;
  PyObject *kernels; /* tuple of names */
  PyObject *by_name; /* name -> Kernel, for lib["name"] */
  void *handle;
#if DLX_LIB_HITS
  /* The slots of the last names looked up, by name pointer (code's attribute names are
   * interned objects). The slot is read each time, so a set or deleted kernel is seen. */
  struct { PyObject *name, **slot; } hits[8];
#endif
  /* then the kernels' slots, laid out by the library's own type */
} LibraryObject;

static PyTypeObject KernelType, LibraryType;

static PyObject *kernel_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                                   PyObject *kwnames) {
  KernelObject *k = (KernelObject *)self;
  return dlx_call_kernel(&k->info, args, PyVectorcall_NARGS(nargsf), kwnames);
}

static void kernel_dealloc(PyObject *self) {
  KernelObject *k = (KernelObject *)self;
  if (k->weakrefs) PyObject_ClearWeakRefs(self);
  Py_XDECREF(k->path);
  Py_XDECREF(k->signature);
  Py_XDECREF(k->doc);
  Py_XDECREF(k->pysig);
  if (k->owned) {
    for (int32_t i = 0; i < 2 * k->plan->nparams; ++i) Py_XDECREF(k->owned[i]);
    PyMem_Free(k->owned);
  }
  dlx_sig_free(k->plan);
  PyMem_Free(k->quick);
  Py_TYPE(self)->tp_free(self);
}

static PyObject *kernel_repr(PyObject *self) {
  KernelObject *k = (KernelObject *)self;
  return PyUnicode_FromFormat("<dlx.Kernel %s of %R>", k->info.name, k->path);
}

/* kernel._path: its library's path (dlx.jax names the library in a staged call by it) */
static PyObject *kernel_get_path(PyObject *self, void *closure) {
  (void)closure;
  return Py_NewRef(((KernelObject *)self)->path);
}

static PyObject *kernel_get_name(PyObject *self, void *closure) {
  (void)closure;
  return PyUnicode_FromString(((KernelObject *)self)->info.name);
}

static PyObject *kernel_get_signature(PyObject *self, void *closure) {
  (void)closure;
  return Py_NewRef(((KernelObject *)self)->signature);
}

static PyObject *kernel_get_doc(PyObject *self, void *closure) {
  (void)closure;
  return Py_NewRef(((KernelObject *)self)->doc);
}

/* inspect.signature(kernel): built in Python (dlx/_sig.py) from _params, once. */
static PyObject *kernel_get_pysig(PyObject *self, void *closure) {
  (void)closure;
  KernelObject *k = (KernelObject *)self;
  PyObject *sig;
  Py_BEGIN_CRITICAL_SECTION(self); /* threads asking at once: one made, kept, handed out */
  sig = Py_XNewRef(k->pysig);
  Py_END_CRITICAL_SECTION();
  if (sig) return sig;
  PyObject *mod = PyImport_ImportModule("dlx._sig"); /* Python code: outside the section */
  if (!mod) return NULL;
  sig = PyObject_CallMethod(mod, "signature", "O", self);
  Py_DECREF(mod);
  if (!sig) return NULL;
  PyObject *kept;
  Py_BEGIN_CRITICAL_SECTION(self);
  if (!k->pysig) k->pysig = Py_NewRef(sig);
  kept = Py_NewRef(k->pysig);
  Py_END_CRITICAL_SECTION();
  Py_DECREF(sig);
  return kept;
}

static PyObject *type_text(const dlx_sig *s, const dlx_sig_type *t) {
  char buf[1024];
  dlx_sig_format_type(s, t, buf, sizeof buf);
  return PyUnicode_FromString(buf);
}

static const char *const kind_names[] = {"", "tensor", "int", "float", "bool", "str", "ints",
                                         "floats"};

/* ((name, kind, type text, optional, default or the Ellipsis when required), ...) */
static PyObject *kernel_get_params(PyObject *self, void *closure) {
  (void)closure;
  KernelObject *k = (KernelObject *)self;
  if (!k->plan) Py_RETURN_NONE;
  const dlx_sig *s = k->plan;
  PyObject *t = PyTuple_New(s->nparams);
  for (int32_t i = 0; t && i < s->nparams; ++i) {
    const dlx_sig_type *ty = &s->params[i].type;
    PyObject *def = k->info.defaults[i] ? k->info.defaults[i] : Py_Ellipsis;
    PyObject *e = Py_BuildValue("(OsNOO)", k->info.param_names[i], kind_names[ty->kind],
                                type_text(s, ty), ty->optional ? Py_True : Py_False, def);
    if (!e) Py_CLEAR(t);
    else PyTuple_SET_ITEM(t, i, e);
  }
  return t;
}

/* ((kind, type text, optional), ...), or None when the signature declares no "->" */
static PyObject *kernel_get_results(PyObject *self, void *closure) {
  (void)closure;
  KernelObject *k = (KernelObject *)self;
  if (!k->plan || !k->plan->has_results) Py_RETURN_NONE;
  const dlx_sig *s = k->plan;
  PyObject *t = PyTuple_New(s->nresults);
  for (int32_t i = 0; t && i < s->nresults; ++i) {
    const dlx_sig_type *ty = &s->results[i];
    PyObject *e = Py_BuildValue("(sNO)", kind_names[ty->kind], type_text(s, ty),
                                ty->optional ? Py_True : Py_False);
    if (!e) Py_CLEAR(t);
    else PyTuple_SET_ITEM(t, i, e);
  }
  return t;
}

/* ---- what compilers read: the plan structurally, and what dlx_derive.c derives -------- */

static const char *const dtype_names[DLX_SIG_NUM_DTYPES] = {
    "f16", "bf16", "f32", "f64", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64",
    "bool", "c64", "c128"};
static const struct { int flag; const char *word; } flag_names[] = {
    {DLX_SIG_MUT, "mut"},   {DLX_SIG_CONTIG, "contig"}, {DLX_SIG_CPU, "cpu"},
    {DLX_SIG_CUDA, "cuda"}, {DLX_SIG_ROCM, "rocm"},     {DLX_SIG_NPU, "npu"},
    {DLX_SIG_GPU, "gpu"}};

/* A tensor type's dtypes ("f32", ...) or None for any; dims (int | symbol | None for "_" |
 * Ellipsis) or None without brackets; flags frozenset. */
static PyObject *type_parts(const dlx_sig *s, const dlx_sig_type *t) {
  PyObject *dtypes = NULL, *dims = NULL, *flags = NULL;
  if (t->kind != DLX_SIG_TENSOR || t->dtypes == DLX_SIG_DT_ANY) {
    dtypes = Py_NewRef(Py_None);
  } else {
    dtypes = PyTuple_New(0);
    for (int k = 0; dtypes && k < DLX_SIG_NUM_DTYPES; ++k)
      if (t->dtypes & (1u << k)) {
        PyObject *name = PyUnicode_FromString(dtype_names[k]);
        if (!name || _PyTuple_Resize(&dtypes, PyTuple_GET_SIZE(dtypes) + 1)) {
          Py_XDECREF(name);
          Py_CLEAR(dtypes);
          break;
        }
        PyTuple_SET_ITEM(dtypes, PyTuple_GET_SIZE(dtypes) - 1, name);
      }
  }
  if (t->kind != DLX_SIG_TENSOR || t->ndims < 0) {
    dims = Py_NewRef(Py_None);
  } else {
    dims = PyTuple_New(t->ndims);
    for (int32_t d = 0; dims && d < t->ndims; ++d) {
      const dlx_sig_dim *dm = &s->dims[t->dim0 + d];
      PyObject *v = dm->kind == DLX_DIM_FIXED    ? PyLong_FromLongLong(dm->extent)
                    : dm->kind == DLX_DIM_SYMBOL ? PyUnicode_FromString(dlx_sig_str(s, s->symbols[dm->sym]))
                    : dm->kind == DLX_DIM_ANY    ? Py_NewRef(Py_None)
                                                 : Py_NewRef(Py_Ellipsis);
      if (!v) Py_CLEAR(dims);
      else PyTuple_SET_ITEM(dims, d, v);
    }
  }
  flags = PyFrozenSet_New(NULL);
  for (size_t k = 0; flags && k < sizeof flag_names / sizeof *flag_names; ++k)
    if (t->flags & flag_names[k].flag) {
      PyObject *w = PyUnicode_FromString(flag_names[k].word);
      if (!w || PySet_Add(flags, w)) Py_CLEAR(flags);
      Py_XDECREF(w);
    }
  if (!dtypes || !dims || !flags) {
    Py_XDECREF(dtypes);
    Py_XDECREF(dims);
    Py_XDECREF(flags);
    return NULL;
  }
  return Py_BuildValue("(NNN)", dtypes, dims, flags);
}

/* ((name, kind, optional, default or Ellipsis, dtypes, dims, flags), ...), None undeclared */
static PyObject *kernel_get_plan(PyObject *self, void *closure) {
  (void)closure;
  KernelObject *k = (KernelObject *)self;
  if (!k->plan) Py_RETURN_NONE;
  const dlx_sig *s = k->plan;
  PyObject *t = PyTuple_New(s->nparams);
  for (int32_t i = 0; t && i < s->nparams; ++i) {
    const dlx_sig_type *ty = &s->params[i].type;
    PyObject *def = k->info.defaults[i] ? k->info.defaults[i] : Py_Ellipsis;
    PyObject *parts = type_parts(s, ty), *e = NULL;
    if (parts)
      e = Py_BuildValue("(OsOOOOO)", k->info.param_names[i], kind_names[ty->kind],
                        ty->optional ? Py_True : Py_False, def, PyTuple_GET_ITEM(parts, 0),
                        PyTuple_GET_ITEM(parts, 1), PyTuple_GET_ITEM(parts, 2));
    Py_XDECREF(parts);
    if (!e) Py_CLEAR(t);
    else PyTuple_SET_ITEM(t, i, e);
  }
  return t;
}

static PyObject *symbol_or_none(const dlx_sig *s, int32_t sym) {
  if (sym < 0) Py_RETURN_NONE;
  return PyUnicode_FromString(dlx_sig_str(s, s->symbols[sym]));
}

static PyObject *pos_tuple(dlx_derive_pos p) {
  return Py_BuildValue("(iiO)", (int)p.param, (int)p.dim, p.from_back ? Py_True : Py_False);
}

/* (results, equalities), None undeclared; ValueError(why) when not derivable.
 * results: ((dtype name | parameter index, (dim, ...)), ...) with each dim ("fixed", n) |
 * ("dim", param, d, from_back, symbol) | ("batch", param) | ("fresh", symbol or None);
 * equalities: ((symbol, (param, d, from_back), (param, d, from_back)), ...). */
static PyObject *kernel_get_derived(PyObject *self, void *closure) {
  (void)closure;
  KernelObject *k = (KernelObject *)self;
  if (!k->plan) Py_RETURN_NONE;
  const dlx_sig *s = k->plan;
  dlx_derived *d = PyMem_Malloc(sizeof *d); /* ~20 KB: not on the stack */
  if (!d) return PyErr_NoMemory();
  char why[256];
  if (dlx_derive_results(s, d, why, sizeof why)) {
    PyMem_Free(d);
    return PyErr_Format(PyExc_ValueError, "%s(): %s", k->info.name, why);
  }
  PyObject *results = PyTuple_New(d->nresults), *eqs = NULL;
  for (int32_t r = 0; results && r < d->nresults; ++r) {
    const dlx_derived_result *res = &d->results[r];
    PyObject *dims = PyTuple_New(res->ndims), *dtype;
    for (int32_t j = 0; dims && j < res->ndims; ++j) {
      const dlx_derived_dim *x = &d->dims[res->dim0 + j];
      PyObject *v = NULL;
      switch (x->kind) {
        case DLX_DERIVE_FIXED: v = Py_BuildValue("(sL)", "fixed", (long long)x->extent); break;
        case DLX_DERIVE_DIM:
          v = Py_BuildValue("(siiON)", "dim", (int)x->at.param, (int)x->at.dim,
                            x->at.from_back ? Py_True : Py_False, symbol_or_none(s, x->sym));
          break;
        case DLX_DERIVE_BATCH: v = Py_BuildValue("(si)", "batch", (int)x->at.param); break;
        default: v = Py_BuildValue("(sN)", "fresh", symbol_or_none(s, x->sym));
      }
      if (!v) Py_CLEAR(dims);
      else PyTuple_SET_ITEM(dims, j, v);
    }
    if (res->dtype_param >= 0) {
      dtype = PyLong_FromLong(res->dtype_param);
    } else {
      char name[64];
      dlx_sig_dtype_name(res->dtype, name, sizeof name);
      dtype = PyUnicode_FromString(name);
    }
    PyObject *e = dims && dtype ? Py_BuildValue("(OO)", dtype, dims) : NULL;
    Py_XDECREF(dims);
    Py_XDECREF(dtype);
    if (!e) Py_CLEAR(results);
    else PyTuple_SET_ITEM(results, r, e);
  }
  if (results) eqs = PyTuple_New(d->neqs);
  for (int32_t j = 0; eqs && j < d->neqs; ++j) {
    const dlx_derived_eq *q = &d->eqs[j];
    PyObject *e = Py_BuildValue("(NNN)", symbol_or_none(s, q->sym), pos_tuple(q->first),
                                pos_tuple(q->other));
    if (!e) Py_CLEAR(eqs);
    else PyTuple_SET_ITEM(eqs, j, e);
  }
  PyMem_Free(d);
  if (!eqs) {
    Py_XDECREF(results);
    return NULL;
  }
  return Py_BuildValue("(NN)", results, eqs);
}

/* One tensor's labels for dlx._shard: a tuple per declared dim of the symbol's name, "..."
 * or None (a fixed extent, "_"); None for a tensor without brackets (any rank: replicated);
 * () for a scalar result. */
static PyObject *shard_labels(const dlx_sig *s, const dlx_sig_type *t) {
  if (t->kind != DLX_SIG_TENSOR) return PyTuple_New(0);
  if (t->ndims < 0) Py_RETURN_NONE;
  PyObject *dims = PyTuple_New(t->ndims);
  for (int32_t d = 0; dims && d < t->ndims; ++d) {
    int32_t l = dlx_derive_shard_label(s, t, d);
    PyObject *v = l >= 0 ? PyUnicode_FromString(dlx_sig_str(s, s->symbols[l]))
                  : l == DLX_SHARD_BATCH ? PyUnicode_FromString("...")
                                         : Py_NewRef(Py_None);
    if (!v) Py_CLEAR(dims);
    else PyTuple_SET_ITEM(dims, d, v);
  }
  return dims;
}

/* (inputs, results, independent) of dlx_derive_shard, None undeclared: labels per declared
 * tensor parameter (mut ones included) and per result, and the frozenset of labels that may
 * be split (dlx._shard.rule keeps it, once per kernel). */
static PyObject *kernel_get_shard(PyObject *self, void *closure) {
  (void)closure;
  KernelObject *k = (KernelObject *)self;
  if (!k->plan) Py_RETURN_NONE;
  const dlx_sig *s = k->plan;
  dlx_shard_rule rule;
  dlx_derive_shard(s, &rule);
  int32_t ntensors = 0;
  for (int32_t i = 0; i < s->nparams; ++i) ntensors += s->params[i].type.kind == DLX_SIG_TENSOR;
  PyObject *ins = PyTuple_New(ntensors), *outs = PyTuple_New(s->nresults),
           *indep = PyFrozenSet_New(NULL);
  int bad = !ins || !outs || !indep;
  for (int32_t i = 0, j = 0; !bad && i < s->nparams; ++i) {
    if (s->params[i].type.kind != DLX_SIG_TENSOR) continue;
    PyObject *v = shard_labels(s, &s->params[i].type);
    if (!v) bad = 1;
    else PyTuple_SET_ITEM(ins, j++, v);
  }
  for (int32_t r = 0; !bad && r < s->nresults; ++r) {
    PyObject *v = shard_labels(s, &s->results[r]);
    if (!v) bad = 1;
    else PyTuple_SET_ITEM(outs, r, v);
  }
  for (int32_t sym = -1; !bad && sym < s->nsymbols; ++sym) {
    if (sym < 0 ? !rule.batch : !(rule.independent & (1u << sym))) continue;
    PyObject *w = PyUnicode_FromString(sym < 0 ? "..." : dlx_sig_str(s, s->symbols[sym]));
    if (!w || PySet_Add(indep, w)) bad = 1;
    Py_XDECREF(w);
  }
  if (bad) {
    Py_XDECREF(ins);
    Py_XDECREF(outs);
    Py_XDECREF(indep);
    return NULL;
  }
  return Py_BuildValue("(NNN)", ins, outs, indep);
}

/* The torch operator schema "name(Tensor x, ...) -> Tensor"; None undeclared; ValueError(why)
 * when torch cannot express the declaration. */
static PyObject *kernel_get_schema(PyObject *self, void *closure) {
  (void)closure;
  KernelObject *k = (KernelObject *)self;
  if (!k->plan) Py_RETURN_NONE;
  char buf[3 * DLX_SIG_MAX_LEN], why[256];
  if (dlx_derive_schema(k->plan, k->info.name, buf, sizeof buf, why, sizeof why))
    return PyErr_Format(PyExc_ValueError, "%s(): %s", k->info.name, why);
  return PyUnicode_FromString(buf);
}

static PyObject *kernel_get_nogil(PyObject *self, void *closure) {
  (void)closure;
  KernelObject *k = (KernelObject *)self;
  return PyBool_FromLong(k->plan && (k->plan->options & DLX_SIG_NOGIL));
}

/* Declared `; effects`: compilers stage every call (dlx.jax, dlx.torch_ops). */
static PyObject *kernel_get_effects(PyObject *self, void *closure) {
  (void)closure;
  KernelObject *k = (KernelObject *)self;
  return PyBool_FromLong(k->plan && (k->plan->options & DLX_SIG_EFFECTS));
}

/* pickle.dumps(kernel): its library (by path, dlx/_pickle.py) and its name. */
static PyObject *kernel_reduce(PyObject *self, PyObject *unused) {
  (void)unused;
  KernelObject *k = (KernelObject *)self;
  PyObject *mod = PyImport_ImportModule("dlx._pickle");
  PyObject *r = mod ? PyObject_CallMethod(mod, "reduce_kernel", "Os", k->path, k->info.name)
                    : NULL;
  Py_XDECREF(mod);
  return r;
}

/* kernel._handle(): capsule "dlx.kernel_handle" of (fn, plan, name) for glue libraries;
 * it holds a reference to the kernel, which owns the plan and the name. */
static void handle_free(PyObject *cap) {
  void *h = PyCapsule_GetPointer(cap, DLX_KERNEL_HANDLE_CAPSULE);
  PyObject *kernel = PyCapsule_GetContext(cap);
  PyMem_Free(h);
  Py_XDECREF(kernel);
}

static PyObject *kernel_handle(PyObject *self, PyObject *unused) {
  (void)unused;
  KernelObject *k = (KernelObject *)self;
  dlx_kernel_handle *h = PyMem_Malloc(sizeof *h);
  if (!h) return PyErr_NoMemory();
  *h = (dlx_kernel_handle){.fn = k->info.fn, .plan = k->plan, .name = k->info.name};
  PyObject *cap = PyCapsule_New(h, DLX_KERNEL_HANDLE_CAPSULE, handle_free);
  if (!cap) {
    PyMem_Free(h);
    return NULL;
  }
  if (PyCapsule_SetContext(cap, Py_NewRef(self))) {
    Py_DECREF(self);
    Py_DECREF(cap);
    return NULL;
  }
  return cap;
}

/* kernel._mark_operator(): dlx.torch.register made it torch.ops.<ns>.<name>; from now on a
 * direct call under a torch mode or the profiler takes the operator's path. */
static PyObject *kernel_mark_operator(PyObject *self, PyObject *unused) {
  (void)unused;
  dlx_relaxed_store(&((KernelObject *)self)->info.torch_op, 1);
  Py_RETURN_NONE;
}

/* kernel._call_direct(...): the call as lib.NAME(...) makes it, for the operator's own
 * implementation: the torch modes that led there are not asked again (no loop). */
static PyObject *kernel_call_direct(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                    PyObject *kwnames) {
  int was = dlx_torch_direct;
  dlx_torch_direct = 1;
  PyObject *r = dlx_call_kernel(&((KernelObject *)self)->info, args, nargs, kwnames);
  dlx_torch_direct = was;
  return r;
}

/* kernel._scalar(i, value): scalar parameter i's value as the eager call converts it, or
 * the eager call's error (dlx.jax stages attributes with it). */
static PyObject *kernel_scalar(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  KernelObject *k = (KernelObject *)self;
  if (nargs != 2) return PyErr_Format(PyExc_TypeError, "_scalar(i, value): 2 arguments");
  long i = PyLong_AsLong(args[0]);
  if (i == -1 && PyErr_Occurred()) return NULL;
  if (!k->plan || i < 0 || i >= k->plan->nparams ||
      k->plan->params[i].type.kind == DLX_SIG_TENSOR)
    return PyErr_Format(PyExc_ValueError, "%s(): parameter %ld is no declared scalar",
                        k->info.name, i);
  return dlx_convert_scalar(&k->info, (int32_t)i, args[1]);
}

static PyMethodDef kernel_methods[] = {
    {"__reduce__", kernel_reduce, METH_NOARGS, NULL},
    {"_mark_operator", kernel_mark_operator, METH_NOARGS, NULL},
    {"_call_direct", (PyCFunction)(void (*)(void))kernel_call_direct,
     METH_FASTCALL | METH_KEYWORDS, NULL},
    {"_handle", kernel_handle, METH_NOARGS,
     "capsule 'dlx.kernel_handle' of the kernel's (fn, plan, name), keeping the kernel alive"},
    {"_scalar", (PyCFunction)(void (*)(void))kernel_scalar, METH_FASTCALL,
     "_scalar(i, value): scalar parameter i converted as a call converts it"},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef kernel_getset[] = {
    {"__name__", kernel_get_name, NULL, NULL, NULL},
    {"__qualname__", kernel_get_name, NULL, NULL, NULL},
    {"__doc__", kernel_get_doc, NULL, NULL, NULL},
    {"__signature__", kernel_get_pysig, NULL, NULL, NULL},
    {"signature", kernel_get_signature, NULL, "the declared signature, or None", NULL},
    {"_params", kernel_get_params, NULL, NULL, NULL},
    {"_results", kernel_get_results, NULL, NULL, NULL},
    {"_nogil", kernel_get_nogil, NULL, NULL, NULL},
    {"_effects", kernel_get_effects, NULL, NULL, NULL},
    {"_plan", kernel_get_plan, NULL, NULL, NULL},
    {"_path", kernel_get_path, NULL, NULL, NULL},
    {"_derived", kernel_get_derived, NULL, NULL, NULL},
    {"_schema", kernel_get_schema, NULL, NULL, NULL},
    {"_shard", kernel_get_shard, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL}};

/* A descriptor that binds nothing (as a builtin function): inspect.isroutine(kernel) is
 * then true, so help() documents it as a function with its signature and docstring. */
static PyObject *kernel_descr_get(PyObject *self, PyObject *obj, PyObject *type) {
  (void)obj;
  (void)type;
  return Py_NewRef(self);
}

static PyTypeObject KernelType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "dlx.Kernel",
    .tp_basicsize = sizeof(KernelObject),
    .tp_weaklistoffset = offsetof(KernelObject, weakrefs),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(KernelObject, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_dealloc = kernel_dealloc,
    .tp_repr = kernel_repr,
    .tp_getset = kernel_getset,
    .tp_methods = kernel_methods,
    .tp_descr_get = kernel_descr_get,
    .tp_doc = "A kernel of a dlx.Library; call it with tensors and scalars.",
};

/* The kernel record behind symbol `sym`, or NULL when it is not one (src/core/libraries/dlx_discover.c,
 * shared with dlx_torch_register's discovery). */
static const dlx_kernel_record *record_of(void *handle, const char *sym) {
  return dlx_record_of(handle, sym);
}

/* Parse the declared signature once into the kernel's plan, names, defaults and doc. */
static int bind_signature(KernelObject *k, const char *text, PyObject *path) {
  const char *name = k->info.name;
  if (!text) {
    k->signature = Py_NewRef(Py_None);
    k->doc = PyUnicode_FromFormat(
        "%s(*args)\n\nA dlx kernel without a declared signature: positional tensors, "
        "int, float, bool, str, tuples or lists of numbers, or None; no checks.",
        name);
    return k->doc ? 0 : -1;
  }
  char err[256];
  int32_t column = 0;
  k->plan = dlx_sig_parse(text, err, sizeof err, &column);
  if (!k->plan) {
    if (column > 0) {
      char caret[DLX_SIG_MAX_LEN + 2]; /* under the fault; tabs kept so it lines up */
      int32_t n = 0;
      for (; n < column - 1 && n < DLX_SIG_MAX_LEN && text[n]; ++n)
        caret[n] = text[n] == '\t' ? '\t' : ' ';
      caret[n++] = '^';
      caret[n] = 0;
      PyErr_Format(PyExc_ImportError,
                   "kernel '%s' in %U: malformed signature at column %d: %s\n  %.4096s\n  %s", name,
                   path, (int)column, err, text, caret);
    } else
      PyErr_Format(PyExc_ImportError, "kernel '%s' in %U: signature: %s", name, path, err);
    return -1;
  }
  const dlx_sig *s = k->plan;
  k->signature = PyUnicode_FromString(text);
  if (!k->signature) return -1;
  int32_t np = s->nparams;
  k->owned = PyMem_Calloc((size_t)(2 * np + 1), sizeof(PyObject *));
  if (!k->owned) return PyErr_NoMemory(), -1;
  k->info.param_names = k->owned;
  k->info.defaults = k->owned + np;
  k->quick = PyMem_Calloc((size_t)(np ? np : 1), sizeof *k->quick);
  if (!k->quick) return PyErr_NoMemory(), -1;
  for (int32_t i = 0; i < np; ++i) {
    dlx_sig_quick_plan(s, i, &k->quick[i]);
    if (k->quick[i].kind == DLX_SIG_TENSOR && k->quick[i].mut)
      k->info.mut_params |= (uint64_t)1 << i;
  }
  k->info.quick = k->quick;
  for (int32_t i = 0; i < np; ++i) {
    const dlx_sig_param *p = &s->params[i];
    if (!(k->owned[i] = PyUnicode_InternFromString(dlx_sig_param_name(s, i)))) return -1;
    PyObject *d = NULL;
    switch (p->def_kind) {
      case DLX_DEF_REQUIRED: continue;
      case DLX_DEF_NONE: d = Py_NewRef(Py_None); break;
      case DLX_DEF_INT: d = PyLong_FromLongLong(p->def.i); break;
      case DLX_DEF_FLOAT: d = PyFloat_FromDouble(p->def.f); break;
      case DLX_DEF_BOOL: d = PyBool_FromLong((long)p->def.i); break;
      case DLX_DEF_STR: d = PyUnicode_DecodeUTF8(dlx_sig_str(s, p->def_off), p->def_len, NULL); break;
      default: /* a tuple of ints or floats */
        d = PyTuple_New(p->def_len);
        for (int32_t j = 0; d && j < p->def_len; ++j) {
          PyObject *e = p->def_kind == DLX_DEF_INTS ? PyLong_FromLongLong(s->nums[p->def_off + j].i)
                                                    : PyFloat_FromDouble(s->nums[p->def_off + j].f);
          if (!e) Py_CLEAR(d);
          else PyTuple_SET_ITEM(d, j, e);
        }
    }
    if (!d) {
      PyObject *et, *ev, *tb;
      PyErr_Fetch(&et, &ev, &tb);
      PyErr_Format(PyExc_ImportError, "kernel '%s' in %U: default of '%s' unusable (%S)", name,
                   path, dlx_sig_param_name(s, i), ev ? ev : Py_None);
      Py_XDECREF(et), Py_XDECREF(ev), Py_XDECREF(tb);
      return -1;
    }
    k->info.defaults[i] = d;
  }
  /* The docstring's first line is the call as declared: "softmax(x: f32[m, n], ...) -> ..." */
  char params[DLX_SIG_MAX_LEN * 2], results[DLX_SIG_MAX_LEN];
  dlx_sig_format_parts(s, DLX_SIG_PART_PARAMS, params, sizeof params);
  dlx_sig_format_parts(s, DLX_SIG_PART_RESULTS, results, sizeof results);
  k->doc = PyUnicode_FromFormat(
      "%s(%s)%s%s\n\nA dlx kernel; declared signature: %s%s%s", name, params,
      s->has_results ? " -> " : "", results, text,
      (s->options & DLX_SIG_NOGIL) ? "\nRuns without the GIL (nogil)." : "",
      (s->options & DLX_SIG_EFFECTS)
          ? "\nHas effects: compilers run every call (never folded, removed or merged)."
          : "");
  k->info.sig = s;
  return k->doc ? 0 : -1;
}

typedef struct {
  void *handle;
  PyObject *path;
  PyObject *found; /* name -> Kernel */
  int failed;
} collect_ctx;

static void collect(void *vctx, const char *sym) {
  collect_ctx *c = vctx;
  if (c->failed) return;
  const dlx_kernel_record *r = record_of(c->handle, sym);
  if (!r) return;
  /* A newer minor may read runtime fields this dlx lacks: refused too. */
  if (DLX_ABI_MAJOR(r->abi_version) != DLX_ABI_MAJOR(DLX_ABI_VERSION) ||
      DLX_ABI_MINOR(r->abi_version) > DLX_ABI_MINOR(DLX_ABI_VERSION)) {
    PyErr_Format(PyExc_ImportError,
                 "kernel '%s' in %U was built for dlx ABI %u.%u, this dlx is ABI %u.%u "
                 "(rebuild the kernel against this dlx's headers, or upgrade dlx)",
                 r->name, c->path, DLX_ABI_MAJOR(r->abi_version),
                 DLX_ABI_MINOR(r->abi_version), DLX_ABI_MAJOR(DLX_ABI_VERSION),
                 DLX_ABI_MINOR(DLX_ABI_VERSION));
    c->failed = 1;
    return;
  }
  KernelObject *k = PyObject_New(KernelObject, &KernelType);
  if (k) { /* dealloc-safe before it is filled */
    k->path = k->signature = k->doc = k->pysig = NULL;
    k->owned = NULL;
    k->plan = NULL;
    k->quick = NULL;
    k->weakrefs = NULL;
    memset(&k->info, 0, sizeof k->info);
  }
  /* Interned: `lib.NAME` in code is an interned string, so a lookup is a pointer compare. */
  PyObject *name = PyUnicode_InternFromString(r->name);
  if (!k || !name) {
    Py_XDECREF(k);
    Py_XDECREF(name);
    c->failed = 1;
    return;
  }
  k->vectorcall = kernel_vectorcall;
  k->info.fn = r->fn;
  k->info.name = r->name;
  k->info.self = (PyObject *)k;
  k->path = Py_NewRef(c->path);
  /* The record's signature field exists from ABI 1.1 on. */
  const char *sig = DLX_ABI_MINOR(r->abi_version) >= 1 ? r->signature : NULL;
  if (bind_signature(k, sig, c->path) || PyDict_SetItem(c->found, name, (PyObject *)k))
    c->failed = 1;
  Py_DECREF(k);
  Py_DECREF(name);
}

static void ignore(void *ctx, const char *sym) {
  (void)ctx;
  (void)sym;
}

/* A kernel named like an attribute of dlx.Library (or its base) keeps that attribute's
 * meaning, as an instance attribute would: it gets no slot. "__x" would be mangled as a
 * slot name ("_Library__x"), and `__slots__` takes only identifiers (a C name may hold '$'),
 * so such names get none either. */
static int gets_slot(PyObject *name) {
  return PyUnicode_IsIdentifier(name) > 0 && !_PyType_Lookup(&LibraryType, name) &&
         !(PyUnicode_GET_LENGTH(name) >= 2 && PyUnicode_READ_CHAR(name, 0) == '_' &&
           PyUnicode_READ_CHAR(name, 1) == '_');
}

/* The library's own type: a subclass of dlx.Library named like it, with a slot per kernel
 * in `slotted` (sorted). Made by calling `type` so that the type machinery lays out the
 * slots and sets the instance's traverse, clear and dealloc (which also visit, clear and
 * release the slots and the type), and on 3.12+ makes `__getattr__` the fallback. Made
 * immutable once built: the 3.11 lookup relies on the slots staying where they are. */
static PyTypeObject *library_type(PyObject *slotted) {
  PyObject *ns = Py_BuildValue("{s:O,s:s,s:s,s:s}", "__slots__", slotted, "__module__", "dlx",
                               "__qualname__", "Library", "__doc__", LibraryType.tp_doc);
  if (!ns) return NULL;
  PyObject *t = PyObject_CallFunction((PyObject *)&PyType_Type, "s(O)O", "Library",
                                      (PyObject *)&LibraryType, ns);
  Py_DECREF(ns);
  if (t) ((PyTypeObject *)t)->tp_flags |= Py_TPFLAGS_IMMUTABLETYPE;
  return (PyTypeObject *)t;
}

/* The library at `path` (read for its kernel records, and dlopen'ed unless `fd` >= 0:
 * then loaded through that descriptor, whose file `path` names, by dlx_cache_dlopen),
 * shown as `shown`. */
static PyObject *load_at(const char *path, int *fd, PyObject *shown) {
  char via[64], err[256];
  void *handle = NULL;
  PyObject *names = NULL, *slotted = NULL, *kernels = NULL;
  PyTypeObject *type = NULL;
  LibraryObject *lib = NULL;
  collect_ctx ctx = {NULL, shown, PyDict_New(), 0};
  if (!ctx.found) goto done;
  /* Read the symbol table before mapping: a truncated file is refused, not mapped. */
  if (dlx_elf_each_symbol(path, DLX_KERNEL_RECORD_PREFIX, ignore, NULL, err, sizeof err) < 0) {
    PyErr_Format(PyExc_OSError, "dlx.load: %s", err);
    goto done;
  }
  if (fd) {
    handle = dlx_cache_dlopen(fd, RTLD_NOW | RTLD_LOCAL, err, sizeof err);
    if (!handle) {
      PyErr_Format(PyExc_OSError, "dlx.load: %U: %s", shown, err);
      goto done;
    }
    dlx_fd_path(*fd, via, sizeof via); /* the descriptor may have moved */
    path = via;
  } else {
    handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  }
  if (!handle) {
    const char *e = dlerror();
    PyErr_Format(PyExc_OSError, "dlx.load: %s", e ? e : path);
    goto done;
  }
  ctx.handle = handle;
  int n = dlx_elf_each_symbol(path, DLX_KERNEL_RECORD_PREFIX, collect, &ctx, err, sizeof err);
  if (n < 0 && !ctx.failed) PyErr_Format(PyExc_OSError, "dlx.load: %s", err);
  if (n < 0 || ctx.failed) goto done;
  /* Symbol-table order is a hash order: sort for a stable `lib.kernels`. */
  if (!(names = PyDict_Keys(ctx.found)) || PyList_Sort(names) ||
      !(kernels = PyList_AsTuple(names)) || !(slotted = PyList_New(0)))
    goto done;
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(names); ++i) {
    PyObject *name = PyList_GET_ITEM(names, i);
    if (gets_slot(name) && PyList_Append(slotted, name)) goto done;
  }
  if (!(type = library_type(slotted))) goto done;
  lib = (LibraryObject *)type->tp_alloc(type, 0); /* zeroed: every slot empty */
  if (!lib) goto done;
  lib->path = Py_NewRef(shown);
  lib->kernels = Py_NewRef(kernels);
  lib->by_name = Py_NewRef(ctx.found);
  lib->handle = handle;
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(names); ++i) {
    PyObject *name = PyList_GET_ITEM(names, i), *k = PyDict_GetItem(ctx.found, name);
    if (gets_slot(name) ? PyObject_GenericSetAttr((PyObject *)lib, name, k)
                        : ((!lib->dict && !(lib->dict = PyDict_New())) ||
                           PyDict_SetItem(lib->dict, name, k))) {
      Py_CLEAR(lib);
      goto done;
    }
  }
done:
  Py_XDECREF(type); /* the instance holds its type */
  Py_XDECREF(names);
  Py_XDECREF(slotted);
  Py_XDECREF(kernels);
  Py_XDECREF(ctx.found);
  return (PyObject *)lib;
}

PyObject *dlx_load(PyObject *self, PyObject *arg) {
  (void)self;
  PyObject *bytes = NULL;
  if (!PyUnicode_FSConverter(arg, &bytes)) return NULL;
  const char *path = PyBytes_AS_STRING(bytes);
  PyObject *r = NULL, *shown = NULL;
  if (!strchr(path, '/'))
    PyErr_Format(PyExc_ValueError, "dlx.load needs a path with a folder, got '%s'", path);
  else if ((shown = PyUnicode_DecodeFSDefault(path)))
    r = load_at(path, NULL, shown);
  Py_XDECREF(shown);
  Py_DECREF(bytes);
  return r;
}

PyObject *dlx_load_fd(int *fd, PyObject *shown) {
  char via[64];
  if (dlx_fd_path(*fd, via, sizeof via)) return PyErr_Format(PyExc_OSError, "bad descriptor");
  return load_at(via, fd, shown);
}

/* The kernels that are no attribute: a name Python cannot spell after a dot (`cost$k`), or
 * one a data attribute of the library shadows (`kernels`, `path`); said in the
 * AttributeError as "; not an attribute: reach it as lib['cost$k']", or "" when none. */
static PyObject *unspellable(LibraryObject *lib) {
  PyObject *hidden = PyList_New(0);
  for (Py_ssize_t i = 0; hidden && i < PyTuple_GET_SIZE(lib->kernels); ++i) {
    PyObject *n = PyTuple_GET_ITEM(lib->kernels, i), *d = _PyType_Lookup(&LibraryType, n);
    if ((PyUnicode_IsIdentifier(n) <= 0 || (d && Py_TYPE(d)->tp_descr_set)) &&
        PyList_Append(hidden, n))
      Py_CLEAR(hidden);
  }
  if (!hidden) return NULL;
  PyObject *r = NULL;
  if (PyList_GET_SIZE(hidden) == 0) {
    r = PyUnicode_FromString("");
  } else {
    PyObject *sep = PyUnicode_FromString("'], lib['");
    PyObject *joined = sep ? PyUnicode_Join(sep, hidden) : NULL;
    if (joined)
      r = PyUnicode_FromFormat("; not %s: reach %s as lib['%U']",
                               PyList_GET_SIZE(hidden) == 1 ? "an attribute" : "attributes",
                               PyList_GET_SIZE(hidden) == 1 ? "it" : "them", joined);
    Py_XDECREF(sep);
    Py_XDECREF(joined);
  }
  Py_DECREF(hidden);
  return r;
}

/* The AttributeError for a name the generic lookup did not find: why, precisely. Names
 * starting with "_" keep the generic error (raised here when it is no longer pending). */
static PyObject *library_missing(PyObject *self, PyObject *name) {
  LibraryObject *lib = (LibraryObject *)self;
  const char *s = PyUnicode_AsUTF8(name);
  if (!s) return NULL;
  if (s[0] == '_' || !lib->handle) {
    if (!PyErr_Occurred())
      PyErr_Format(PyExc_AttributeError, "'%.50s' object has no attribute '%U'",
                   Py_TYPE(self)->tp_name, name);
    return NULL;
  }
  PyErr_Clear();
  if (dlsym(lib->handle, s))
    PyErr_Format(PyExc_AttributeError,
                 "'%s' in %U is not a dlx kernel: only functions defined with DLX_KERNEL(%s) "
                 "can be called",
                 s, lib->path, s);
  else {
    PyObject *hidden = unspellable(lib);
    if (hidden)
      PyErr_Format(PyExc_AttributeError, "%U has no kernel '%s' (it defines %R%U)", lib->path, s,
                   lib->kernels, hidden);
    Py_XDECREF(hidden);
  }
  return NULL;
}

#if DLX_LIB_HITS
static void forget_hits(LibraryObject *lib) {
  for (size_t i = 0; i < sizeof lib->hits / sizeof lib->hits[0]; ++i) Py_CLEAR(lib->hits[i].name);
}

/* The general lookup, remembering where a kernel's slot is (a member descriptor in the
 * library's own, immutable, type: that is what the generic lookup reads for the name, for
 * good), and on a miss an error saying why precisely. */
static __attribute__((noinline)) PyObject *library_getattro_slow(PyObject *self,
                                                                 PyObject *name) {
  LibraryObject *lib = (LibraryObject *)self;
  if (PyUnicode_CheckExact(name)) {
    PyObject *d = PyDict_GetItemWithError(Py_TYPE(self)->tp_dict, name); /* borrowed */
    Py_ssize_t offset = d && Py_IS_TYPE(d, &PyMemberDescr_Type)
                            ? ((PyMemberDescrObject *)d)->d_member->offset
                            : 0;
    if (offset >= (Py_ssize_t)sizeof(LibraryObject)) {
      size_t at = ((uintptr_t)name >> 4) & (sizeof lib->hits / sizeof lib->hits[0] - 1);
      PyObject *old = lib->hits[at].name;
      lib->hits[at].name = Py_NewRef(name);
      lib->hits[at].slot = (PyObject **)((char *)self + offset);
      Py_XDECREF(old); /* after the store: a destructor sees a consistent entry */
    } else if (!d && PyErr_Occurred()) {
      return NULL;
    }
  }
  PyObject *v = PyObject_GenericGetAttr(self, name);
  if (v || !PyErr_ExceptionMatches(PyExc_AttributeError) || !PyUnicode_Check(name)) return v;
  return library_missing(self, name);
}

/* `lib.NAME` for a name seen before: its slot, read (empty when deleted: then the general
 * lookup says so). */
static PyObject *library_getattro(PyObject *self, PyObject *name) {
  LibraryObject *lib = (LibraryObject *)self;
  size_t at = ((uintptr_t)name >> 4) & (sizeof lib->hits / sizeof lib->hits[0] - 1);
  if (lib->hits[at].name == name) {
    PyObject *v = *lib->hits[at].slot;
    if (v) return Py_NewRef(v);
  }
  return library_getattro_slow(self, name);
}
#else
/* __getattr__: called by the generic lookup's fallback only for a name it did not find. */
static PyObject *library_getattr(PyObject *self, PyObject *name) {
  return library_missing(self, name);
}
#endif

/* The slots are visited, cleared and released by the library type's own slots (the type
 * machinery's), which then call these. */
static int library_traverse(PyObject *self, visitproc visit, void *arg) {
  Py_VISIT(((LibraryObject *)self)->dict);
  Py_VISIT(((LibraryObject *)self)->by_name);
  return 0;
}

static int library_clear(PyObject *self) {
  Py_CLEAR(((LibraryObject *)self)->dict);
  return 0;
}

/* The handle is never dlclose'd: tensors and tables a kernel handed out may point
 * into the library's code or data long after the Library object is gone. */
static void library_dealloc(PyObject *self) {
  LibraryObject *lib = (LibraryObject *)self;
  PyObject_GC_UnTrack(self);
#if DLX_LIB_HITS
  forget_hits(lib);
#endif
  library_clear(self);
  Py_XDECREF(lib->path);
  Py_XDECREF(lib->kernels);
  Py_XDECREF(lib->by_name);
  Py_TYPE(self)->tp_free(self);
}

/* `del lib.k`: the kernels are the library's (issue 25); unbound, `lib.k` would say that
 * no DLX_KERNEL(k) exists. Other deletions, and assignments (which lib["k"] survives),
 * behave as on any object with a dict. */
static int library_setattro(PyObject *self, PyObject *name, PyObject *value) {
  LibraryObject *lib = (LibraryObject *)self;
  if (!value && lib->kernels && PyUnicode_Check(name)) {
    int is_kernel = PySequence_Contains(lib->kernels, name);
    if (is_kernel < 0) return -1;
    if (is_kernel) {
      PyErr_Format(PyExc_AttributeError,
                   "cannot delete kernel '%U' of %U: its kernels belong to the library", name,
                   lib->path);
      return -1;
    }
  }
  return PyObject_GenericSetAttr(self, name, value);
}

static PyObject *library_repr(PyObject *self) {
  LibraryObject *lib = (LibraryObject *)self;
  return PyUnicode_FromFormat("<dlx.Library %R kernels=%R>", lib->path, lib->kernels);
}

static PyObject *library_dir(PyObject *self, PyObject *unused) {
  (void)unused;
  LibraryObject *lib = (LibraryObject *)self;
  PyObject *extra = Py_BuildValue("(ss)", "kernels", "path");
  PyObject *names = extra ? PySequence_Concat(lib->kernels, extra) : NULL;
  Py_XDECREF(extra);
  PyObject *list = names ? PySequence_List(names) : NULL;
  Py_XDECREF(names);
  return list;
}

/* lib["name"]: every kernel, also one whose name Python cannot spell as an attribute
 * (`cost$k`, `class`) or that an attribute of the library shadows (`kernels`, `path`). */
static PyObject *library_subscript(PyObject *self, PyObject *key) {
  LibraryObject *lib = (LibraryObject *)self;
  PyObject *k = lib->by_name ? PyDict_GetItemWithError(lib->by_name, key) : NULL;
  if (k) return Py_NewRef(k);
  if (PyErr_Occurred()) return NULL;
  if (!PyUnicode_Check(key))
    return PyErr_Format(PyExc_TypeError, "a kernel is looked up by its name (a str), not %.50s",
                        Py_TYPE(key)->tp_name);
  return PyErr_Format(PyExc_KeyError, "%U has no kernel %R (it defines %R)", lib->path, key,
                      lib->kernels);
}

static PyMappingMethods library_as_mapping = {NULL, library_subscript, NULL};

/* pickle.dumps(lib): by path and content digest, or by sources and options (dlx/_pickle.py). */
static PyObject *library_reduce(PyObject *self, PyObject *unused) {
  (void)unused;
  PyObject *mod = PyImport_ImportModule("dlx._pickle");
  PyObject *r = mod ? PyObject_CallMethod(mod, "reduce_library", "O", self) : NULL;
  Py_XDECREF(mod);
  return r;
}

static PyMemberDef library_members[] = {
    {"kernels", T_OBJECT_EX, offsetof(LibraryObject, kernels), READONLY,
     "names of the kernels the library defines"},
    {"path", T_OBJECT_EX, offsetof(LibraryObject, path), READONLY, "the loaded file"},
    {NULL, 0, 0, 0, NULL}};

static PyMethodDef library_methods[] = {
    {"__dir__", library_dir, METH_NOARGS, NULL},
    {"__reduce__", library_reduce, METH_NOARGS, NULL},
#if !DLX_LIB_HITS
    {"__getattr__", library_getattr, METH_O, NULL},
#endif
    {NULL, NULL, 0, NULL}};

/* The base of every library's own type (library_type); itself never instantiated. */
static PyTypeObject LibraryType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "dlx.Library",
    .tp_basicsize = sizeof(LibraryObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_BASETYPE,
    .tp_dictoffset = offsetof(LibraryObject, dict),
#if DLX_LIB_HITS
    .tp_getattro = library_getattro,
#endif
    .tp_setattro = library_setattro,
    .tp_traverse = library_traverse,
    .tp_clear = library_clear,
    .tp_dealloc = library_dealloc,
    .tp_repr = library_repr,
    .tp_as_mapping = &library_as_mapping,
    .tp_members = library_members,
    .tp_methods = library_methods,
    .tp_doc = "A shared library of dlx kernels; see dlx.load.",
};

int dlx_library_init(PyObject *module) {
  if (PyType_Ready(&KernelType) || PyType_Ready(&LibraryType)) return -1;
  if (PyModule_AddObjectRef(module, "Kernel", (PyObject *)&KernelType) ||
      PyModule_AddObjectRef(module, "Library", (PyObject *)&LibraryType))
    return -1;
  return 0;
}
