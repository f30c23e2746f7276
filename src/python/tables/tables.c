/*
 * tables.c - how a Python type yields tensors, found once per type and cached.
 *
 * Order (interface.md): the type's exchange table (`__dlpack_c_exchange_api__`
 * capsule, or the legacy int `__c_dlpack_exchange_api__`), a provider dlx
 * registered for the type or a base, `__dlpack__`, the buffer protocol.
 *
 * The cache is a small direct-mapped array keyed by type pointer and checked
 * against tp_version_tag: CPython resets the tag whenever an attribute of the
 * type (or of a base) changes, so a replaced table is noticed on the next call
 * without any attribute lookup on the hit path.
 */
#include "dlx_py.h"
#include "dlx_plain_view.h"

#include <unistd.h>

#include "dlx_core.h"

#define MAX_PREV_API_DEPTH 16

#if DLX_FREE_THREADED
dlx_type_info *_Atomic dlx_type_cache[DLX_TYPE_CACHE_SIZE];
_Atomic unsigned int dlx_provider_generation = 1; /* bumped on register: drops every entry */
_Atomic unsigned int dlx_calls_active;
dlx_type_info *_Atomic dlx_retired; /* entries no longer published, with their owners */
#else
dlx_type_info dlx_type_cache[DLX_TYPE_CACHE_SIZE];
unsigned int dlx_provider_generation = 1; /* bumped on register: drops every entry */
unsigned int dlx_calls_active;
PyObject *dlx_retired; /* list, or NULL when empty */
#endif
DLX_ATOMIC(PyTypeObject *) dlx_numpy_vouched;
/* Publishing an entry, retiring one, the provider views: short, no Python code inside. */
static dlx_mutex cache_lock;
static PyObject *providers;                  /* dict: type -> capsule */
static struct {
  PyTypeObject *type;
  dlx_scratch_view_fn view;
} provider_views[8]; /* dlx's own providers' fast views (cache_lock) */
static PyObject *str_api_attr, *str_legacy_attr, *str_dlpack;
/* list of (module name, type name, callback): run once, the first time a subclass of
 * that type is looked up, before its own table is read (how torch gets its table, or
 * its native one the NPU stream overlay, without `import dlx` ever compiling anything) */
static PyObject *lazy_setups;
DLX_ATOMIC(unsigned long long) dlx_stat_type_lookups;

#if DLX_FREE_THREADED
/* Under cache_lock: `e` (no longer published, or never) waits for the calls in progress. */
static void retire_locked(dlx_type_info *e) {
  if (!e) return;
  e->retired_next = atomic_load_explicit(&dlx_retired, memory_order_relaxed);
  atomic_store_explicit(&dlx_retired, e, memory_order_relaxed);
}

static void free_entries(dlx_type_info *e) {
  while (e) {
    dlx_type_info *next = e->retired_next;
    Py_XDECREF(e->owner);
    free(e);
    e = next;
  }
}

/* The list is taken first and the count read after: a call that still holds one of its
 * entries entered before that entry was unpublished, hence before it was listed, hence
 * before the list was taken, and is counted unless it has left. */
void dlx_release_retired(void) {
  DLX_LOCK(&cache_lock);
  dlx_type_info *list = atomic_exchange(&dlx_retired, NULL);
  if (list && atomic_load(&dlx_calls_active) != 0) { /* a call came in: put them back */
    dlx_type_info *tail = list;
    while (tail->retired_next) tail = tail->retired_next;
    tail->retired_next = atomic_load_explicit(&dlx_retired, memory_order_relaxed);
    atomic_store_explicit(&dlx_retired, list, memory_order_relaxed);
    list = NULL;
  }
  DLX_UNLOCK(&cache_lock);
  if (!list) return;
  PyObject *et, *ev, *tb;
  PyErr_Fetch(&et, &ev, &tb); /* destructors must not see (or eat) a pending error */
  free_entries(list);
  PyErr_Restore(et, ev, tb);
}

void dlx_retire_owner(PyObject *owner) { Py_XDECREF(owner); } /* entries carry theirs */
#else
void dlx_retire_owner(PyObject *owner) {
  if (!owner) return;
  if (!dlx_calls_active) {
    Py_DECREF(owner);
    return;
  }
  if (!dlx_retired && !(dlx_retired = PyList_New(0))) {
    PyErr_Clear(); /* out of memory: keeping the table forever is the safe failure */
    return;
  }
  if (PyList_Append(dlx_retired, owner)) {
    PyErr_Clear();
    return;
  }
  Py_DECREF(owner);
}

