"""python -m dlx bench, beside tvm-ffi: the same 3-tensor no-op called through dlx and
through a tvm-ffi function built from C++ source (tvm_ffi.cpp.load_inline), on numpy
arrays and on torch tensors, next to the bare call, all in this one process.

'over bare' is per tensor; the ratio is dlx's overhead over tvm-ffi's (both over bare).
tvm-ffi is installed in the venv (make venv), so `make bench` shows these rows there."""
import tempfile

import numpy as np

from . import ROUNDS, N, best_ns, noop_kernel

TVM_NOOP = ("#include <tvm/ffi/container/tensor.h>\n"
            "void noop3(tvm::ffi::TensorView, tvm::ffi::TensorView, tvm::ffi::TensorView) {}\n")


def main():
    try:
        import tvm_ffi
        import tvm_ffi.cpp
    except ImportError:
        print("tvm-ffi: not importable by this interpreter (the venv has it: make venv)")
        return 0
    try:
        import dlx_fixture

        bare, bare_name = dlx_fixture.noop, "dlx_fixture.noop (METH_FASTCALL)"
    except ImportError:
        bare, bare_name = (lambda *a: None), "python lambda"
    tmp = tempfile.TemporaryDirectory()
    noop = noop_kernel(tmp.name)
    # load_inline caches the build (TVM_FFI_CACHE_DIR, default ~/.cache/tvm-ffi)
    peer = tvm_ffi.cpp.load_inline("dlx_bench_noop3", cpp_sources=TVM_NOOP,
                                   functions=["noop3"]).noop3
    cases = [(f"3 numpy arrays (numpy {np.__version__})",
              tuple(np.ones(16, np.float32) for _ in range(3)))]
    try:
        import torch
    except ImportError:
        pass
    else:
        import dlx.torch as dt

        record = dt.install()  # before tvm-ffi meets a torch.Tensor: it caches the table
        source = record.source if record else "__dlpack__"
        cases.append((f"3 torch tensors (torch {torch.__version__}, table: {source})",
                      tuple(torch.ones(16) for _ in range(3))))
    print(f"dlx vs tvm-ffi {tvm_ffi.__version__}: 3-tensor no-op, {N} calls x {ROUNDS} "
          f"rounds, best round; bare call = {bare_name}")
    print(f"{'arguments':50s} {'bare':>6s} {'dlx':>7s} {'tvm-ffi':>8s} "
          f"{'dlx/t':>6s} {'tvm/t':>6s} {'dlx/tvm':>8s}")
    for name, objs in cases:
        b, d, t = best_ns((bare, noop, peer), objs)
        per_dlx, per_tvm = (d - b) / len(objs), (t - b) / len(objs)
        ratio = per_dlx / per_tvm if per_tvm > 0 else float("nan")
        print(f"{name:50s} {b:6.1f} {d:7.1f} {t:8.1f} {per_dlx:6.1f} {per_tvm:6.1f} "
              f"{ratio:8.2f}")
    print("(ns per call; dlx/t and tvm/t: ns per tensor over the bare call; dlx/tvm: their "
          "ratio)")
    return 0
