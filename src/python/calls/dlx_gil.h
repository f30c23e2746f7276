/*
 * dlx_gil.h - releasing the GIL around a `nogil` kernel, and taking it back without a
 * sleep when another `nogil` caller is about to hand it over.
 *
 * Why: two threads calling a short `nogil` kernel (a few µs) under a GIL build take turns
 * with the GIL. A thread whose kernel finished while the other holds the GIL waits in
 * CPython's take_gil on a condition variable; its core goes idle, and waking it again
 * (futex, IPI, the core leaving its idle state) costs more than the kernel. Meanwhile the
 * other thread finishes its own kernel and takes the GIL back first, so the pair runs
 * well short of two (bench/bench_threads.py: 1.2-1.7x on an idle 2-core machine, 1.8-1.9x
 * with the hand-off below).
 *
 * What: a hint, the thread state of the dlx caller that is taking the GIL back after its
 * kernel, or took it and has not released it since (it is between two of its calls, in
 * Python). A thread whose kernel finished while the hint names another thread spins, for a
 * bounded time, until that holder releases the GIL at its next `nogil` call; then CPython's
 * take_gil finds the GIL free and does not sleep. The hint is only a hint: if its holder went
 * on to other work, the spin ends at its bound, the ordinary wait follows, and the taker
 * rewrites it. Cost per `nogil` call with no contention: a load and two compare-exchanges
 * on a line this thread already owns, and one store.
 *
 * Free-threaded CPython has no GIL to hand over: there the two calls are the plain ones.
 */
#ifndef DLX_GIL_H_
#define DLX_GIL_H_

#include <Python.h>

/* Counters for `dlx._core._stats`: spins that ended with the holder's release, spins that
 * reached the bound, threads spinning now (all 0 without a GIL). */
void dlx_gil_counters(unsigned long long *handoffs, unsigned long long *timeouts,
                      int *spinning);
/* Sets the spin's bound (`dlx._core._gil_spin_ns`, for tests); returns the previous one. */
long long dlx_gil_set_spin_ns(long long ns);

#ifndef Py_GIL_DISABLED
#include <stdatomic.h>
#include <stdint.h>

/* How long a thread spins for a handing-over holder before it waits as CPython does: long
 * enough to cover a holder's Python between two calls, short enough that a stale hint
 * costs little. */
#define DLX_GIL_SPIN_NS 50000

extern _Atomic(uintptr_t) dlx_gil_holder;

/* The hint names another thread: spins until the hint is free and this thread claims it,
 * or for at most the bound (then CPython's own wait follows). */
void dlx_gil_claim(uintptr_t self);

/* Releases the GIL for the kernel; the hint no longer names this thread. */
static inline PyThreadState *dlx_gil_release(void) {
  PyThreadState *ts = PyEval_SaveThread();
  uintptr_t self = (uintptr_t)ts;
  if (atomic_load_explicit(&dlx_gil_holder, memory_order_relaxed) == self)
    atomic_compare_exchange_strong_explicit(&dlx_gil_holder, &self, 0, memory_order_release,
                                            memory_order_relaxed);
  return ts;
}

/* Takes the GIL back after the kernel. The hint is claimed before CPython's take_gil, so
 * two kernels ending at once do not both reach it (the loser would sleep there); it names
 * this thread until its next release. */
static inline void dlx_gil_reacquire(PyThreadState *ts) {
  uintptr_t self = (uintptr_t)ts, held = 0;
  if (__builtin_expect(!atomic_compare_exchange_strong_explicit(&dlx_gil_holder, &held, self,
                                                               memory_order_acquire,
                                                               memory_order_relaxed) &&
                           held != self,
                       0))
    dlx_gil_claim(self);
  PyEval_RestoreThread(ts);
  atomic_store_explicit(&dlx_gil_holder, self, memory_order_relaxed);
}

#else /* Py_GIL_DISABLED */

static inline PyThreadState *dlx_gil_release(void) { return PyEval_SaveThread(); }
static inline void dlx_gil_reacquire(PyThreadState *ts) { PyEval_RestoreThread(ts); }

#endif
#endif /* DLX_GIL_H_ */