void dlx_release_retired(void) {
  PyObject *et, *ev, *tb;
  PyErr_Fetch(&et, &ev, &tb); /* destructors must not see (or eat) a pending error */
  PyObject *r = dlx_retired;
  dlx_retired = NULL;
  Py_XDECREF(r);
  PyErr_Restore(et, ev, tb);
}
#endif

/* A table header at `p` that a producer vouches for may still be garbage (a stale
 * legacy int, a wild prev_api): probe before reading it. */
static int header_readable(const void *p, const char *who, const char *what) {
  if (dlx_address_readable(p, sizeof(DLPackExchangeAPIHeader)) != 0) return 0;
  PyErr_Format(PyExc_TypeError, "%s: %s %p is not readable memory", who, what, p);
  return -1;
}

const DLPackExchangeAPI *dlx_table_validate(const DLPackExchangeAPIHeader *head, const char *who) {
  if (!head) {
    PyErr_Format(PyExc_TypeError, "%s: DLPack exchange table pointer is NULL", who);
    return NULL;
  }
  /* Only the header is read until a major-1 table is found: anything else in a
   * table of another major may have a different layout. */
  if (header_readable(head, who, "DLPack exchange table")) return NULL;
  const DLPackExchangeAPIHeader *h = head;
  for (int depth = 0; h && h->version.major != 1 && depth < MAX_PREV_API_DEPTH; ++depth) {
    h = h->prev_api;
    if (h && header_readable(h, who, "DLPack exchange table prev_api")) return NULL;
  }
  if (!h || h->version.major != 1) {
    PyErr_Format(PyExc_TypeError,
                 "%s: DLPack exchange table has major version %u and no major-1 table in "
                 "its prev_api chain (dlx speaks DLPack 1.x)",
                 who, (unsigned)head->version.major);
    return NULL;
  }
  const DLPackExchangeAPI *api = (const DLPackExchangeAPI *)h;
  if (dlx_address_readable(api, sizeof *api) == 0) {
    PyErr_Format(PyExc_TypeError, "%s: DLPack exchange table %p is not readable memory", who,
                 (const void *)api);
    return NULL;
  }
  const char *missing = !api->managed_tensor_allocator ? "managed_tensor_allocator"
                        : !api->managed_tensor_from_py_object_no_sync
                            ? "managed_tensor_from_py_object_no_sync"
                        : !api->managed_tensor_to_py_object_no_sync
                            ? "managed_tensor_to_py_object_no_sync"
                        : !api->current_work_stream ? "current_work_stream"
                                                    : NULL;
  if (missing) {
    PyErr_Format(PyExc_TypeError,
                 "%s: DLPack exchange table is unusable: required function %s is NULL", who,
                 missing);
    return NULL;
  }
  return api;
}

const DLPackExchangeAPI *dlx_table_from_capsule(PyObject *capsule, const char *who) {
  if (!PyCapsule_IsValid(capsule, DLX_EXCHANGE_API_CAPSULE)) {
    PyErr_Format(PyExc_TypeError, "%s: %s must be a PyCapsule named '%s', got %.100s", who,
                 DLX_EXCHANGE_API_ATTR, DLX_EXCHANGE_API_CAPSULE, Py_TYPE(capsule)->tp_name);
    return NULL;
  }
  return dlx_table_validate(PyCapsule_GetPointer(capsule, DLX_EXCHANGE_API_CAPSULE), who);
}

PyObject *dlx_table_capsule(const DLPackExchangeAPI *api) {
  return PyCapsule_New((void *)api, DLX_EXCHANGE_API_CAPSULE, NULL);
}

/* The attribute `name` of `tp`, NULL without exception when absent or None. */
static int type_attr(PyTypeObject *tp, PyObject *name, PyObject **out) {
  *out = PyObject_GetAttr((PyObject *)tp, name);
  if (*out) {
    if (*out == Py_None) Py_CLEAR(*out);
    return 0;
  }
  if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
  PyErr_Clear();
  return 0;
}

/* 1 when a pending setup for a base of `tp` ran (it is then dropped), 0 when none
 * applies, -1 on error. A setup's own failure is its business: it warns, we go on. */
