"""Ir per call of dlx.torch.register's operators against hand-written C++ TORCH_LIBRARY
operators with the same body (issue 33, item 5), under callgrind with bench_ir.py's driver
(a loop of PyObject_Vectorcall calls, only the loop counted):

  op add3     torch.ops.dlx_irops.add3(x, y, out)      "x, y, out: f32[n] mut"
  cxx add3    the hand-written add3 (bench_torch_ops.py's peer)
  op mut3     torch.ops.dlx_irops.mut3(x, y, z)        "x: f32[n], y: f32[n] mut, z: f32[n]"
  cxx mut3    a hand-written (Tensor x, Tensor(a!) y, Tensor z) -> () with the same loop

With --signed (any torch, e.g. Debian's 1.13 through the addon), the direct call's torch
rows instead: bench_ir.py's touch and touch3s ("x: f32[n], y: f32[n] mut, z: f32[n]") on
3 torch tensors, and the bare call.

Usage: python bench/bench_ir_ops.py [--signed] [--grad] [--out DIR]"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

CALLS = 2000
MUT3 = r"""
#include <dlx/dlx.h>
DLX_KERNEL(mut3, "x: f32[n], y: f32[n] mut, z: f32[n]") {
  DLTensor *x, *y, *z;
  if (dlx_arg_tensor(call, 0, &x) || dlx_arg_tensor(call, 1, &y) || dlx_arg_tensor(call, 2, &z))
    return -1;
  const float *a = (const float *)x->data, *c = (const float *)z->data;
  float *b = (float *)y->data;
  for (int64_t i = 0; i < x->shape[0]; ++i)
    b[i * y->strides[0]] = a[i * x->strides[0]] + c[i * z->strides[0]];
  return 0;
}
"""
CXX_MUT3 = r"""
#include <ATen/core/Tensor.h>
#include <torch/library.h>
void mut3(const at::Tensor &x, const at::Tensor &y, const at::Tensor &z) {
  TORCH_CHECK(x.scalar_type() == at::kFloat && y.scalar_type() == at::kFloat &&
              z.scalar_type() == at::kFloat, "mut3: float32 tensors");
  TORCH_CHECK(x.dim() == 1 && y.dim() == 1 && z.dim() == 1, "mut3: 1-d tensors");
  const int64_t n = x.size(0);
  TORCH_CHECK(y.size(0) == n && z.size(0) == n, "mut3: one length");
  const float *a = x.const_data_ptr<float>(), *c = z.const_data_ptr<float>();
  float *b = y.mutable_data_ptr<float>();
  const int64_t sa = x.stride(0), sb = y.stride(0), sc = z.stride(0);
  for (int64_t i = 0; i < n; ++i) b[i * sb] = a[i * sa] + c[i * sc];
}
TORCH_LIBRARY(dlx_irops_cxx, m) { m.def("mut3(Tensor x, Tensor(a!) y, Tensor z) -> ()"); }
TORCH_LIBRARY_IMPL(dlx_irops_cxx, CPU, m) { m.impl("mut3", mut3); }
"""


def build(out):
    import bench_ir
    import bench_torch_ops as bto
    import torch

    import dlx
    import dlx.torch as dt

    os.makedirs(out, exist_ok=True)
    bench_ir.compile_module(out, "dlx_irdriver", [os.path.join(HERE, "ir", "driver.c")])
    kso, cso = bto.build(out)
    src, so = os.path.join(out, "mut3.c"), os.path.join(out, "mut3.so")
    with open(src, "w") as f:
        f.write(MUT3)
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-I", dlx.include_dir(), src, "-o", so],
                   check=True)
    csrc, cmut = os.path.join(out, "mut3op.cc"), os.path.join(out, "mut3op.so")
    if not os.path.exists(cmut):
        with open(csrc, "w") as f:
            f.write(CXX_MUT3)
        spec = dt.build_spec("cpu")
        root = os.path.dirname(torch.__file__)
        subprocess.run([spec.cxx, "-O2", "-std=c++20", "-shared", "-fPIC",
                        *[f"-I{d}" for d in spec.includes if d.startswith(root)],
                        *[f"-D{d}" for d in spec.defines], csrc, "-o", cmut,
                        *[f"-L{d}" for d in spec.lib_dirs], "-lc10", "-ltorch_cpu"], check=True)
    return kso, cso, so, cmut


def build_signed(out):
    import bench_ir

    import dlx

    os.makedirs(out, exist_ok=True)
    bench_ir.compile_module(out, "dlx_irdriver", [os.path.join(HERE, "ir", "driver.c")])
    so, src = os.path.join(out, "touch.so"), os.path.join(HERE, "ir", "touch.c")
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-I", dlx.include_dir(), src, "-o", so],
                   check=True)


def child_signed(out):
    sys.path.insert(0, out)
    import torch

    import dlx
    import dlx.torch as dt
    import dlx_irdriver as drv

    rec = dt.install()
    print(f"torch {torch.__version__}: table {rec.source if rec else None}", flush=True)
    lib = dlx.load(os.path.join(out, "touch.so"))
    pt = tuple(torch.ones(16) for _ in range(3))
    for name, fn in (("bare pt3", drv.noop), ("unsigned pt3", lib.touch),
                     ("signed pt3", lib.touch3s)):
        fn(*pt)
        drv.run(fn, pt, CALLS, name, None, None)


def child(out):
    sys.path.insert(0, out)
    import torch

    import dlx
    import dlx.torch as dt
    import dlx_irdriver as drv

    kso, cso, so, cmut = build(out)
    reg = dt.register(dlx.load(kso), "dlx_irops")
    reg2 = dt.register(dlx.load(so), "dlx_irops_m")
    print(f"torch {torch.__version__}: {reg.implementation}", flush=True)
    torch.ops.load_library(cso)
    torch.ops.load_library(cmut)
    args = (torch.ones(16), torch.ones(16), torch.empty(16))
    rows = [("op add3", reg.ops["add3"]), ("cxx add3", torch.ops.dlx_bench_cxx.add3),
            ("op mut3", reg2.ops["mut3"]), ("cxx mut3", torch.ops.dlx_irops_cxx.mut3)]
    for name, fn in rows:
        fn(*args)  # warm
    for name, fn in rows:
        drv.run(fn, args, CALLS, name, None, None)
        if "--grad" in sys.argv:  # the same with a tensor that requires grad (not mutated)
            g = (torch.ones(16, requires_grad=True), args[1], args[2]) if "mut3" in name else None
            if g is not None:
                drv.run(fn, g, CALLS, name + " (x requires grad)", None, None)


def main():
    out = os.path.abspath(sys.argv[sys.argv.index("--out") + 1] if "--out" in sys.argv
                          else os.path.join("build-venv", "bench-ir-ops"))
    signed = "--signed" in sys.argv
    if "--child" in sys.argv:
        (child_signed if signed else child)(out)
        return 0
    (build_signed if signed else build)(out)
    import bench_ir

    folder = os.path.join(out, "callgrind")
    os.makedirs(folder, exist_ok=True)
    for f in os.listdir(folder):
        os.remove(os.path.join(folder, f))
    cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--collect-atstart=no",
           "--dump-instr=no", "--dump-line=no", f"--callgrind-out-file={folder}/cg.out",
           sys.executable, os.path.abspath(__file__), "--child", "--out", out,
           *[a for a in sys.argv[1:] if a in ("--grad", "--signed")]]
    r = subprocess.run(cmd, stderr=subprocess.PIPE, text=True)
    if r.returncode:
        print(r.stderr[-4000:], file=sys.stderr)
        return r.returncode
    counts = bench_ir.read_dumps(folder)
    for name in sorted(counts, key=lambda n: (n.split()[1], n)):
        print(f"  {name:<32} {counts[name] / CALLS:9.0f} Ir per call")
    for k in ("add3", "mut3"):
        if f"op {k}" in counts and f"cxx {k}" in counts:
            print(f"  {k}: operator / hand-written = {counts[f'op {k}'] / counts[f'cxx {k}']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
