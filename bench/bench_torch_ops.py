"""Kernels as torch operators (dlx.torch.register), per call, 3 small float32 tensors, CPU,
all in this one process (make bench, .venv's torch >= 2.5):

  1. eager lib.add3(x, y, out)                      dlx's direct call
  2. eager torch.ops.dlx_bench.add3(x, y, out)      the registered operator (C++ boxed kernel)
  3. the same kernel as a hand-written C++ TORCH_LIBRARY operator (the dispatcher's floor)
  4. the usual hand-written torch.library.custom_op Python wrapper around lib.add3
  5. torch.compile'd f(x, y, out) holding one call: lib.add3 vs the C++ operator

Usage: bench_torch_ops.py [--rounds N]. The C++ operator is built once into
$DLX_BUILD_DIR/bench-torch-ops (or a temporary folder)."""
import hashlib
import os
import subprocess
import sys
import tempfile
import time

import torch

import dlx
import dlx.torch as dt

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
N, ROUNDS = 20_000, 7
KERNEL = r"""
#include <dlx/dlx.h>
DLX_KERNEL(add3, "x: f32[n], y: f32[n], out: f32[n] mut") {
  DLTensor *x, *y, *out;
  if (dlx_arg_tensor(call, 0, &x) || dlx_arg_tensor(call, 1, &y) || dlx_arg_tensor(call, 2, &out))
    return -1;
  const float *a = (const float *)x->data, *b = (const float *)y->data;
  float *c = (float *)out->data;
  for (int64_t i = 0; i < x->shape[0]; ++i)
    c[i * out->strides[0]] = a[i * x->strides[0]] + b[i * y->strides[0]];
  return 0;
}
"""
CXX_OP = r"""
#include <ATen/core/Tensor.h>
#include <torch/library.h>
// The floor: the same loop as a hand-written operator, with the checks a careful author
// writes (dtype, rank, matching extents).
void add3(const at::Tensor &x, const at::Tensor &y, const at::Tensor &out) {
  TORCH_CHECK(x.scalar_type() == at::kFloat && y.scalar_type() == at::kFloat &&
              out.scalar_type() == at::kFloat, "add3: float32 tensors");
  TORCH_CHECK(x.dim() == 1 && y.dim() == 1 && out.dim() == 1, "add3: 1-d tensors");
  const int64_t n = x.size(0);
  TORCH_CHECK(y.size(0) == n && out.size(0) == n, "add3: one length");
  const float *a = x.const_data_ptr<float>(), *b = y.const_data_ptr<float>();
  float *c = out.mutable_data_ptr<float>();
  const int64_t sa = x.stride(0), sb = y.stride(0), sc = out.stride(0);
  for (int64_t i = 0; i < n; ++i) c[i * sc] = a[i * sa] + b[i * sb];
}
TORCH_LIBRARY(dlx_bench_cxx, m) { m.def("add3(Tensor x, Tensor y, Tensor(a!) out) -> ()"); }
TORCH_LIBRARY_IMPL(dlx_bench_cxx, CPU, m) { m.impl("add3", add3); }
"""


def build(folder, kernel=KERNEL, cxx_op=CXX_OP, stem="add3"):
    """The dlx kernel library and the hand-written C++ operator library (cached by source
    and torch version); bench_aoti.py builds its pair with it too."""
    os.makedirs(folder, exist_ok=True)
    key = hashlib.sha256((kernel + cxx_op + torch.__version__).encode()).hexdigest()[:12]
    kso, cso = os.path.join(folder, f"{stem}_{key}.so"), os.path.join(folder, f"op_{key}.so")
    if not os.path.exists(kso):
        src = os.path.join(folder, f"{stem}.c")
        with open(src, "w") as f:
            f.write(kernel)
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-I", dlx.include_dir(), src, "-o",
                        kso], check=True)
    if not os.path.exists(cso):
        src = os.path.join(folder, "op.cc")
        with open(src, "w") as f:
            f.write(cxx_op)
        spec = dt.build_spec("cpu")
        root = os.path.dirname(torch.__file__)
        incs = [f"-I{d}" for d in spec.includes if d.startswith(root)]
        cmd = [spec.cxx, "-O2", "-std=c++20", "-shared", "-fPIC", *incs,
               *[f"-D{d}" for d in spec.defines], src, "-o", cso,
               *[f"-L{d}" for d in spec.lib_dirs], "-lc10", "-ltorch_cpu"]
        print(f"building the hand-written C++ operator ({cso}) ...", file=sys.stderr)
        subprocess.run(cmd, check=True)
    return kso, cso


