/*
 * numpy_table.c - a DLPack exchange table for numpy.ndarray, written by dlx.
 *
 * numpy cannot carry `__dlpack_c_exchange_api__` on its (static) type, so dlx
 * registers this table as a provider; `dlx.exchange_api(numpy.ndarray)` hands it
 * to any other consumer as a capsule.
 *
 * The view export (dltensor_from_py_object_no_sync) is left NULL on purpose:
 * numpy stores byte strides and DLPack wants element strides, which need storage
 * the view contract does not provide. The managed export is cheap instead: its
 * blocks come from a free list, so a warm call allocates nothing.
 */
#include "dlx_py.h"

#include <numpy/arrayobject.h>

#include "dlx_numpy.h"

#include "dlx_core.h"

/* numpy 2 moved the item size out of the public descriptor struct and gave an accessor
 * for it (an inline function, npy_2_compat.h); numpy 1.x headers have neither. */
#if NPY_ABI_VERSION < 0x02000000
#define PyDataType_ELSIZE(descr) ((descr)->elsize)
#endif

#define FREE_LIST_MAX 256

/* One managed export: the DLPack struct first, so the deleter can cast back. */
typedef struct np_export {
  DLManagedTensorVersioned m;
  PyObject *array;        /* keeps the data alive */
  struct np_export *next; /* free-list link */
  int64_t dims[2 * NPY_MAXDIMS]; /* shape then strides */
} np_export;

/* With the GIL held; without a GIL, under free_lock (a few loads and stores: a PyMutex
 * uncontended is one compare-exchange each way). */
static np_export *free_list;
static int free_count;
static dlx_mutex free_lock;
static DLX_ATOMIC(int) ready; /* numpy's C API imported (ready_lock: imported once) */
static dlx_mutex ready_lock;

static np_export *export_get(void) {
  DLX_LOCK(&free_lock);
  np_export *e = free_list;
  if (e) {
    free_list = e->next;
    --free_count;
  }
  DLX_UNLOCK(&free_lock);
  return e ? e : PyMem_RawMalloc(sizeof *e);
}

static void export_put(np_export *e) {
  DLX_LOCK(&free_lock);
  int keep = free_count < FREE_LIST_MAX;
  if (keep) {
    e->next = free_list;
    free_list = e;
    ++free_count;
  }
  DLX_UNLOCK(&free_lock);
  if (!keep) PyMem_RawFree(e);
}

static void np_deleter(DLManagedTensorVersioned *m) {
  np_export *e = (np_export *)m;
  /* A consumer may release from any thread; the free list and the refcount need the GIL. */
  int need_gil = !PyGILState_Check();
  PyGILState_STATE g = need_gil ? PyGILState_Ensure() : PyGILState_LOCKED;
  Py_CLEAR(e->array);
  export_put(e);
  if (need_gil) PyGILState_Release(g);
}

static int descr_to_dl_uncached(PyArray_Descr *d, DLDataType *out) {
  if (!PyArray_ISNBO(d->byteorder)) {
    PyErr_Format(PyExc_BufferError,
                 "numpy dtype '%c%c%d' has non-native byte order; DLPack needs native order",
                 d->byteorder, d->kind, (int)PyDataType_ELSIZE(d));
    return -1;
  }
  uint8_t code;
  switch (d->type_num) {
    case NPY_BOOL: code = kDLBool; break;
    case NPY_BYTE: case NPY_SHORT: case NPY_INT: case NPY_LONG: case NPY_LONGLONG:
      code = kDLInt; break;
    case NPY_UBYTE: case NPY_USHORT: case NPY_UINT: case NPY_ULONG: case NPY_ULONGLONG:
      code = kDLUInt; break;
    case NPY_HALF: case NPY_FLOAT: case NPY_DOUBLE: code = kDLFloat; break;
    case NPY_CFLOAT: case NPY_CDOUBLE: code = kDLComplex; break;
    default: {
      PyObject *name = PyObject_Str((PyObject *)d);
      if (name)
        PyErr_Format(PyExc_BufferError, "numpy dtype '%U' cannot be expressed in DLPack", name);
      Py_XDECREF(name);
      return -1;
    }
  }
  *out = (DLDataType){code, (uint8_t)(PyDataType_ELSIZE(d) * 8), 1};
  return 0;
}

