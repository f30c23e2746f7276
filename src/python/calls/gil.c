/* gil.c - the GIL hand-off's shared state and its spin (dlx_gil.h says why). */
#include "dlx_gil.h"

#ifndef Py_GIL_DISABLED
#include <sched.h>
#include <time.h>

_Atomic(uintptr_t) dlx_gil_holder;
static _Atomic(int64_t) spin_ns = DLX_GIL_SPIN_NS;
static _Atomic(unsigned long long) handoffs, timeouts;
static _Atomic(int) spinning;

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static inline void cpu_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

void dlx_gil_claim(uintptr_t self) {
  atomic_fetch_add_explicit(&spinning, 1, memory_order_relaxed);
  int64_t start = 0;
  for (unsigned i = 1;; ++i) {
    cpu_pause();
    uintptr_t now = atomic_load_explicit(&dlx_gil_holder, memory_order_relaxed);
    if (now == 0 && atomic_compare_exchange_weak_explicit(&dlx_gil_holder, &now, self,
                                                          memory_order_acquire,
                                                          memory_order_relaxed)) {
      atomic_fetch_add_explicit(&handoffs, 1, memory_order_relaxed);
      break;
    }
    if (now == self) break;
    if ((i & 63) == 0) { /* the clock every 64 pauses (~2-8 us) */
      int64_t t = now_ns();
      if (!start) {
        start = t;
      } else if (t - start >= atomic_load_explicit(&spin_ns, memory_order_relaxed)) {
        atomic_fetch_add_explicit(&timeouts, 1, memory_order_relaxed);
        break;
      }
      if (i >= 256) sched_yield(); /* more threads than cores: let the holder run */
    }
  }
  atomic_fetch_sub_explicit(&spinning, 1, memory_order_relaxed);
}

void dlx_gil_counters(unsigned long long *h, unsigned long long *t, int *s) {
  *h = atomic_load(&handoffs);
  *t = atomic_load(&timeouts);
  *s = atomic_load(&spinning);
}

long long dlx_gil_set_spin_ns(long long ns) { return atomic_exchange(&spin_ns, ns); }

#else /* Py_GIL_DISABLED: nothing spins */

void dlx_gil_counters(unsigned long long *h, unsigned long long *t, int *s) {
  *h = *t = 0;
  *s = 0;
}

long long dlx_gil_set_spin_ns(long long ns) {
  (void)ns;
  return 0;
}

#endif
