"""python -m dlx bench (make bench): ns per call of a 3-argument no-op kernel, next to
a bare C-extension call taking the same three objects, all measured in this one process;
then the torch addon's cold build and warm install() times.

Each figure is the best of several rounds of a tight loop (the minimum is the least
disturbed by the rest of the machine); 'over bare' is per argument."""
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

import dlx

N, ROUNDS = 200_000, 7
NOOP = "#include <dlx/dlx.h>\nDLX_KERNEL(noop) { (void)call; return 0; }\n"


def noop_kernel(folder):
    """A 3-argument no-op kernel, compiled here with the headers alone."""
    src, so = os.path.join(folder, "noop.c"), os.path.join(folder, "noop.so")
    with open(src, "w") as f:
        f.write(NOOP)
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-I", dlx.include_dir(), src, "-o", so],
                   check=True)
    return dlx.load(so).noop


def torch_times():
    """Cold addon build into a fresh folder, and warm install() in a fresh process."""
    code = ("import time, torch, dlx.torch as dt; t = time.perf_counter(); r = dt.install(); "
            "print(time.perf_counter() - t, r.source)")
    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as cache:
        env["DLX_CACHE_DIR"] = cache
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "dlx", "build-addon"], env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        cold = time.perf_counter() - t0
        out = subprocess.run([sys.executable, "-c", code], env=env, check=True,
                             capture_output=True, text=True).stdout.split()
    return cold, float(out[0]), out[1]


def best_ns(fns, args):
    """Best ns per call of each fn in `fns`, rounds interleaved so that both see the same
    machine (another process, a frequency change) as nearly as possible."""
    loop = range(N)
    best = [float("inf")] * len(fns)
    for fn in fns:
        fn(*args)
    for _ in range(ROUNDS):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter_ns()
            for _ in loop:
                fn(*args)
            best[i] = min(best[i], (time.perf_counter_ns() - t0) / N)
    return best


class DLPackOnly:
    """A producer reachable only through __dlpack__ (the slow, protocol path)."""

    def __init__(self, inner):
        self.inner = inner

    def __dlpack__(self, **kw):
        return self.inner.__dlpack__(**kw)


def main():
    tmp = tempfile.TemporaryDirectory()
    noop = noop_kernel(tmp.name)
    rows = []
    try:
        import dlx_fixture as fx
    except ImportError:
        fx = None
    bare = fx.noop if fx else (lambda *a: None)
    bare_name = "dlx_fixture.noop (METH_FASTCALL)" if fx else "python lambda"

    def case(name, objs):
        b, k = best_ns((bare, noop), objs)
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
        # The runtime provider: the overlay answers kDLExtDev through a C raw-stream getter
        # registered as torch_npu._C._npu_getCurrentRawStream (as the real one is C).
        import types

        fake = types.ModuleType("torch_npu")
        fake._C = types.SimpleNamespace(_npu_getCurrentRawStream=fx.ext_dev_raw_stream)
        sys.modules.setdefault("torch_npu", fake)
        if sys.modules["torch_npu"] is fake:
            dlx._core.set_active_backend("torch_npu")

            class Overlaid(fx.Tensor):
                pass

            Overlaid.__dlpack_c_exchange_api__ = dlx._core.stream_overlay(
                fx.table_capsule("full"))
            case("3 fixture tensors, kDLExtDev (view + provider stream)",
                 tuple(Overlaid((16,), device=(12, 0)) for _ in range(3)))
            del sys.modules["torch_npu"]
            dlx._core.set_active_backend("cpu")
        case("3 fixture tensors, CUDA (managed export)", tuple(ManagedOnly((16,), device=(2, 0)) for _ in range(3)))
        case("3 fixture tensors via __dlpack__ (versioned)", tuple(DLPackOnly(fx.tensor((16,), device=(1, 0))) for _ in range(3)))
    case("3 numpy arrays via __dlpack__ (legacy)", tuple(DLPackOnly(a) for a in arrays))
    try:
        import torch
    except ImportError:
        pass
    else:
        import dlx.torch as dt

        record = dt.install()
        ts = tuple(torch.ones(16) for _ in range(3))
        case(f"3 torch tensors (torch {torch.__version__}, table: {record.source})", ts)

    print(f"dlx bench: {N} calls x {ROUNDS} rounds, best round; bare call = {bare_name}")
    print(f"{'arguments':56s} {'kernel ns':>10s} {'bare ns':>8s} {'over bare/arg':>14s}")
    for name, k, b, per in rows:
        print(f"{name:56s} {k:10.1f} {b:8.1f} {per:14.1f}")
    if fx:
        cpu = next(r for r in rows if r[0].startswith("3 fixture tensors, CPU"))
        for r in rows:
            if "stream)" in r[0]:
                print(f"stream query cost, {r[0].split(', ', 1)[1]}: {r[1] - cpu[1]:.1f} ns "
                      "per call (vs the same call on CPU, which asks nothing)")
    if "torch" in sys.modules and os.environ.get("DLX_BENCH_SKIP_BUILD") != "1":
        cold, warm, source = torch_times()
        print(f"torch addon: cold build {cold:.1f} s (python -m dlx build-addon, empty cache); "
              f"warm install() {warm * 1e3:.1f} ms ({source})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