/* Arrays in one call mostly share a dtype, and builtin descriptors are shared
 * objects: remember the last one (a reference keeps the pointer meaningful). Byte
 * strides of its arrays are element strides shifted left by `shift` when their low bits
 * (`mask`) are clear; ~0 sends every stride to the general conversion (an item size that
 * is not a power of two). dlx_numpy.h reads it in the call loop. */
DLX_NUMPY_LAST_TLS dlx_numpy_last_t dlx_numpy_last = {.descr = NULL, .mask = ~(int64_t)0,
                                                      .shift = 0};

static int descr_to_dl(PyArray_Descr *d, DLDataType *out) {
  if (d == dlx_numpy_last.descr) {
    *out = dlx_numpy_last.dtype;
    return 0;
  }
  if (descr_to_dl_uncached(d, out)) return -1;
  Py_INCREF(d);
  Py_XSETREF(dlx_numpy_last.descr, d);
  dlx_numpy_last.dtype = *out;
  int64_t size = out->bits / 8; /* the item size: lanes are 1 for every dtype above */
  int pow2 = size > 0 && (size & (size - 1)) == 0;
  dlx_numpy_last.shift = pow2 ? __builtin_ctzll((unsigned long long)size) : 0;
  dlx_numpy_last.mask = pow2 ? size - 1 : ~(int64_t)0;
  return 0;
}

static int dl_to_type_num(DLDataType t) {
  if (t.lanes != 1) return -1;
  switch (t.code) {
    case kDLBool: return t.bits == 8 ? NPY_BOOL : -1;
    case kDLInt:
      return t.bits == 8 ? NPY_INT8 : t.bits == 16 ? NPY_INT16 : t.bits == 32 ? NPY_INT32
             : t.bits == 64 ? NPY_INT64 : -1;
    case kDLUInt:
      return t.bits == 8 ? NPY_UINT8 : t.bits == 16 ? NPY_UINT16 : t.bits == 32 ? NPY_UINT32
             : t.bits == 64 ? NPY_UINT64 : -1;
    case kDLFloat:
      return t.bits == 16 ? NPY_FLOAT16 : t.bits == 32 ? NPY_FLOAT32
             : t.bits == 64 ? NPY_FLOAT64 : -1;
    case kDLComplex: return t.bits == 64 ? NPY_COMPLEX64 : t.bits == 128 ? NPY_COMPLEX128 : -1;
    default: return -1;
  }
}

static int bad_stride(PyArrayObject *a, int32_t bad) {
  PyErr_Format(PyExc_BufferError,
               "numpy stride %zd of dimension %d is not a multiple of the item size %d",
               (Py_ssize_t)PyArray_STRIDE(a, bad), (int)bad, (int)PyArray_ITEMSIZE(a));
  return -1;
}

/* Describe ndarray `a` in `t`, with shape and strides stored in `dims` (2 * ndim). */
static int describe(PyArrayObject *a, DLTensor *t, int64_t *dims) {
  if (PyArray_NDIM(a) > NPY_MAXDIMS) { /* a newer numpy at run time than at build time */
    PyErr_Format(PyExc_BufferError, "array has %d dimensions, dlx was built for at most %d",
                 PyArray_NDIM(a), NPY_MAXDIMS);
    return -1;
  }
  DLDataType dtype;
  if (descr_to_dl(PyArray_DESCR(a), &dtype)) return -1;
  int32_t nd = PyArray_NDIM(a), bad = 0;
  int64_t *shape = dims, *strides = dims + nd;
  for (int32_t d = 0; d < nd; ++d) shape[d] = PyArray_DIM(a, d);
  if (dlx_strides_from_bytes(nd, shape, (const int64_t *)PyArray_STRIDES(a),
                             PyArray_ITEMSIZE(a), strides, &bad))
    return bad_stride(a, bad);
  *t = (DLTensor){.data = PyArray_DATA(a),
                  .device = {kDLCPU, 0},
                  .ndim = nd,
                  .dtype = dtype,
                  .shape = shape,
                  .strides = strides,
                  .byte_offset = 0};
  return 0;
}

