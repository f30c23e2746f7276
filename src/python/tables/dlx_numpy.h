/*
 * dlx_numpy.h - the inline part of numpy's fast view (numpy_table.c), for the call loop
 * (call.c): after the type cache has vouched for an ndarray type once in a call, later
 * arrays of that type whose dtype is the last one described are viewed here, in line,
 * with nothing but a dtype compare, a mask test and a shift per dimension.
 */
#ifndef DLX_NUMPY_H_
#define DLX_NUMPY_H_

#include "dlx_py.h"

#include <numpy/ndarraytypes.h>

/* The last dtype described and what its arrays' byte strides need (numpy_table.c keeps
 * it). With a GIL, one for the process; without, one per thread (its four fields change
 * together, and a thread's calls mostly see its own dtypes): initial-exec TLS is one
 * %fs-relative load, as cheap as the global. A thread that ends leaves its one reference
 * to a dtype (numpy's builtin dtypes live for the process anyway). */
#if DLX_FREE_THREADED
#define DLX_NUMPY_LAST_TLS _Thread_local __attribute__((tls_model("initial-exec")))
#else
#define DLX_NUMPY_LAST_TLS
#endif
typedef struct dlx_numpy_last {
  PyArray_Descr *descr; /* a reference: the pointer stays meaningful */
  int64_t mask;         /* byte strides with these bits set are not whole elements of it;
                           ~0 sends every stride to the general conversion */
  int shift;            /* element stride = byte stride >> shift */
  DLDataType dtype;
} dlx_numpy_last_t;
extern DLX_NUMPY_LAST_TLS dlx_numpy_last_t dlx_numpy_last;

/* The view of an ndarray (the caller knows `obj` is one) into `out`, its strides in
 * `scratch`: 1, or 0 when it needs the general path (another dtype, strides that are not
 * whole elements, more dimensions than the scratch holds). The shape is numpy's own:
 * npy_intp is int64_t, and nothing can reshape the array while the call holds it. */
static inline int dlx_numpy_view_fast(PyObject *obj, DLTensor *out, int64_t *scratch,
                                      int32_t *readonly) {
  PyArrayObject *a = (PyArrayObject *)obj;
  const int32_t nd = PyArray_NDIM(a);
  if (PyArray_DESCR(a) != dlx_numpy_last.descr) return 0;
  int64_t *shape = (int64_t *)PyArray_DIMS(a);
  if (__builtin_expect(nd == 1, 1)) { /* the common case without the loop's tests */
    const int64_t stride = ((const int64_t *)PyArray_STRIDES(a))[0];
    if (stride & dlx_numpy_last.mask) return 0;
    scratch[0] = stride >> dlx_numpy_last.shift;
  } else {
    /* Read here, not before the test: the 1-d path then keeps nothing live for this one
     * (in the call loop, what it keeps live is spilled on every array). */
    const int64_t mask = dlx_numpy_last.mask; /* in locals: `scratch` might alias them */
    const int shift = dlx_numpy_last.shift;
    const int64_t *bytes = (const int64_t *)PyArray_STRIDES(a);
    if (nd > DLX_SCRATCH_DIMS) return 0;
    for (int32_t d = 0; d < nd; ++d) {
      if (bytes[d] & mask) return 0;
      scratch[d] = bytes[d] >> shift;
    }
    if (!nd) shape = scratch; /* never NULL */
  }
  static const DLDevice cpu = {kDLCPU, 0};
  out->data = PyArray_DATA(a);
  memcpy(&out->device, &cpu, sizeof cpu); /* one 8-byte store */
  out->ndim = nd;
  out->dtype = dlx_numpy_last.dtype;
  out->shape = shape;
  out->strides = scratch;
  out->byte_offset = 0;
  *readonly = !PyArray_ISWRITEABLE(a);
  return 1;
}

#endif /* DLX_NUMPY_H_ */
