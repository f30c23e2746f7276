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


SIGNED = r"""#include <dlx/dlx.h>
#include <time.h>
DLX_KERNEL(plain) { (void)call; return 0; }
DLX_KERNEL(signed3, "x: f32[n], y: f32[n] mut, z: f32[n]") { (void)call; return 0; }
static int spin(dlx_call *call) {
  int64_t ms; struct timespec a, b;
  if (dlx_arg_int(call, 0, &ms)) return -1;
  clock_gettime(CLOCK_MONOTONIC, &a);
  do clock_gettime(CLOCK_MONOTONIC, &b);
  while ((b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000 < ms);
  return 0;
}
DLX_KERNEL(spin_gil, "ms: int") { return spin(call); }
DLX_KERNEL(spin_nogil, "ms: int; nogil") { return spin(call); }
"""


def signature_rows(folder, fx):
    """Declared signatures: a signed 3-tensor kernel next to the same unsigned one (the
    checks' cost per tensor), keyword vs positional binding, and 4 threads x 200 ms with
    and without nogil."""
    src, so = os.path.join(folder, "signed.c"), os.path.join(folder, "signed.so")
    with open(src, "w") as f:
        f.write(SIGNED)
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-I", dlx.include_dir(), src, "-o", so],
                   check=True)
    lib = dlx.load(so)
    print("declared signatures (same process, rounds interleaved):")
    sets = [("numpy arrays", tuple(np.ones(16, np.float32) for _ in range(3)))]
    if fx:
        sets.append(("fixture tensors, CPU", tuple(fx.tensor((16,), device=(1, 0)) for _ in range(3))))
    for what, (a, b, c) in sets:
        plain, signed = best_ns((lib.plain, lib.signed3), (a, b, c))
        print(f"  3 {what}: unsigned {plain:.1f} ns, signed {signed:.1f} ns -> "
              f"{(signed - plain) / 3:+.1f} ns per tensor for the checks")
        k = lib.signed3

        def positional():
            k(a, b, c)

        def keywords():
            k(x=a, y=b, z=c)

        pos, kw = best_ns((positional, keywords), ())
        print(f"  3 {what}, signed: positional {pos:.1f} ns, keywords {kw:.1f} ns -> "
              f"{kw - pos:+.1f} ns for binding x=, y=, z= (both through a Python wrapper)")
    import threading

    for k in (lib.spin_gil, lib.spin_nogil):
        ts = [threading.Thread(target=k, args=(200,)) for _ in range(4)]
        t0 = time.perf_counter()
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        print(f"  4 threads x a 200 ms kernel, {k.__name__}: {time.perf_counter() - t0:.2f} s wall")


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


def loops_ns(cases):
    """Best ns per iteration of each fn(*args) in `cases`, each running a loop of N calls
    in Python code; rounds interleaved as in best_ns."""
    best = [float("inf")] * len(cases)
    for fn, args in cases:
        fn(*args)
    for _ in range(ROUNDS):
        for i, (fn, args) in enumerate(cases):
            t0 = time.perf_counter_ns()
            fn(*args)
            best[i] = min(best[i], (time.perf_counter_ns() - t0) / N)
    return best


LOOPS = """
def lib_attr(lib, a, b, c, loop):
    for _ in loop: lib.noop(a, b, c)
def bound(noop, a, b, c, loop):
    for _ in loop: noop(a, b, c)
def mod_attr(m, a, b, c, loop):
    for _ in loop: m.noop(a, b, c)
"""


# `lib.k(...)` within 3 ns of a bound `k(...)`. Only CPython 3.12+ can specialize the lookup
# on a type that also says why a name is missing (docs/design.md, "Kernels and the ABI").
LOOKUP_BUDGET_NS = 3
LOOKUP_WHY = "" if sys.version_info >= (3, 12) else "; CPython 3.11 does not specialize it"