def best_ns(fn, args):
    best = float("inf")
    for _ in range(ROUNDS):
        t = time.perf_counter_ns()
        for _ in range(N):
            fn(*args)
        best = min(best, (time.perf_counter_ns() - t) / N)
    return best


def main():
    global ROUNDS
    if "--rounds" in sys.argv:
        ROUNDS = int(sys.argv[sys.argv.index("--rounds") + 1])
    folder = os.path.join(os.environ.get("DLX_BUILD_DIR") or tempfile.mkdtemp(),
                          "bench-torch-ops")
    kso, cso = build(folder)
    lib = dlx.load(kso)
    import numpy as np

    arrays = tuple(np.ones(16, np.float32) for _ in range(3))
    before = best_ns(lib.add3, arrays)  # the direct call on numpy arrays (no table involved)
    reg = dt.register(lib, "dlx_bench")
    after = best_ns(lib.add3, arrays)
    torch.ops.load_library(cso)
    cxx = torch.ops.dlx_bench_cxx.add3

    @torch.library.register_fake("dlx_bench_cxx::add3")
    def _(x, y, out):
        return None

    @torch.library.custom_op("dlx_bench_py::add3", mutates_args=("out",))
    def add3_py(x: torch.Tensor, y: torch.Tensor, out: torch.Tensor) -> None:
        lib.add3(x, y, out)

    args = (torch.ones(16), torch.ones(16), torch.empty(16))
    ours = reg.ops["add3"]

    def with_dlx(x, y, out):
        lib.add3(x, y, out)
        return out

    def with_cxx(x, y, out):
        cxx(x, y, out)
        return out

    f_dlx, f_cxx = torch.compile(with_dlx, fullgraph=True), torch.compile(with_cxx, fullgraph=True)
    f_dlx(*args), f_cxx(*args)  # compile outside the timing
    rows = [("1. eager lib.add3 (dlx's direct call)", lib.add3),
            ("2. eager torch.ops.dlx_bench.add3 (registered)", ours),
            ("3. eager hand-written C++ TORCH_LIBRARY op", cxx),
            ("4. eager hand-written custom_op Python wrapper", add3_py),
            ("5a. torch.compile'd f holding lib.add3", f_dlx),
            ("5b. torch.compile'd f holding the C++ op", f_cxx)]
    times = {}
    for _ in range(2):  # two passes, best of both: rows interleaved against drift
        for name, fn in rows:
            times[name] = min(times.get(name, float("inf")), best_ns(fn, args))
    print(f"torch operators (torch {torch.__version__}, implementation: {reg.implementation}; "
          f"ns per call, 3 float32[16] CPU tensors, best of {ROUNDS}x{N}):")
    print(f"  0. lib.add3 on 3 numpy arrays, before / after register: {before:.0f} / "
          f"{after:.0f} ns (registration adds nothing to the direct call)")
    floor = times[rows[2][0]]
    for name, _ in rows:
        base = times[rows[5][0]] if name.startswith("5a") else floor
        print(f"  {name:<50} {times[name]:8.0f} ns  {times[name] / base:5.2f}x "
              f"{'the compiled C++ op' if name.startswith('5a') else 'the C++ op'}")


if __name__ == "__main__":
    main()