static int run_lazy_setup(PyTypeObject *tp) {
  /* A snapshot: module attribute lookups may run code that changes the list. */
  PyObject *entries = PySequence_Tuple(lazy_setups);
  if (!entries) return -1;
  int ran = 0;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(entries) && !ran; ++i) {
    PyObject *entry = PyTuple_GET_ITEM(entries, i);
    PyObject *mod = PyImport_GetModule(PyTuple_GET_ITEM(entry, 0));
    if (!mod) {
      if (PyErr_Occurred()) PyErr_Clear();
      continue; /* not imported: this type cannot be one of its */
    }
    PyObject *base = PyObject_GetAttr(mod, PyTuple_GET_ITEM(entry, 1));
    Py_DECREF(mod);
    if (!base) { /* half-imported module: this setup does not apply (yet) */
      PyErr_Clear();
      continue;
    }
    int sub = PyType_Check(base) && PyType_IsSubtype(tp, (PyTypeObject *)base);
    Py_DECREF(base);
    if (!sub) continue;
    /* Found and taken out in one step: of threads meeting the type at once, one runs it. */
    Py_ssize_t at;
    int del = 0;
    Py_BEGIN_CRITICAL_SECTION(lazy_setups);
    at = PySequence_Index(lazy_setups, entry); /* by identity of the tuple */
    if (at >= 0) del = PySequence_DelItem(lazy_setups, at);
    Py_END_CRITICAL_SECTION();
    if (at < 0) { /* already run by a nested call, or another thread */
      PyErr_Clear();
      continue;
    }
    if (del) break;
    PyObject *r = PyObject_CallNoArgs(PyTuple_GET_ITEM(entry, 2));
    if (!r) break;
    Py_DECREF(r);
    ran = 1;
  }
  Py_DECREF(entries);
  return PyErr_Occurred() ? -1 : ran;
}

/* The legacy int attribute as a table address, refusing what cannot be one (0, 1,
 * -1, odd, the first page, unmapped) instead of dereferencing it; NULL with a
 * TypeError naming the type. */
static void *legacy_address(PyObject *attr, const char *who) {
  PyObject *zero = PyLong_FromLong(0);
  int negative = zero ? PyObject_RichCompareBool(attr, zero, Py_LT) : -1;
  Py_XDECREF(zero);
  if (negative < 0) return NULL;
  unsigned long long v = negative ? 0 : PyLong_AsUnsignedLongLong(attr);
  if (v == (unsigned long long)-1 && PyErr_Occurred()) {
    if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return NULL;
    PyErr_Clear();
    negative = 1; /* too large for an address: as implausible as a negative one */
  }
  char err[160];
  long page = sysconf(_SC_PAGESIZE);
  if (negative || v > UINTPTR_MAX) {
    PyErr_Format(PyExc_TypeError, "%s: %s = %R is not a plausible table address", who,
                 DLX_EXCHANGE_API_LEGACY_ATTR, attr);
    return NULL;
  }
  if (dlx_address_plausible(v, _Alignof(DLPackExchangeAPI), page > 0 ? (uint64_t)page : 4096,
                            err, sizeof err)) {
    PyErr_Format(PyExc_TypeError, "%s: %s is not a plausible table address: %s", who,
                 DLX_EXCHANGE_API_LEGACY_ATTR, err);
    return NULL;
  }
  return (void *)(uintptr_t)v; /* dlx_table_validate probes it before reading */
}