def attribute_rows(folder, bare):
    """`lib.noop(...)` against a bound `noop(...)` in Python code (the attribute fetch each
    call pays), with a module function's `m.noop(...)` beside it."""
    ns = {}
    exec(LOOPS, ns)
    lib = dlx.load(os.path.join(folder, "noop.so"))
    arrays = tuple(np.ones(16, np.float32) for _ in range(3))
    loop = range(N)
    cases = [(ns["lib_attr"], (lib, *arrays, loop)), (ns["bound"], (lib.noop, *arrays, loop))]
    mod = sys.modules.get(getattr(bare, "__module__", None) or "")
    if mod is not None and getattr(mod, "noop", None) is bare:
        cases += [(ns["mod_attr"], (mod, *arrays, loop)), (ns["bound"], (bare, *arrays, loop))]
    t = loops_ns(cases)
    fetch = t[0] - t[1]
    rows = [f"lib.noop(3 arrays) {t[0]:.1f} ns vs bound noop(3 arrays) {t[1]:.1f} ns: "
            f"the attribute fetch {fetch:.1f} ns (budget <= {LOOKUP_BUDGET_NS} ns: "
            f"{'met' if fetch <= LOOKUP_BUDGET_NS else 'not met' + LOOKUP_WHY})"]
    if len(t) > 2:
        rows.append(f"  (a module function: m.noop(...) {t[2]:.1f} ns vs noop(...) "
                    f"{t[3]:.1f} ns: {t[2] - t[3]:.1f} ns)")
    return rows


def peer_rows(bare):
    """ns per call of the same 3-tensor work through the peers `make bench-ir` built
    (DLX_BENCH_PEERS: its build folder), on the same objects."""
    folder = os.environ.get("DLX_BENCH_PEERS")
    if not folder or not os.path.isdir(folder):
        return []
    sys.path.insert(0, folder)
    kernel = dlx.load(os.path.join(folder, "touch.so")).touch
    objs = {"numpy": tuple(np.ones(16, np.float32) for _ in range(3))}
    try:
        import torch

        objs["torch"] = tuple(torch.ones(16) for _ in range(3))
    except ImportError:
        pass
    impls = {"dlx": {"numpy": kernel, "torch": kernel}}

    def add(name, module, np_fn, pt_fn):
        try:
            m = __import__(module)
        except ImportError:
            return
        impls[name] = {"numpy": getattr(m, np_fn), "torch": getattr(m, pt_fn, None)}

    add("C-API", "dlx_peer_capi_numpy", "touch", "-")
    try:
        import dlx_peer_capi_torch

        impls["C-API"]["torch"] = dlx_peer_capi_torch.touch
    except ImportError:
        pass
    add("pybind11", "dlx_peer_pybind11", "touch_np3", "touch_pt3")
    add("nanobind", "dlx_peer_nanobind", "touch3", "touch3")
    try:
        import tvm_ffi

        mod = tvm_ffi.load_module(os.path.join(folder, "peer_tvmffi.so"))
        impls["tvm-ffi"] = {"numpy": mod.touch3, "torch": mod.touch3}
    except (ImportError, OSError, AttributeError, RuntimeError):
        pass
    rows = [f"peers (read data, ndim, shape[0] of 3 tensors), ns per call and per tensor "
            f"over bare, from {folder}:"]
    for kind, args in objs.items():
        fns = [(name, f[kind]) for name, f in impls.items() if f.get(kind)]
        times = best_ns([bare] + [f for _, f in fns], args)
        rows.append(f"  3 {kind:6s} bare {times[0]:5.1f}  " + "  ".join(
            f"{name} {t:6.1f} ({(t - times[0]) / 3:5.1f}/t)" for (name, _), t in
            zip(fns, times[1:])))
    return rows


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
    if not fx and os.path.isdir(os.environ.get("DLX_BENCH_PEERS", "")):
        sys.path.insert(0, os.environ["DLX_BENCH_PEERS"])
        try:  # make bench-ir's driver has the same bare METH_FASTCALL call
            import dlx_irdriver

            bare, bare_name = dlx_irdriver.noop, "dlx_irdriver.noop (METH_FASTCALL)"
        except ImportError:
            pass

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

    lookup = attribute_rows(tmp.name, bare)
    peers = peer_rows(bare)
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
    for line in lookup + peers:
        print(line)
    signature_rows(tmp.name, fx)
    if "torch" in sys.modules and os.environ.get("DLX_BENCH_SKIP_BUILD") != "1":
        cold, warm, source = torch_times()
        print(f"torch addon: cold build {cold:.1f} s (python -m dlx build-addon, empty cache); "
              f"warm install() {warm * 1e3:.1f} ms ({source})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
