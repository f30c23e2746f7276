"""make bench: ns per call of a 3-argument no-op kernel, next to a bare C-extension
call taking the same three objects, all measured in this one process.

Each figure is the best of several rounds of a tight loop (the minimum is the least
disturbed by the rest of the machine); 'over bare' is per argument."""
import os
import sys
import time

import numpy as np

import dlx

BUILD = os.environ.get("DLX_BUILD_DIR", os.path.join(os.path.dirname(__file__), "..", "build"))
N, ROUNDS = 200_000, 7


def best_ns(fn, args):
    loop = range(N)
    fn(*args)
    best = float("inf")
    for _ in range(ROUNDS):
        t0 = time.perf_counter_ns()
        for _ in loop:
            fn(*args)
        best = min(best, (time.perf_counter_ns() - t0) / N)
    return best


class DLPackOnly:
    """A producer reachable only through __dlpack__ (the slow, protocol path)."""

    def __init__(self, inner):
        self.inner = inner

    def __dlpack__(self, **kw):
        return self.inner.__dlpack__(**kw)


def main():
    kernels = dlx.load(os.path.join(BUILD, "kernels", "test_kernels.so"))
    noop = kernels.noop
    rows = []
    try:
        import dlx_fixture as fx
    except ImportError:
        fx = None
    bare = fx.noop if fx else (lambda *a: None)
    bare_name = "dlx_fixture.noop (METH_FASTCALL)" if fx else "python lambda"

    def case(name, objs):
        b = best_ns(bare, objs)
        k = best_ns(noop, objs)
        rows.append((name, k, b, (k - b) / len(objs)))

    case("3 ints", (1, 2, 3))
    arrays = tuple(np.ones(16, np.float32) for _ in range(3))
    case("3 numpy arrays", arrays)
    if fx:
        case("3 fixture tensors, CPU (view export)", tuple(fx.tensor((16,), device=(1, 0)) for _ in range(3)))
        fx.set_stream(2, 0, 0x1234)
        case("3 fixture tensors, CUDA (view + stream)", tuple(fx.tensor((16,), device=(2, 0)) for _ in range(3)))
        fx.set_stream(12, 0, 0x1234)
        case("3 fixture tensors, kDLExtDev (view + stream)", tuple(fx.tensor((16,), device=(12, 0)) for _ in range(3)))

        class ManagedOnly(fx.Tensor):
            pass

        ManagedOnly.__dlpack_c_exchange_api__ = fx.table_capsule("managed_only")
        case("3 fixture tensors, CUDA (managed export)", tuple(ManagedOnly((16,), device=(2, 0)) for _ in range(3)))
        case("3 fixture tensors via __dlpack__ (versioned)", tuple(DLPackOnly(fx.tensor((16,), device=(1, 0))) for _ in range(3)))
    case("3 numpy arrays via __dlpack__ (legacy)", tuple(DLPackOnly(a) for a in arrays))
    try:
        import torch
    except ImportError:
        pass
    else:
        ts = tuple(torch.ones(16) for _ in range(3))
        case(f"3 torch tensors (torch {torch.__version__})", ts)

    print(f"dlx bench: {N} calls x {ROUNDS} rounds, best round; bare call = {bare_name}")
    print(f"{'arguments':48s} {'kernel ns':>10s} {'bare ns':>8s} {'over bare/arg':>14s}")
    for name, k, b, per in rows:
        print(f"{name:48s} {k:10.1f} {b:8.1f} {per:14.1f}")
    if fx:
        cpu = next(r for r in rows if r[0].startswith("3 fixture tensors, CPU"))
        for r in rows:
            if "+ stream" in r[0]:
                print(f"stream query cost ({r[0].split(',')[1].split('(')[0].strip()}): "
                      f"{r[1] - cpu[1]:.1f} ns per call")
    return 0


if __name__ == "__main__":
    sys.exit(main())