static int not_ndarray(PyObject *obj) {
  PyErr_Format(PyExc_TypeError, "expected a numpy.ndarray, got %.100s", Py_TYPE(obj)->tp_name);
  return -1;
}

static int np_from_py(void *py_object, DLManagedTensorVersioned **out) {
  PyObject *obj = py_object;
  if (!PyArray_Check(obj)) return not_ndarray(obj);
  PyArrayObject *a = (PyArrayObject *)obj;
  np_export *e = export_get();
  if (!e) {
    PyErr_NoMemory();
    return -1;
  }
  if (describe(a, &e->m.dl_tensor, e->dims)) {
    export_put(e);
    return -1;
  }
  e->array = Py_NewRef(obj);
  e->m.version = (DLPackVersion){DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
  e->m.manager_ctx = e;
  e->m.deleter = np_deleter;
  e->m.flags = PyArray_ISWRITEABLE(a) ? 0 : DLPACK_FLAG_BITMASK_READ_ONLY;
  *out = &e->m;
  return 0;
}

_Static_assert(sizeof(npy_intp) == sizeof(int64_t), "numpy's dimensions serve as DLPack's shape");

/* dlx's own consumer keeps the array alive for the call and lends per-argument
 * scratch, so it needs neither a reference nor a managed block: only the strides need
 * converting, into the scratch (dlx_numpy_view_fast, in line in the call loop too). */

/* Everything the fast path leaves: a new dtype, odd strides, extent-1 junk, another
 * item size. Out of line, so that the fast path stays small. */
static __attribute__((noinline, cold)) int scratch_view_full(PyArrayObject *a, DLTensor *out,
                                                             int64_t *scratch,
                                                             int32_t *readonly) {
  DLDataType dtype;
  if (descr_to_dl(PyArray_DESCR(a), &dtype)) return -1;
  int32_t bad = 0;
  const int32_t nd = PyArray_NDIM(a);
  if (dlx_strides_from_bytes(nd, (const int64_t *)PyArray_DIMS(a),
                             (const int64_t *)PyArray_STRIDES(a), PyArray_ITEMSIZE(a), scratch,
                             &bad))
    return bad_stride(a, bad);
  out->data = PyArray_DATA(a);
  out->device = (DLDevice){kDLCPU, 0};
  out->ndim = nd;
  out->dtype = dtype;
  out->shape = nd ? (int64_t *)PyArray_DIMS(a) : scratch; /* never NULL, as before */
  out->strides = scratch;
  out->byte_offset = 0;
  *readonly = !PyArray_ISWRITEABLE(a);
  return 1;
}

int dlx_numpy_scratch_view(PyObject *obj, DLTensor *out, int64_t *scratch, int32_t scratch_len,
                           int32_t *readonly) {
  if (!PyArray_Check(obj)) return not_ndarray(obj);
  if (PyArray_NDIM((PyArrayObject *)obj) > scratch_len) return 0;
  if (dlx_numpy_view_fast(obj, out, scratch, readonly)) return 1;
  return scratch_view_full((PyArrayObject *)obj, out, scratch, readonly);
}

static void owner_destructor(PyObject *capsule) {
  PyObject *et, *ev, *tb;
  PyErr_Fetch(&et, &ev, &tb); /* also runs on error paths: keep their exception */
  DLManagedTensorVersioned *m = PyCapsule_GetPointer(capsule, "dlx.numpy_owner");
  if (m && m->deleter) m->deleter(m);
  PyErr_Restore(et, ev, tb);
}

static int np_to_py(DLManagedTensorVersioned *m, void **out) {
  if (!m) {
    PyErr_SetString(PyExc_BufferError, "numpy import of a NULL managed tensor");
    return -1;
  }
  if (m->deleter == np_deleter) { /* our own export: give back the very array */
    *out = Py_NewRef(((np_export *)m)->array);
    np_deleter(m);
    return 0;
  }
  /* Another major may lay out everything after the deleter differently: read nothing
   * else (numpy 2 refuses the same way). */
  if (m->version.major != 1) {
    PyErr_Format(PyExc_BufferError,
                 "numpy cannot import a DLPack tensor of major version %u (it speaks 1.x)",
                 (unsigned)m->version.major);
    goto fail;
  }
  const DLTensor *t = &m->dl_tensor;
  int type_num = dl_to_type_num(t->dtype);
  npy_intp dims[NPY_MAXDIMS], bstrides[NPY_MAXDIMS];
  if (t->device.device_type != kDLCPU && t->device.device_type != kDLCUDAHost &&
      t->device.device_type != kDLROCMHost) {
    PyErr_Format(PyExc_BufferError, "numpy can only import host memory, not device type %d",
                 (int)t->device.device_type);
    goto fail;
  }
  if (type_num < 0) {
    PyErr_Format(PyExc_BufferError, "DLPack dtype (code %u, bits %u, lanes %u) has no numpy dtype",
                 t->dtype.code, t->dtype.bits, t->dtype.lanes);
    goto fail;
  }
  if (t->ndim < 0 || t->ndim > NPY_MAXDIMS) {
    PyErr_Format(PyExc_BufferError, "numpy supports at most %d dimensions, got %d", NPY_MAXDIMS,
                 (int)t->ndim);
    goto fail;
  }
  if (t->ndim > 0 && !t->shape) {
    PyErr_Format(PyExc_BufferError, "DLPack tensor has %d dimensions but a NULL shape",
                 (int)t->ndim);
    goto fail;
  }
  int64_t itemsize = dlx_dtype_itemsize(t->dtype), compact[NPY_MAXDIMS];
  if (!t->strides && dlx_compact_strides(t->ndim, t->shape, compact)) {
    PyErr_SetString(PyExc_BufferError, "DLPack tensor is too large: a stride does not fit "
                                       "in 64 bits");
    goto fail;
  }
  for (int32_t d = 0; d < t->ndim; ++d) {
    int64_t b;
    dims[d] = t->shape[d];
    if (__builtin_mul_overflow(t->strides ? t->strides[d] : compact[d], itemsize, &b)) {
      PyErr_Format(PyExc_BufferError, "DLPack stride of dimension %d overflows in bytes", (int)d);
      goto fail;
    }
    bstrides[d] = b;
  }
  PyObject *owner = PyCapsule_New(m, "dlx.numpy_owner", owner_destructor);
  if (!owner) goto fail;
  int flags = (m->flags & DLPACK_FLAG_BITMASK_READ_ONLY) ? 0 : NPY_ARRAY_WRITEABLE;
  PyObject *arr = PyArray_NewFromDescr(&PyArray_Type, PyArray_DescrFromType(type_num), t->ndim,
                                       dims, bstrides, (char *)t->data + t->byte_offset, flags,
                                       NULL);
  if (!arr) {
    Py_DECREF(owner); /* runs the deleter */
    return -1;
  }
  if (PyArray_SetBaseObject((PyArrayObject *)arr, owner)) { /* steals owner */
    Py_DECREF(arr);
    return -1;
  }
  *out = arr;
  return 0;
fail:
  if (m->deleter) { /* the import owns `m`, also when it fails */
    /* A deleter may run Python code that clears or replaces the pending error. */
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    m->deleter(m);
    PyErr_Restore(et, ev, tb);
  }
  return -1;
}

/* Hand the pending Python exception to SetError, as the allocator contract asks. */
static void pending_to_set_error(void *ctx, void (*SetError)(void *, const char *, const char *)) {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  PyObject *msg = value ? PyObject_Str(value) : NULL;
  const char *kind = type ? ((PyTypeObject *)type)->tp_name : "RuntimeError";
  const char *text = msg ? PyUnicode_AsUTF8(msg) : NULL;
  PyErr_Clear();
  SetError(ctx, kind, text ? text : "numpy allocation failed");
  Py_XDECREF(msg);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
}

static int np_alloc(DLTensor *proto, DLManagedTensorVersioned **out, void *ctx,
                    void (*SetError)(void *, const char *, const char *)) {
  char msg[160];
  if (proto->device.device_type != kDLCPU) {
    snprintf(msg, sizeof msg, "numpy allocates host memory only, not device type %d",
             (int)proto->device.device_type);
    SetError(ctx, "ValueError", msg);
    return -1;
  }
  int type_num = dl_to_type_num(proto->dtype);
  if (type_num < 0) {
    snprintf(msg, sizeof msg, "numpy has no dtype for DLPack (code %u, bits %u, lanes %u)",
             proto->dtype.code, proto->dtype.bits, proto->dtype.lanes);
    SetError(ctx, "TypeError", msg);
    return -1;
  }
  if (proto->ndim < 0 || proto->ndim > NPY_MAXDIMS) {
    snprintf(msg, sizeof msg, "numpy supports at most %d dimensions", NPY_MAXDIMS);
    SetError(ctx, "ValueError", msg);
    return -1;
  }
  if (proto->ndim > 0 && !proto->shape) {
    snprintf(msg, sizeof msg, "the prototype has %d dimensions but a NULL shape",
             (int)proto->ndim);
    SetError(ctx, "ValueError", msg);
    return -1;
  }
  npy_intp dims[NPY_MAXDIMS];
  for (int32_t d = 0; d < proto->ndim; ++d) dims[d] = proto->shape[d];
  PyObject *arr = PyArray_Empty(proto->ndim, dims, PyArray_DescrFromType(type_num), 0);
  int rc = arr ? np_from_py(arr, out) : -1;
  Py_XDECREF(arr);
  if (rc) pending_to_set_error(ctx, SetError);
  return rc;
}

int dlx_numpy_dtype_inexpressible(PyObject *obj) {
  if (!ready || !PyArray_Check(obj)) return 0;
  PyObject *et, *ev, *tb;
  PyErr_Fetch(&et, &ev, &tb);
  DLDataType t;
  int bad = descr_to_dl_uncached(PyArray_DESCR((PyArrayObject *)obj), &t) != 0;
  PyErr_Clear();
  PyErr_Restore(et, ev, tb);
  return bad;
}

static const DLPackExchangeAPI numpy_api = {
    .header = {.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION}, .prev_api = NULL},
    .managed_tensor_allocator = np_alloc,
    .managed_tensor_from_py_object_no_sync = np_from_py,
    .managed_tensor_to_py_object_no_sync = np_to_py,
    .dltensor_from_py_object_no_sync = NULL,
    .current_work_stream = dlx_no_stream, /* host-only */
};

const DLPackExchangeAPI *const dlx_numpy_api = &numpy_api;

const DLPackExchangeAPI *dlx_numpy_table(void) {
  /* The flag publishes numpy's API table to readers that skip the lock: acquire/release
   * (a relaxed flag let a reader see it set before the table's pointer). */
  if (!dlx_acquire_load(&ready)) {
    DLX_LOCK(&ready_lock);
    int ok = dlx_relaxed_load(&ready) || _import_array() >= 0;
    if (ok) dlx_release_store(&ready, 1);
    DLX_UNLOCK(&ready_lock);
    if (!ok) return NULL;
  }
  return &numpy_api;
}