static int discover(PyTypeObject *tp, dlx_type_info *info) {
  const char *who = tp->tp_name;
  PyObject *attr;
  /* Before the attribute: a type may bring its own table and still need setting up
   * (torch 2.x with torch_npu: dlx lays its NPU stream overlay over the native table). */
  if (PyList_GET_SIZE(lazy_setups)) {
    int ran = run_lazy_setup(tp);
    if (ran < 0) return -1;
    if (ran) return discover(tp, info); /* the setup may have installed a table */
  }
  if (type_attr(tp, str_api_attr, &attr)) return -1;
  if (attr) {
    info->api = dlx_table_from_capsule(attr, who);
    if (!info->api) goto fail;
    goto table;
  }
  if (type_attr(tp, str_legacy_attr, &attr)) return -1;
  if (attr) {
    if (!PyLong_Check(attr)) {
      PyErr_Format(PyExc_TypeError, "%s: %s must be an int address, got %.100s", who,
                   DLX_EXCHANGE_API_LEGACY_ATTR, Py_TYPE(attr)->tp_name);
      goto fail;
    }
    void *p = legacy_address(attr, who);
    if (!p) goto fail;
    info->api = dlx_table_validate(p, who);
    if (!info->api) goto fail;
    goto table;
  }
  /* Providers are registered for exact types; walking the MRO serves subclasses. */
  PyObject *mro = tp->tp_mro;
  for (Py_ssize_t i = 0; mro && i < PyTuple_GET_SIZE(mro); ++i) {
    int found = PyDict_GetItemRef(providers, PyTuple_GET_ITEM(mro, i), &attr);
    if (found > 0) {
      info->api = dlx_table_from_capsule(attr, who);
      if (!info->api) goto fail;
      DLX_LOCK(&cache_lock);
      for (size_t k = 0; k < sizeof provider_views / sizeof provider_views[0]; ++k)
        if ((PyObject *)provider_views[k].type == PyTuple_GET_ITEM(mro, i))
          info->scratch_view = provider_views[k].view;
      DLX_UNLOCK(&cache_lock);
      goto table;
    }
    if (found < 0) return -1;
  }
  int has = PyObject_HasAttr((PyObject *)tp, str_dlpack);
  if (has) {
    info->source = DLX_SRC_DLPACK;
    return 0;
  }
  if (tp->tp_as_buffer && tp->tp_as_buffer->bf_getbuffer) {
    info->source = DLX_SRC_BUFFER;
    return 0;
  }
  info->source = DLX_SRC_NOT_TENSOR;
  return 0;
table:
  info->api = dlx_torch_checked_table(info->api);
  info->call_flags = dlx_torch_is_checked(info->api) ? DLX_CONVERT_TORCH : 0;
  info->views_writable = dlx_torch_views_writable(info->api);
  if (info->views_writable) {
    const dlx_torch_parity *hooks = dlx_torch_hooks_of(info->api);
    if (hooks->size >= offsetof(dlx_torch_parity, view_mut) + sizeof hooks->view_mut)
      info->view_mut = hooks->view_mut;
    const dlx_torch_plain *first = dlx_plain_current(hooks); /* offsets fixed once offered */
    if (first) {
      info->plain = hooks->plain;
      info->plain_known = dlx_plain_known(&first->at);
    }
  }
  info->source = DLX_SRC_TABLE;
  info->owner = attr;
  return 0;
fail:
  Py_DECREF(attr);
  return -1;
}

/* What discover found, as an entry: tags read after the lookups (which gave the type a
 * valid tag), and the in-line view where the call loops may take it. */
static void fill_entry(PyTypeObject *tp, dlx_type_info *fresh, unsigned int generation) {
  fresh->version_tag = dlx_tag_of(tp);
  fresh->meta_version_tag = dlx_tag_of(Py_TYPE(tp));
  fresh->generation = generation;
  /* Scalars are read as scalars before any table is asked (dlx_convert_arg), also when
   * a provider was registered for their type: the in-line view must not overtake that. */
  if (fresh->source == DLX_SRC_TABLE && !fresh->scratch_view && tp != &PyLong_Type &&
      tp != &PyFloat_Type && tp != &PyBool_Type && tp != Py_TYPE(Py_None))
    fresh->view = fresh->api->dltensor_from_py_object_no_sync;
}

/* An entry that puts ndarray's arrays on dlx's in-line view for good (dlx_numpy_vouched):
 * dlx's numpy provider on a type whose attributes, and its metatype's, cannot change. */
static void vouch_numpy(PyTypeObject *tp, const dlx_type_info *e, unsigned int generation) {
  if (e->scratch_view == dlx_numpy_scratch_view && e->api == dlx_numpy_api &&
      PyType_HasFeature(tp, Py_TPFLAGS_IMMUTABLETYPE) &&
      PyType_HasFeature(Py_TYPE(tp), Py_TPFLAGS_IMMUTABLETYPE) &&
      generation == dlx_relaxed_load(&dlx_provider_generation))
    dlx_relaxed_store(&dlx_numpy_vouched, tp);
}

