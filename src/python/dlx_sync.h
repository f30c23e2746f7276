/*
 * dlx_sync.h - what the CPython layer's shared state needs to be safe without the GIL
 * (free-threaded CPython, built --disable-gil: Py_GIL_DISABLED), and nothing under a GIL.
 *
 * Under a GIL build every macro here is the plain operation (the GIL serializes): nothing
 * changes for 3.11, 3.12 or 3.13 beyond what each site says. Under a free-threaded build:
 *   DLX_ATOMIC(T)       a C11 _Atomic object
 *   dlx_relaxed_*       counters and flags whose readers want a value, not an order
 *   dlx_release_store / dlx_acquire_load
 *                       a flag that publishes what was written before it (made once under
 *                       a lock, read without it: the lock orders nothing for such readers)
 *   DLX_LOCK/UNLOCK     one PyMutex (parks the thread state while waiting: no deadlock
 *                       with a stop-the-world collection); never held across Python code
 *   Py_BEGIN_CRITICAL_SECTION  3.13's per-object lock; a plain block before 3.13
 *   PyDict_GetItemRef   3.13's strong-reference lookup; a compat below before 3.13
 * Which state uses which is docs/design.md's "Threads" table.
 */
#ifndef DLX_SYNC_H_
#define DLX_SYNC_H_

#include <Python.h>

#ifdef Py_GIL_DISABLED
#include <stdatomic.h>
#define DLX_FREE_THREADED 1
#define DLX_ATOMIC(T) _Atomic(T)
#define dlx_relaxed_load(p) atomic_load_explicit((p), memory_order_relaxed)
#define dlx_relaxed_store(p, v) atomic_store_explicit((p), (v), memory_order_relaxed)
#define dlx_relaxed_add(p, v) ((void)atomic_fetch_add_explicit((p), (v), memory_order_relaxed))
#define dlx_relaxed_sub(p, v) ((void)atomic_fetch_sub_explicit((p), (v), memory_order_relaxed))
#define dlx_acquire_load(p) atomic_load_explicit((p), memory_order_acquire)
#define dlx_release_store(p, v) atomic_store_explicit((p), (v), memory_order_release)
#define DLX_LOCK(m) PyMutex_Lock(m)
#define DLX_UNLOCK(m) PyMutex_Unlock(m)
typedef PyMutex dlx_mutex;
#else
#define DLX_FREE_THREADED 0
#define DLX_ATOMIC(T) T
#define dlx_relaxed_load(p) (*(p))
#define dlx_relaxed_store(p, v) (*(p) = (v))
#define dlx_relaxed_add(p, v) ((void)(*(p) += (v)))
#define dlx_relaxed_sub(p, v) ((void)(*(p) -= (v)))
#define dlx_acquire_load(p) (*(p))
#define dlx_release_store(p, v) (*(p) = (v))
#define DLX_LOCK(m) ((void)(m))
#define DLX_UNLOCK(m) ((void)(m))
typedef struct { char unused; } dlx_mutex;
#endif

#if PY_VERSION_HEX < 0x030D0000
#define Py_BEGIN_CRITICAL_SECTION(op) {
#define Py_END_CRITICAL_SECTION() }
/* 3.13's PyDict_GetItemRef: 1 and a new reference, 0 absent (NULL), -1 with an error. */
static inline int PyDict_GetItemRef(PyObject *d, PyObject *key, PyObject **out) {
  *out = Py_XNewRef(PyDict_GetItemWithError(d, key));
  return *out ? 1 : PyErr_Occurred() ? -1 : 0;
}
#endif

#endif /* DLX_SYNC_H_ */
