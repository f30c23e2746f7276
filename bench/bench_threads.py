"""make bench: calls per second of a ~2 us CPU kernel from one thread and from two (issue 23),
each thread on its own arrays. Under a free-threaded CPython (3.13t) both threads run at
once (goal: two reach >= 1.8x one on 2 cores); under a GIL build a plain kernel shows the
contrast (about 1x: the GIL serializes) and a `nogil` kernel what releasing it buys.

    python bench/bench_threads.py [--seconds S] [--rounds R]

A benchmark, not a test: the numbers depend on what else the machine runs."""
import argparse
import statistics
import sys
import threading
import time

import numpy as np

import dlx

SOURCE = r"""
#include <dlx/dlx.h>
static int axpy(dlx_call *call) {
  DLTensor *x, *y;
  if (dlx_arg_tensor(call, 0, &x) || dlx_arg_tensor(call, 1, &y)) return -1;
  const float *a = (const float *)x->data;
  float *b = (float *)y->data;
  for (int64_t i = 0; i < x->shape[0]; ++i) b[i] = b[i] * 0.5f + a[i];
  return 0;
}
DLX_KERNEL(axpy_gil, "x: f32[n] contig, y: f32[n] mut contig") { return axpy(call); }
DLX_KERNEL(axpy_nogil, "x: f32[n] contig, y: f32[n] mut contig; nogil") { return axpy(call); }
"""


def rate(kernel, n, threads, seconds):
    """Calls per second of all `threads` together, each on private arrays of n floats."""
    counts = [0] * threads
    start = threading.Barrier(threads + 1)
    stop = threading.Event()

    def run(t):
        x = np.ones(n, np.float32)
        y = np.zeros(n, np.float32)
        start.wait()
        c = 0
        while not stop.is_set():
            for _ in range(100):
                kernel(x, y)
            c += 100
        counts[t] = c

    ts = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    for t in ts:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for t in ts:
        t.join()
    return sum(counts) / (time.perf_counter() - t0)


def calibrate(kernel, target_us=2.0):
    """Array length for which one call takes about target_us on this machine: the median
    of batches, after a warm-up (a core that has been idle runs slower for a while)."""
    n = 64
    x, y = np.ones(n, np.float32), np.zeros(n, np.float32)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 1.0:
        kernel(x, y)
    for _ in range(40):
        x, y = np.ones(n, np.float32), np.zeros(n, np.float32)
        batches = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(1000):
                kernel(x, y)
            batches.append((time.perf_counter() - t0) / 1000 * 1e6)
        us = statistics.median(batches)
        if abs(us - target_us) <= 0.1 * target_us or n >= 1 << 22:
            break
        n = max(16, int(n * max(0.5, min(4.0, target_us / max(us, 0.05)))))
    return n, us


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5.0, help="per column, over all rounds")
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()
    lib = dlx.load_inline(SOURCE, name="bench_threads")
    gil = getattr(sys, "_is_gil_enabled", lambda: True)()
    print(f"threads: {sys.version.split()[0]}, GIL {'enabled' if gil else 'disabled'}; "
          f"calls/s of a ~2 us kernel on private arrays")
    kernels = [("plain", lib.axpy_gil)] + ([("nogil", lib.axpy_nogil)] if gil else [])
    for what, k in kernels:
        n, us = calibrate(k)
        # one thread and two, in short turns, and the median of the turns' ratios: this
        # machine's speed drifts (clock changes, neighbours) more slowly than a turn
        before = dlx._core._stats()
        ones, twos = [], []
        for _ in range(args.rounds):
            ones.append(rate(k, n, 1, args.seconds / args.rounds))
            twos.append(rate(k, n, 2, args.seconds / args.rounds))
        one, two = statistics.median(ones), statistics.median(twos)
        ratio = statistics.median(t / o for o, t in zip(ones, twos))
        after = dlx._core._stats()
        extra = ""
        if what == "nogil":  # dlx_gil.h: spins that got the GIL handed over / reached the bound
            extra = (f" (GIL hand-offs {after.get('gil_handoffs', 0) - before.get('gil_handoffs', 0):,}, "
                     f"spins to the bound {after.get('gil_spin_timeouts', 0) - before.get('gil_spin_timeouts', 0)})")
        print(f"  {what:6} kernel ({n} floats, {us:.2f} us/call; {1e6 / one:.2f} us in the run): "
              f"1 thread {one:,.0f}/s, "
              f"2 threads {two:,.0f}/s: {ratio:.2f}x{extra}")


if __name__ == "__main__":
    main()