#if DLX_FREE_THREADED
const dlx_type_info *dlx_type_info_miss(PyTypeObject *tp) {
  dlx_relaxed_add(&dlx_stat_type_lookups, 1);
  /* Read before discovering: a provider registered meanwhile makes this entry stale. */
  unsigned int generation = atomic_load(&dlx_provider_generation);
  dlx_type_info fresh = {0};
  fresh.type = tp;
  if (discover(tp, &fresh)) return NULL;
  fill_entry(tp, &fresh, generation);
  dlx_type_info *e = aligned_alloc(_Alignof(dlx_type_info), sizeof *e);
  if (!e) {
    Py_XDECREF(fresh.owner);
    PyErr_NoMemory();
    return NULL;
  }
  *e = fresh;
  int cacheable = dlx_version_tag_valid(tp) && dlx_version_tag_valid(Py_TYPE(tp));
  DLX_LOCK(&cache_lock);
  if (cacheable && generation == atomic_load(&dlx_provider_generation)) {
    retire_locked(atomic_exchange(&dlx_type_cache[dlx_type_index(tp)], e));
    vouch_numpy(tp, e, generation);
  } else
    retire_locked(e); /* for this call only: freed after it (the caller is a call) */
  DLX_UNLOCK(&cache_lock);
  return e;
}
#else
const dlx_type_info *dlx_type_info_miss(PyTypeObject *tp) {
  dlx_type_info *e = &dlx_type_cache[dlx_type_index(tp)];
  ++dlx_stat_type_lookups;
  dlx_type_info fresh = {0};
  fresh.type = tp;
  if (discover(tp, &fresh)) return NULL;
  fill_entry(tp, &fresh, dlx_provider_generation);
  PyObject *old = e->owner;
  *e = fresh;
  if (old && old == e->owner)
    Py_DECREF(old); /* the same owner again (an uncacheable type): still held */
  else
    dlx_retire_owner(old); /* a call in progress may still be using its table */
  if (!dlx_version_tag_valid(tp) || !dlx_version_tag_valid(Py_TYPE(tp))) e->type = NULL; /* uncacheable: keep it for this call only */
  else vouch_numpy(tp, e, dlx_provider_generation);
  return e;
}
#endif

int dlx_register_provider(PyTypeObject *tp, PyObject *capsule, dlx_scratch_view_fn view) {
  if (!dlx_table_from_capsule(capsule, tp->tp_name)) return -1;
  if (PyDict_SetItem(providers, (PyObject *)tp, capsule)) return -1;
  size_t n = sizeof provider_views / sizeof provider_views[0], k = 0;
  DLX_LOCK(&cache_lock);
  while (k < n && provider_views[k].type && provider_views[k].type != tp) ++k;
  if (k < n) {
    if (!provider_views[k].type) Py_INCREF(tp);
    provider_views[k].type = tp;
    provider_views[k].view = view; /* a re-registration without a view drops the old one */
  }
  /* Every entry is asked afresh (its owner stays until refilled, then is retired as on
   * any refill): the hit test need not compare generations on every call. ndarray too:
   * the registration may be for it or a base. */
  dlx_relaxed_store(&dlx_numpy_vouched, NULL);
#if DLX_FREE_THREADED
  atomic_fetch_add(&dlx_provider_generation, 1);
  for (size_t i = 0; i < DLX_TYPE_CACHE_SIZE; ++i)
    retire_locked(atomic_exchange(&dlx_type_cache[i], NULL));
  DLX_UNLOCK(&cache_lock);
  if (atomic_load(&dlx_calls_active) == 0) dlx_release_retired();
#else
  ++dlx_provider_generation;
  for (size_t i = 0; i < DLX_TYPE_CACHE_SIZE; ++i) dlx_type_cache[i].type = NULL;
#endif
  return 0;
}

static PyObject *register_lazy_setup(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *module, *type_name, *callback;
  if (!PyArg_ParseTuple(args, "UUO", &module, &type_name, &callback)) return NULL;
  PyObject *entry = PyTuple_Pack(3, module, type_name, callback);
  if (!entry || PyList_Append(lazy_setups, entry)) {
    Py_XDECREF(entry);
    return NULL;
  }
  Py_DECREF(entry);
  Py_RETURN_NONE;
}

/* current_work_stream of dlx's own tables for frameworks with no stream to ask (numpy, JAX) */
int dlx_no_stream(DLDeviceType device_type, int32_t device_id, void **out) {
  (void)device_type;
  (void)device_id;
  *out = NULL;
  return 0;
}

static PyMethodDef table_methods[] = {
    {"register_lazy_setup", register_lazy_setup, METH_VARARGS,
     "register_lazy_setup(module, type_name, callback): call callback() once, the first time "
     "an instance of module.type_name (or a subclass) is looked up, before its own table"},
    {NULL, NULL, 0, NULL}};

int dlx_tables_init(PyObject *module) {
  lazy_setups = PyList_New(0);
  if (!lazy_setups || PyModule_AddFunctions(module, table_methods)) return -1;
  providers = PyDict_New();
  str_api_attr = PyUnicode_InternFromString(DLX_EXCHANGE_API_ATTR);
  str_legacy_attr = PyUnicode_InternFromString(DLX_EXCHANGE_API_LEGACY_ATTR);
  str_dlpack = PyUnicode_InternFromString("__dlpack__");
  return providers && str_api_attr && str_legacy_attr && str_dlpack ? 0 : -1;
}
