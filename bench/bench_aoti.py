"""An AOTInductor package holding one dlx operator vs the same package holding a hand-written
C++ TORCH_LIBRARY operator with the same kernel body (issue 31's row: goal <= 1.1x per call),
called from Python, one process, CPU, float32[16] tensors (.venv's torch >= 2.6):

  a. aoti_load_package(f holding torch.ops.dlx_aoti_bench.add)   dlx's boxed C++ kernel
  b. aoti_load_package(f holding torch.ops.dlx_aoti_cxx.add)     the hand-written operator

Both reach their operator through AOTInductor's proxy executor (the dispatcher, boxed), as
any operator without a C shim does. Medians of interleaved rounds.

Usage: bench_aoti.py [--rounds N]. The libraries and packages are built once into
$DLX_BUILD_DIR/bench-aoti (or a temporary folder)."""
import os
import statistics
import sys
import tempfile
import time

import torch

import dlx
import dlx.torch as dt

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_torch_ops  # noqa: E402 - its build() makes this file's pair too

N, ROUNDS = 20_000, 9
KERNEL = r"""
#include <dlx/dlx.h>
DLX_KERNEL(add, "x: f32[n], y: f32[n] -> f32[n]") {
  DLTensor *x, *y, *out;
  int64_t n;
  if (dlx_arg_tensor(call, 0, &x) || dlx_arg_tensor(call, 1, &y) || dlx_size(call, "n", &n))
    return -1;
  if (dlx_return_new_tensor(call, x->device, 1, &n, x->dtype, &out)) return -1;
  const float *a = (const float *)x->data, *b = (const float *)y->data;
  float *c = (float *)out->data;
  for (int64_t i = 0; i < n; ++i) c[i] = a[i * x->strides[0]] + b[i * y->strides[0]];
  return 0;
}
"""
CXX_OP = r"""
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>
// The same loop as a hand-written operator, with the checks a careful author writes.
at::Tensor add(const at::Tensor &x, const at::Tensor &y) {
  TORCH_CHECK(x.scalar_type() == at::kFloat && y.scalar_type() == at::kFloat, "add: float32");
  TORCH_CHECK(x.dim() == 1 && y.dim() == 1 && y.size(0) == x.size(0), "add: one length");
  const int64_t n = x.size(0);
  at::Tensor out = at::empty({n}, x.options());
  const float *a = x.const_data_ptr<float>(), *b = y.const_data_ptr<float>();
  float *c = out.mutable_data_ptr<float>();
  const int64_t sa = x.stride(0), sb = y.stride(0);
  for (int64_t i = 0; i < n; ++i) c[i] = a[i * sa] + b[i * sb];
  return out;
}
TORCH_LIBRARY(dlx_aoti_cxx, m) { m.def("add(Tensor x, Tensor y) -> Tensor"); }
TORCH_LIBRARY_IMPL(dlx_aoti_cxx, CPU, m) { m.impl("add", add); }
"""


def build(folder):
    kso, cso = bench_torch_ops.build(folder, KERNEL, CXX_OP, stem="add")
    key = os.path.basename(kso)[len("add_"):-len(".so")]
    return kso, cso, key


class Holds(torch.nn.Module):
    def __init__(self, op):
        super().__init__()
        self.op = op

    def forward(self, x, y):
        return self.op(x, y)


def package(op, path):
    if not os.path.exists(path):
        print(f"compiling {path} ...", file=sys.stderr)
        ep = torch.export.export(Holds(op), (torch.ones(16), torch.ones(16)))
        torch._inductor.aoti_compile_and_package(ep, package_path=path)
    return torch._inductor.aoti_load_package(path)


def per_call_ns(fn, args):
    t = time.perf_counter_ns()
    for _ in range(N):
        fn(*args)
    return (time.perf_counter_ns() - t) / N


def main():
    global ROUNDS
    if "--rounds" in sys.argv:
        ROUNDS = int(sys.argv[sys.argv.index("--rounds") + 1])
    folder = os.path.join(os.environ.get("DLX_BUILD_DIR") or tempfile.mkdtemp(), "bench-aoti")
    kso, cso, key = build(folder)
    reg = dt.register(dlx.load(kso), "dlx_aoti_bench")
    torch.ops.load_library(cso)

    @torch.library.register_fake("dlx_aoti_cxx::add")
    def _(x, y):
        return torch.empty_like(x)

    rows = {"a. package holding the dlx operator": package(
                reg.ops["add"].default, os.path.join(folder, f"dlx_{key}.pt2")),
            "b. package holding the C++ TORCH_LIBRARY op": package(
                torch.ops.dlx_aoti_cxx.add.default, os.path.join(folder, f"cxx_{key}.pt2"))}
    args = (torch.rand(16), torch.rand(16))
    for name, m in rows.items():
        assert torch.equal(m(*args), args[0] + args[1]), name
        per_call_ns(m, args)  # warm
    times = {name: [] for name in rows}
    for _ in range(ROUNDS):  # interleaved against drift
        for name, m in rows.items():
            times[name].append(per_call_ns(m, args))
    print(f"AOTInductor packages from Python (torch {torch.__version__}, implementation: "
          f"{reg.implementation}; ns per call, 2 float32[16] CPU tensors, median of "
          f"{ROUNDS}x{N}):")
    floor = statistics.median(times["b. package holding the C++ TORCH_LIBRARY op"])
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"  {name:<46} {med:8.0f} ns  {med / floor:5.2f}x the C++ op")


if __name__ == "__main__":
    main()
