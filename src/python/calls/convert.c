/*
 * convert.c - one Python argument to one dlx_arg, and its release after the call.
 *
 * Scalars are recognised by exact type first (the common case costs a pointer
 * compare); tensors go through the per-type cache in tables.c. Errors say what
 * was wrong; the caller adds which kernel and argument (call.c).
 */
#include "dlx_py.h"

#include "dlx_core.h"
#include "dlx_stream.h"

/* A buffer-protocol argument: the view plus the element shape/strides DLPack needs. */
typedef struct buffer_block {
  Py_buffer view;
  int64_t dims[]; /* shape[ndim] then strides[ndim] */
} buffer_block;

/* A conversion step failed: make sure an exception says so (the caller prefixes
 * the kernel and the argument). */
static int fail_arg(void) {
  if (!PyErr_Occurred())
    PyErr_SetString(PyExc_RuntimeError, "the producer failed without setting an error");
  return -1;
}

static int check_version(DLManagedTensorVersioned *m) {
  if (m->version.major == 1) return 0;
  unsigned major = m->version.major;
  if (m->deleter) m->deleter(m); /* always safe: the deleter's offset is ABI-stable */
  PyErr_Format(PyExc_BufferError, "unsupported DLPack tensor major version %u (dlx speaks 1.x)",
               major);
  return -1;
}

/* Producers before DLPack 1.2 may leave strides NULL for compact tensors; kernels are
 * promised strides, so give them compact ones: in the slot's scratch, or for more
 * dimensions than it holds (any ndim the ABI allows) in a block released with the
 * slot. Also refuses what no kernel could read: a negative ndim, no shape. */
__attribute__((cold, noinline)) static int fix_dims(dlx_arg *arg, dlx_slot *slot) {
  DLTensor *t = arg->value.tensor;
  if (t->ndim == 0) return 0;
  if (t->ndim < 0) {
    PyErr_Format(PyExc_BufferError, "tensor has a negative ndim (%d)", (int)t->ndim);
    return -1;
  }
  if (!t->shape) {
    PyErr_Format(PyExc_BufferError, "tensor has %d dimensions but a NULL shape", (int)t->ndim);
    return -1;
  }
  int64_t *strides = slot->scratch;
  if (t->ndim > DLX_SCRATCH_DIMS) {
    strides = slot->heap_strides = PyMem_Malloc(sizeof(int64_t) * (size_t)t->ndim);
    if (!strides) {
      PyErr_NoMemory();
      return -1;
    }
  }
  if (dlx_compact_strides(t->ndim, t->shape, strides)) {
    PyErr_SetString(PyExc_BufferError, "tensor without strides is too large: a stride does "
                                       "not fit in 64 bits");
    return -1;
  }
  slot->view = *t;
  slot->view.strides = strides;
  arg->value.tensor = &slot->view;
  return slot->heap_strides ? 1 : 0;
}

/* 0 (or 1 when it allocated strides the slot now owns), -1 with an exception. */
static inline int check_dims(dlx_arg *arg, dlx_slot *slot) {
  const DLTensor *t = arg->value.tensor;
  if (__builtin_expect(t->strides && t->shape && t->ndim >= 0, 1)) return 0;
  return fix_dims(arg, slot);
}

/* From here on the slot may own something: dlx_release_slot must see it clean. */
static inline void slot_clean(dlx_slot *slot) {
  slot->managed = NULL;
  slot->legacy = NULL;
  slot->buffer = NULL;
  slot->heap_strides = NULL;
}

__attribute__((cold)) int dlx_view_failed(dlx_arg *arg, dlx_slot *slot) {
  (void)arg;
  slot_clean(slot);
  return fail_arg();
}

__attribute__((cold)) int dlx_view_fix_dims(dlx_arg *arg, dlx_slot *slot) {
  slot_clean(slot);
  return fix_dims(arg, slot);
}

