"""The body of tests/python/threads/test_threads.py's stress test, run in a child process (a
crash or a hang is then a failed test, not a dead run): THREADS threads at once, each ROUNDS rounds
of everything dlx does that touches shared state, every result checked. Bounded in count;
the parent bounds it in time. Prints "ok <calls>" at the end, or raises.

Run as: python threads_stress.py BUILD_DIR [ROUNDS]"""
import os
import sys
import threading
import traceback

import numpy as np

import dlx
from dlx import _core

THREADS = 8
BUILD = sys.argv[1]
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 60

INLINE = """
#include <dlx/dlx.h>
DLX_KERNEL(twice, "x: int -> int") {
  int64_t x;
  if (dlx_arg_int(call, 0, &x)) return -1;
  return dlx_return_int(call, 2 * x);
}
"""


class Sub(np.ndarray):
    """A type dlx finds through a provider registered while other threads call."""


class Producer:
    """A __dlpack__ producer on the host: its stream provider is registered and removed."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, **kw):
        return self.a.__dlpack__(**{k: v for k, v in kw.items() if k != "stream"})

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


shared = np.arange(256, dtype=np.float32)          # read by every thread at once
shared_f64 = np.linspace(0.0, 1.0, 64)
shared_sum = float(shared.sum())
barrier = threading.Barrier(THREADS)
errors = []
calls = [0] * THREADS


def worker(t):
    try:
        barrier.wait(timeout=60)
        kernels = os.path.join(BUILD, "kernels")
        for r in range(ROUNDS):
            # the same library as every other thread, and one only some threads load
            k = dlx.load(os.path.join(kernels, "test_kernels.so"))
            s = dlx.load(os.path.join(kernels, "sig_kernels.so"))
            if t % 2:
                other = dlx.load(os.path.join(BUILD, "examples", "saxpy.so"))
                assert "saxpy" in other.kernels
            # kernels looked up by name and by attribute
            assert getattr(k, "sum") is not None and "sum" in k.kernels
            # unsigned kernels: a shared array read, a private one written
            assert k.sum(shared) == shared_sum
            mine = np.zeros(32 + t, dtype=np.float64)
            k.fill(mine, float(t + r))
            assert (mine == t + r).all() and k.sum(mine) == (t + r) * mine.size
            assert k.echo_int(t * 1000 + r) == t * 1000 + r
            # a signed kernel, positional and by keyword: y += x * z on private y
            y = np.full(256, float(t), dtype=np.float32)
            s.fma3(shared, y, shared)
            assert np.array_equal(y, t + shared * shared)
            y2 = np.zeros(256, dtype=np.float32)
            s.fma3(z=shared, y=y2, x=shared)
            assert np.array_equal(y2, shared * shared)
            assert s.kinds(t, b=1.5, d="ab", e=(r, 1)) == (t, 1.5, 0, 2, r + 1, 0.25, 6)
            assert s.reduce(shared_f64, mode="sum") == float(shared_f64.sum())
            # nogil kernels: the call releases the GIL (where there is one) for the kernel
            assert s.busy_nogil(0) is None
            assert s.busy_gil(ms=0) is None
            # providers: numpy's table registered again (every cache entry dropped while
            # the other threads call), and one for a subclass
            if r % 8 == t % 8:
                _core._install_numpy()
                dlx.register_provider(Sub, dlx.exchange_api(np.ndarray))
            sub = np.arange(8, dtype=np.float32).view(Sub)
            assert k.sum(sub) == 28.0
            cap = dlx.exchange_api(np.ndarray)
            assert type(cap).__name__ == "PyCapsule"
            assert dlx.exchange_api(int) is None
            # stream providers, registered and removed; the producer path beside them
            def provider(device_type, device_id, t=t):
                return 0x1000 + t
            dlx.register_stream_provider(Producer, provider)
            assert k.sum(Producer(shared)) == shared_sum
            dlx.register_stream_provider(Producer, None)
            # dlx.stream, nested: this thread's own handles only
            assert _core._stream_current() is None
            with dlx.stream(0x100 + t):
                assert _core._stream_current() == 0x100 + t
                with dlx.stream(0x200 + t):
                    assert _core._stream_current() == 0x200 + t
                    assert k.sum(shared) == shared_sum
                assert _core._stream_current() == 0x100 + t
            assert _core._stream_current() is None
            # the same inline source, built by several threads at once: one library
            if r < 2:
                lib = dlx.load_inline(INLINE, name="threads_twice")
                assert lib.twice(t + r) == 2 * (t + r)
            calls[t] += 16
    except BaseException:  # reported by the main thread
        errors.append(f"thread {t}:\n{traceback.format_exc()}")
        barrier.abort()


threads = [threading.Thread(target=worker, args=(t,), daemon=True) for t in range(THREADS)]
for th in threads:
    th.start()
for th in threads:
    th.join(timeout=300)
if any(th.is_alive() for th in threads):
    raise SystemExit("a thread did not finish")
if errors:
    raise SystemExit("\n".join(errors))
# every cached library is the one every thread got
lib = dlx.load_inline(INLINE, name="threads_twice")
assert lib.twice(21) == 42
gil = getattr(sys, "_is_gil_enabled", lambda: True)()
print(f"ok {sum(calls)} gil={gil}")