/* The table's owned export: it carries DLPack's flags (READ_ONLY), the view does not. */
static int from_table_owned(const DLPackExchangeAPI *api, PyObject *obj, dlx_arg *arg,
                            dlx_slot *slot) {
  DLManagedTensorVersioned *m = NULL;
  if (api->managed_tensor_from_py_object_no_sync(obj, &m)) return fail_arg();
  if (!m) {
    PyErr_SetString(PyExc_BufferError, "exchange table returned no tensor");
    return fail_arg();
  }
  if (check_version(m)) return -1;
  slot->managed = m;
  arg->value.tensor = &m->dl_tensor;
  arg->readonly = (m->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
  return check_dims(arg, slot) < 0 ? -1 : 1;
}

static int from_table(const DLPackExchangeAPI *api, PyObject *obj, dlx_arg *arg,
                      dlx_slot *slot) {
  slot->api = api;
  if (api->dltensor_from_py_object_no_sync) {
    if (api->dltensor_from_py_object_no_sync(obj, &slot->view)) return fail_arg();
    arg->value.tensor = &slot->view;
    return check_dims(arg, slot);
  }
  return from_table_owned(api, obj, arg, slot);
}

int dlx_convert_owned(const DLPackExchangeAPI *api, PyObject *obj, dlx_arg *arg,
                      dlx_slot *slot) {
  arg->readonly = 0;
  arg->kind = DLX_ARG_TENSOR; /* also when it fails: the caller then releases the slot */
  slot_clean(slot);
  slot->api = api;
  return from_table_owned(api, obj, arg, slot);
}

/* Producers that rejected keywords, per type: a retry costs an exception, so a type that
 * said "unexpected keyword" is asked without them from then on (keyed by the version
 * tag too: a type changed since is asked afresh). level: 0 all keywords, 1 no
 * max_version, 2 none. */
#define KW_MEMO_SIZE 16
static struct {
  PyTypeObject *type;
  unsigned int tag;
  int level;
} kw_memo[KW_MEMO_SIZE]; /* without a GIL, under kw_lock: its three fields go together */
static dlx_mutex kw_lock;

static int kw_memo_slot(PyTypeObject *tp) { return (int)(((uintptr_t)tp >> 4) & (KW_MEMO_SIZE - 1)); }

/* The pending TypeError says a keyword was refused (CPython: "got an unexpected keyword
 * argument", "takes no keyword arguments"); it stays pending. */
static int refused_keyword(void) {
  PyObject *et, *ev, *tb;
  PyErr_Fetch(&et, &ev, &tb);
  PyObject *text = ev ? PyObject_Str(ev) : NULL;
  const char *t = text && PyUnicode_Check(text) ? PyUnicode_AsUTF8(text) : NULL;
  int yes = t && strstr(t, "keyword") != NULL;
  Py_XDECREF(text);
  PyErr_Clear(); /* a failing str() must not replace the producer's error */
  PyErr_Restore(et, ev, tb);
  return yes;
}

static void kw_remember(PyTypeObject *tp, int level) {
  if (!dlx_version_tag_valid(tp)) return;
  int i = kw_memo_slot(tp);
  DLX_LOCK(&kw_lock);
  kw_memo[i].type = tp;
  kw_memo[i].tag = dlx_tag_of(tp);
  kw_memo[i].level = level;
  DLX_UNLOCK(&kw_lock);
}

/* Names and keyword tuples of the __dlpack__ calls, made once (first use: convert.c has no
 * init). Without a GIL, made under names_lock and published by `names_ready`. */
static PyObject *dlpack_name, *kw_version, *kw_both, *kw_stream, *max_version, *device_name;
static DLX_ATOMIC(int) names_ready;
static dlx_mutex names_lock;

static __attribute__((cold, noinline)) int make_names(void) {
  DLX_LOCK(&names_lock);
  if (!dlx_relaxed_load(&names_ready)) {
    dlpack_name = PyUnicode_InternFromString("__dlpack__");
    device_name = PyUnicode_InternFromString("__dlpack_device__");
    kw_version = Py_BuildValue("(s)", "max_version");
    kw_both = Py_BuildValue("(ss)", "stream", "max_version");
    kw_stream = Py_BuildValue("(s)", "stream");
    max_version = Py_BuildValue("(ii)", DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION);
    if (dlpack_name && device_name && kw_version && kw_both && kw_stream && max_version)
      dlx_release_store(&names_ready, 1); /* readers skip the lock: release, not relaxed */
    else { /* out of memory: asked again next time */
      Py_CLEAR(dlpack_name);
      Py_CLEAR(device_name);
      Py_CLEAR(kw_version);
      Py_CLEAR(kw_both);
      Py_CLEAR(kw_stream);
      Py_CLEAR(max_version);
    }
  }
  int ok = dlx_relaxed_load(&names_ready);
  DLX_UNLOCK(&names_lock);
  return ok ? 0 : -1;
}

/* 1 once made; a reader that sees the flag set sees the names (acquire, paired with the
 * release that set it; found by TSan under a free-threaded CPython). */
static inline int names_made(void) {
  return dlx_acquire_load(&names_ready) || make_names() == 0;
}

PyObject *dlx_call_dlpack(PyObject *obj, PyObject *stream, int fallback) {
  if (!names_made()) return NULL;
  PyTypeObject *tp = Py_TYPE(obj);
  int m = kw_memo_slot(tp), first = 0, refused = 0;
  if (fallback) {
    DLX_LOCK(&kw_lock);
    if (kw_memo[m].type == tp && kw_memo[m].tag == dlx_tag_of(tp) && dlx_version_tag_valid(tp))
      first = kw_memo[m].level;
    DLX_UNLOCK(&kw_lock);
  }
  for (int level = first;;) {
    /* level 0: every keyword; 1: stream alone (producers before DLPack 1.0); 2: none.
     * Without a stream, 1 and 2 are the same call. argv[0] is scratch the callee may use
     * (PY_VECTORCALL_ARGUMENTS_OFFSET). */
    PyObject *argv[4] = {NULL, obj, NULL, NULL}, *kw = NULL;
    if (level == 0) {
      argv[2] = stream ? stream : max_version;
      argv[3] = max_version;
      kw = stream ? kw_both : kw_version;
    } else if (level == 1 && stream) {
      argv[2] = stream;
      kw = kw_stream;
    }
    PyObject *cap =
        PyObject_VectorcallMethod(dlpack_name, argv + 1, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, kw);
    if (cap && refused && level > first) kw_remember(tp, level);
    if (cap || !fallback || level == 2 || (level == 1 && !stream) ||
        !PyErr_ExceptionMatches(PyExc_TypeError))
      return cap;
    refused |= refused_keyword();
    PyErr_Clear();
    ++level;
  }
}

/* obj.__dlpack__(...) with `stream` (NULL: none), its capsule consumed into the slot. */
static int from_dlpack(PyObject *obj, PyObject *stream, dlx_arg *arg, dlx_slot *slot) {
  PyObject *cap = dlx_call_dlpack(obj, stream, 1);
  if (!cap) return fail_arg();
  int rc = 0;
  /* Renaming marks the capsule consumed: its destructor then leaves the tensor to us. */
  const char *cap_name = PyCapsule_CheckExact(cap) ? PyCapsule_GetName(cap) : NULL;
  if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
    DLManagedTensorVersioned *m = PyCapsule_GetPointer(cap, "dltensor_versioned");
    PyCapsule_SetName(cap, "used_dltensor_versioned");
    if (check_version(m)) {
      rc = -1;
    } else {
      slot->managed = m;
      arg->value.tensor = &m->dl_tensor;
      arg->readonly = (m->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
    }
  } else if (PyCapsule_IsValid(cap, "dltensor")) {
    DLManagedTensor *m = PyCapsule_GetPointer(cap, "dltensor");
    PyCapsule_SetName(cap, "used_dltensor");
    slot->legacy = m;
    arg->value.tensor = &m->dl_tensor;
  } else if (cap_name && (strcmp(cap_name, "used_dltensor_versioned") == 0 ||
                          strcmp(cap_name, "used_dltensor") == 0)) {
    PyErr_Format(PyExc_BufferError,
                 "__dlpack__() returned a capsule that was already consumed ('%s'): a DLPack "
                 "capsule can be used once; call __dlpack__() again for a fresh one",
                 cap_name);
    rc = -1;
  } else {
    PyErr_Clear(); /* PyCapsule_GetName of a nameless capsule sets nothing; be sure */
    PyErr_Format(PyExc_TypeError,
                 "__dlpack__() returned %.100s%s%s%s, not a 'dltensor_versioned' or 'dltensor' "
                 "capsule",
                 Py_TYPE(cap)->tp_name, cap_name ? " named '" : "", cap_name ? cap_name : "",
                 cap_name ? "'" : "");
    rc = -1;
  }
  Py_DECREF(cap);
  return rc ? rc : check_dims(arg, slot) < 0 ? -1 : 1;
}

/* obj.__dlpack_device__() -> *out: 1, or 0 when the producer has no such method (it
 * predates the protocol's device query), -1 with an exception. */
static int dlpack_device(PyObject *obj, DLDevice *out) {
  if (!names_made()) return -1;
  PyObject *argv[2] = {NULL, obj};
  PyObject *r =
      PyObject_VectorcallMethod(device_name, argv + 1, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
  if (!r) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
    PyErr_Clear();
    return 0;
  }
  long type = -1, id = -1;
  if (PyTuple_Check(r) && PyTuple_GET_SIZE(r) == 2) { /* the type may be an IntEnum */
    type = PyLong_Check(PyTuple_GET_ITEM(r, 0)) ? PyLong_AsLong(PyTuple_GET_ITEM(r, 0)) : -1;
    id = PyLong_Check(PyTuple_GET_ITEM(r, 1)) ? PyLong_AsLong(PyTuple_GET_ITEM(r, 1)) : -1;
    PyErr_Clear(); /* an overflow is refused below like any bad value */
  }
  if (type < 0 || type > INT32_MAX || id < 0 || id > INT32_MAX) {
    PyErr_Format(PyExc_TypeError,
                 "__dlpack_device__() returned %R, not a (device_type, device_id) tuple of "
                 "two non-negative ints",
                 r);
    Py_DECREF(r);
    return -1;
  }
  Py_DECREF(r);
  out->device_type = (DLDeviceType)type;
  out->device_id = (int32_t)id;
  return 1;
}

/* A __dlpack__ producer. On a device with streams its export waits until the call's
 * stream is known (DLX_CONVERT_DEFERRED; call.c exports it with dlx_export_deferred):
 * meanwhile the slot's view holds nothing but its device. Host tensors, and producers
 * that cannot say their device, are exported now, without a stream.
 * `jax`: a JAX array, whose type carries dlx's JAX table. That table exports without a
 * stream (JAX has none to give and must be told the consumer's), so a JAX array waits
 * like any producer, holding no table (it never picks the call's stream); elsewhere it
 * goes through the table. JAX arrays are immutable: the wait marks them read-only. */
static int from_dlpack_producer(PyObject *obj, const DLPackExchangeAPI *jax, dlx_arg *arg,
                                dlx_slot *slot) {
  DLDevice dev;
  int rc = dlpack_device(obj, &dev);
  if (rc < 0) return fail_arg();
  uint64_t unused;
  if (rc == 0 || dlx_stream_dlpack_arg(dev.device_type, 1, &unused) == DLX_DLPACK_NO_STREAM)
    return jax ? from_table(jax, obj, arg, slot) : from_dlpack(obj, NULL, arg, slot);
  memset(&slot->view, 0, sizeof slot->view);
  slot->view.device = dev;
  arg->value.tensor = &slot->view;
  arg->readonly = jax != NULL;
  dlx_relaxed_add(&dlx_stream_pending, 1); /* the call takes it off again (dlx_stream_settle) */
  return DLX_CONVERT_DEFERRED;
}

int dlx_export_deferred(PyObject *obj, PyObject *stream, dlx_arg *arg, dlx_slot *slot) {
  int32_t readonly = arg->readonly; /* set while waiting (JAX): the export cannot clear it */
  int rc = from_dlpack(obj, stream, arg, slot);
  arg->readonly |= readonly;
  return rc;
}

static int from_buffer(PyObject *obj, dlx_arg *arg, dlx_slot *slot) {
  Py_buffer view;
  if (PyObject_GetBuffer(obj, &view, PyBUF_RECORDS_RO)) return fail_arg();
  char err[160];
  DLDataType dtype;
  if (dlx_dtype_from_buffer_format(view.format, view.itemsize, &dtype, err, sizeof err)) {
    PyBuffer_Release(&view);
    PyErr_SetString(PyExc_BufferError, err);
    return fail_arg();
  }
  int32_t ndim = view.shape ? view.ndim : 1;
  buffer_block *b = PyMem_Malloc(sizeof *b + 2 * sizeof(int64_t) * (size_t)(ndim ? ndim : 1));
  if (!b) {
    PyBuffer_Release(&view);
    PyErr_NoMemory();
    return fail_arg();
  }
  b->view = view;
  int64_t *shape = b->dims, *strides = b->dims + ndim;
  if (!view.shape) {
    shape[0] = view.len / view.itemsize;
    strides[0] = 1;
  } else {
    for (int32_t d = 0; d < ndim; ++d) shape[d] = view.shape[d];
    int32_t bad = 0;
    if (!view.strides) {
      dlx_compact_strides(ndim, shape, strides);
    } else if (dlx_strides_from_bytes(ndim, shape, (const int64_t *)view.strides,
                                      view.itemsize, strides, &bad)) {
      PyErr_Format(PyExc_BufferError,
                   "stride %zd of dimension %d is not a multiple of the item size %zd",
                   view.strides[bad], (int)bad, view.itemsize);
      PyBuffer_Release(&b->view);
      PyMem_Free(b);
      return fail_arg();
    }
  }
  slot->buffer = b;
  slot->view = (DLTensor){.data = view.buf,
                          .device = {kDLCPU, 0},
                          .ndim = ndim,
                          .dtype = dtype,
                          .shape = shape,
                          .strides = strides,
                          .byte_offset = 0};
  arg->value.tensor = &slot->view;
  arg->readonly = view.readonly != 0;
  return 1;
}

/* str, or a tuple/list (torch.Size is a tuple) of numbers. Out of line: the scalar and
 * tensor paths of dlx_convert_arg stay small enough to inline into the call. */
__attribute__((noinline)) static int convert_str_or_list(PyObject *obj, int32_t index,
                                                         dlx_arg *arg, dlx_slot *slot) {
  if (PyUnicode_Check(obj)) return dlx_convert_str(obj, index, arg, slot);
  Py_ssize_t bad = 0;
  int rc = dlx_convert_seq(obj, 0, arg, slot, &bad);
  if (rc == -2)
    PyErr_Format(PyExc_TypeError, "element %zd is %.100s, expected an int or a float", bad,
                 Py_TYPE(PySequence_Fast_ITEMS(obj)[bad])->tp_name);
  return rc ? -1 : 1; /* the slot may own a block: release after the call */
}

/* The general path: the call loops (call.c) take exact floats, small ints and numpy
 * arrays of a vouched-for type in line, everything else comes here. */
__attribute__((noinline)) int dlx_convert_arg(PyObject *obj, int32_t index, dlx_arg *arg,
                                              dlx_slot *slot) {
  PyTypeObject *tp = Py_TYPE(obj);
  arg->readonly = 0;
  if (tp == &PyFloat_Type) goto as_float;
  if (tp == &PyLong_Type) goto as_int;
  if (obj == Py_None) {
    arg->kind = DLX_ARG_NONE;
    arg->value.i = 0;
    return 0;
  }
  if (tp == &PyBool_Type) {
    arg->kind = DLX_ARG_BOOL;
    arg->value.i = obj == Py_True;
    return 0;
  }
  arg->kind = DLX_ARG_NONE; /* nothing to release yet */
  const dlx_type_info *info = dlx_type_info_get(tp);
  if (!info) return fail_arg();
  slot_clean(slot);
  slot->api = NULL;
  if (info->source == DLX_SRC_TABLE) {
    const DLPackExchangeAPI *api = info->api; /* `info` may be refilled by Python code */
    arg->kind = DLX_ARG_TENSOR; /* also when it fails: the caller then releases the slot */
    if (info->scratch_view) {
      /* numpy's by name: a direct call the link-time optimiser can inline */
      int rc = info->scratch_view == dlx_numpy_scratch_view
                   ? dlx_numpy_scratch_view(obj, &slot->view, slot->scratch, DLX_SCRATCH_DIMS,
                                            &arg->readonly)
                   : info->scratch_view(obj, &slot->view, slot->scratch, DLX_SCRATCH_DIMS,
                                        &arg->readonly);
      if (rc > 0) {
        slot->api = api;
        arg->value.tensor = &slot->view;
        return info->scratch_view == dlx_numpy_scratch_view ? DLX_CONVERT_NUMPY : 0;
      }
      if (rc < 0) return fail_arg();
    }
    if (__builtin_expect(api == dlx_jax_device_table, 0)) /* JAX: on a device, a producer */
      return from_dlpack_producer(obj, api, arg, slot);
    int flags = info->call_flags, rc = from_table(api, obj, arg, slot);
    return rc < 0 ? rc : rc | flags;
  }
  /* Subclasses of int and float (IntEnum, numpy.float64) are scalars too. */
  if (PyLong_Check(obj)) goto as_int;
  if (PyFloat_Check(obj)) goto as_float;
  if (info->source == DLX_SRC_BUFFER && tp->tp_as_number) {
    /* Numbers that also export a buffer (numpy.int64, numpy.float32) are scalars. */
    if (tp->tp_as_number->nb_index) {
      arg->kind = DLX_ARG_INT;
      int overflow = 0;
      PyObject *i = PyNumber_Index(obj);
      arg->value.i = i ? PyLong_AsLongLongAndOverflow(i, &overflow) : -1;
      Py_XDECREF(i);
      if (overflow) {
        PyErr_SetString(PyExc_OverflowError, "does not fit in 64 bits");
        return -1;
      }
      return PyErr_Occurred() ? fail_arg() : 0;
    }
    if (tp->tp_as_number->nb_float) {
      int cplx = dlx_is_complex(obj);
      if (cplx) {
        if (cplx > 0)
          PyErr_Format(PyExc_TypeError, "%.100s is a complex number: a kernel takes no complex "
                                        "scalar (pass the real part, or a tensor)",
                       tp->tp_name);
        return -1;
      }
      arg->kind = DLX_ARG_FLOAT;
      arg->value.f = PyFloat_AsDouble(obj);
      return PyErr_Occurred() ? fail_arg() : 0;
    }
  }
  if (info->source == DLX_SRC_NOT_TENSOR &&
      (PyUnicode_Check(obj) || PyTuple_Check(obj) || PyList_Check(obj)))
    return convert_str_or_list(obj, index, arg, slot);
  arg->kind = DLX_ARG_TENSOR; /* also when it fails: the caller then releases the slot */
  if (info->source == DLX_SRC_DLPACK) return from_dlpack_producer(obj, NULL, arg, slot);
  if (info->source == DLX_SRC_BUFFER) return from_buffer(obj, arg, slot);
  arg->kind = DLX_ARG_NONE;
  PyErr_SetString(PyExc_TypeError,
                  "unsupported type (expected a tensor, int, bool, float, str, a tuple or list "
                  "of numbers, or None)");
  return -1;
as_float:
  arg->kind = DLX_ARG_FLOAT;
  arg->value.f = PyFloat_AS_DOUBLE(obj);
  return 0;
as_int:
  arg->kind = DLX_ARG_INT;
  /* Values of one digit (|v| < 2**30) are read in place, without the general call. */
  if (dlx_long_compact(obj, &arg->value.i)) return 0;
  int overflow = 0;
  arg->value.i = PyLong_AsLongLongAndOverflow(obj, &overflow);
  if (overflow) {
    PyErr_Format(PyExc_OverflowError, "%R does not fit in 64 bits", obj);
    return -1;
  }
  if (arg->value.i == -1 && PyErr_Occurred()) return fail_arg();
  return 0;
}

void dlx_release_slot(dlx_slot *slot) {
  if (slot->managed) {
    DLManagedTensorVersioned *m = slot->managed;
    slot->managed = NULL;
    if (m->deleter) m->deleter(m);
  }
  if (slot->legacy) {
    DLManagedTensor *m = slot->legacy;
    slot->legacy = NULL;
    if (m->deleter) m->deleter(m);
  }
  if (slot->heap_strides) {
    PyMem_Free(slot->heap_strides);
    slot->heap_strides = NULL;
  }
  if (slot->buffer) {
    buffer_block *b = slot->buffer;
    slot->buffer = NULL;
    PyBuffer_Release(&b->view);
    PyMem_Free(b);
  }
}

int dlx_convert_str(PyObject *obj, int32_t index, dlx_arg *arg, dlx_slot *slot) {
  (void)index; /* the caller names the argument */
  Py_ssize_t len = 0;
  const char *s = PyUnicode_AsUTF8AndSize(obj, &len); /* cached in the str: no copy after */
  if (!s) return fail_arg();
  slot->seq.data = s;
  slot->seq.len = len;
  arg->kind = DLX_ARG_STR;
  arg->value.seq = &slot->seq;
  return 0;
}

int dlx_is_complex(PyObject *obj) {
  if (PyComplex_Check(obj)) return 1;
  if (PyFloat_Check(obj) || PyLong_Check(obj)) return 0;
  /* numbers.Complex, numbers.Real: kept for the process once set (both under names_lock:
   * without a GIL another thread must never see one set and not the other) */
  static PyObject *complex_abc, *real_abc;
  DLX_LOCK(&names_lock);
  PyObject *cabc = complex_abc, *rabc = real_abc;
  DLX_UNLOCK(&names_lock);
  if (!cabc) { /* looked up unlocked (an import); the first pair kept */
    PyObject *numbers = PyImport_ImportModule("numbers");
    PyObject *c = numbers ? PyObject_GetAttrString(numbers, "Complex") : NULL;
    PyObject *r = c ? PyObject_GetAttrString(numbers, "Real") : NULL;
    Py_XDECREF(numbers);
    if (!r) {
      Py_XDECREF(c);
      return -1;
    }
    DLX_LOCK(&names_lock);
    int first = !complex_abc;
    if (first) {
      complex_abc = c;
      real_abc = r;
    }
    cabc = complex_abc;
    rabc = real_abc;
    DLX_UNLOCK(&names_lock);
    if (!first) {
      Py_DECREF(c);
      Py_DECREF(r);
    }
  }
  int c = PyObject_IsInstance(obj, cabc);
  if (c <= 0) return c;
  int r = PyObject_IsInstance(obj, rabc);
  return r < 0 ? -1 : !r;
}

static int int_like(PyObject *o) {
  if (PyLong_Check(o)) return 1;
  PyNumberMethods *nb = Py_TYPE(o)->tp_as_number;
  return nb && nb->nb_index && !PyFloat_Check(o); /* numpy integers */
}

static int float_like(PyObject *o) {
  if (PyFloat_Check(o)) return 1;
  PyNumberMethods *nb = Py_TYPE(o)->tp_as_number;
  /* numpy float32; not numpy's complex (its __float__ drops the imaginary part) */
  return nb && nb->nb_float && !PyUnicode_Check(o) && dlx_is_complex(o) == 0;
}

int dlx_convert_seq(PyObject *obj, int want, dlx_arg *arg, dlx_slot *slot, Py_ssize_t *bad) {
  Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
  PyObject **items = PySequence_Fast_ITEMS(obj);
  if (n > INT32_MAX) {
    PyErr_SetString(PyExc_OverflowError, "sequence too long");
    return -1;
  }
  int kind = want;
  if (!kind) { /* all ints: ints; any float among numbers: floats */
    kind = DLX_ARG_INTS;
    for (Py_ssize_t i = 0; i < n; ++i) {
      if (int_like(items[i])) continue;
      if (!float_like(items[i])) return *bad = i, -2;
      kind = DLX_ARG_FLOATS;
    }
  }
  slot->heap = NULL;
  slot->as_floats = NULL;
  void *data = slot->scratch;
  if (n > DLX_SCRATCH_DIMS) {
    data = slot->heap = PyMem_RawMalloc(sizeof(int64_t) * (size_t)n);
    if (!data) {
      PyErr_NoMemory();
      return -1;
    }
  }
  int64_t *iv = data;
  double *fv = data;
  for (Py_ssize_t i = 0; i < n; ++i) {
    /* __index__/__float__ may run Python code that shrinks a list: re-read each time */
    if (i >= PySequence_Fast_GET_SIZE(obj)) {
      PyErr_SetString(PyExc_RuntimeError, "list changed size during conversion");
      goto fail;
    }
    PyObject *o = PySequence_Fast_ITEMS(obj)[i];
    Py_INCREF(o);
    int ok = 1;
    if (PyLong_CheckExact(o) || (int_like(o) && (kind == DLX_ARG_INTS || !float_like(o)))) {
      if (kind == DLX_ARG_INTS) {
        int overflow = 0;
        PyObject *idx = PyLong_Check(o) ? Py_NewRef(o) : PyNumber_Index(o);
        iv[i] = idx ? PyLong_AsLongLongAndOverflow(idx, &overflow) : -1;
        Py_XDECREF(idx);
        if (overflow) PyErr_Format(PyExc_OverflowError, "element %zd does not fit in 64 bits", i);
      } else {
        PyObject *idx = PyLong_Check(o) ? Py_NewRef(o) : PyNumber_Index(o);
        fv[i] = idx ? PyLong_AsDouble(idx) : -1.0;
        Py_XDECREF(idx);
      }
    } else if (kind == DLX_ARG_FLOATS && float_like(o)) {
      fv[i] = PyFloat_CheckExact(o) ? PyFloat_AS_DOUBLE(o) : PyFloat_AsDouble(o);
    } else {
      ok = 0;
    }
    Py_DECREF(o);
    if (!ok) {
      *bad = i;
      dlx_release_seq(slot);
      return -2;
    }
    if (PyErr_Occurred()) goto fail;
  }
  slot->seq.data = data;
  slot->seq.len = n;
  arg->kind = kind;
  arg->value.seq = &slot->seq;
  return 0;
fail:
  dlx_release_seq(slot);
  return -1;
}
