"""make demo: find the frameworks, load the example kernels, call them, say what happened."""
import os
import sys
import time

import dlx

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.environ.get("DLX_BUILD_DIR", os.path.join(HERE, "..", "build"))
DEVICE_NAMES = {1: "cpu", 2: "cuda", 10: "rocm", 12: "ext_dev (torch PrivateUse1 / Ascend)"}


def where(lib, *args):
    dev = lib.report_device_type(*args)
    return f"device={DEVICE_NAMES.get(dev, dev)}:{lib.report_device_id(*args)} " \
           f"stream={hex(lib.report_stream(*args))}"


def ns_per_call(fn, *args, n=200000):
    fn(*args)
    t0 = time.perf_counter()
    for _ in range(n):
        fn(*args)
    return (time.perf_counter() - t0) / n * 1e9


ASCEND = """
import threading, torch, torch_npu, dlx, dlx.torch, os
rec = dlx.torch.install()
print(f"  backend {dlx.torch.backend()}, table {rec.source}: {os.path.basename(rec.path)}")
report = dlx.load(os.path.join(os.environ["DLX_BUILD_DIR"], "examples", "stream_report.so"))
t = torch.ones(4, device="privateuseone")
s = torch.npu.Stream()
print(f"  outside any context: {hex(report.report_stream(t))} (the default NPU stream)")
with torch.npu.stream(s):
    print(f"  with torch.npu.stream(s): {hex(report.report_stream(t))} == s.npu_stream "
          f"{hex(s.npu_stream)}, device type {report.report_device_type(t)}")
seen = []
th = threading.Thread(target=lambda: seen.append(report.report_stream(t)))
with torch.npu.stream(s):
    th.start(); th.join()
print(f"  another thread meanwhile: {hex(seen[0])} (its own default, not s)")
"""


def ascend_demo():
    """The seed's feature, on a stand-in Ascend (tests/fixtures): no NPU needed."""
    import subprocess

    try:
        import dlx_privateuse1  # noqa: F401
    except ImportError:
        return
    print("Ascend stand-in (torch_npu + PrivateUse1 device from tests/fixtures):")
    env = dict(os.environ, DLX_BUILD_DIR=os.path.abspath(BUILD))
    r = subprocess.run([sys.executable, "-c", ASCEND], env=env, text=True, capture_output=True)
    print(r.stdout.rstrip())
    if r.returncode:
        print(r.stderr.rstrip())


CLAMP = r"""
#include <dlx/dlx.h>
DLX_KERNEL(clamp, "x: f32[n] mut, lo: float, hi: float") {
  DLTensor *x;
  double lo, hi;
  if (dlx_arg_tensor(call, 0, &x) || dlx_arg_float(call, 1, &lo) || dlx_arg_float(call, 2, &hi))
    return -1;
  float *p = (float *)((char *)x->data + x->byte_offset);
  for (int64_t i = 0; i < x->shape[0]; ++i) {
    float *v = &p[i * x->strides[0]];
    *v = *v < lo ? (float)lo : *v > hi ? (float)hi : *v;
  }
  return 0;
}
"""


def inline_demo(np):
    """dlx.load_inline: C source text compiled into dlx's cache once, then loaded warm."""
    t0 = time.perf_counter()
    lib = dlx.load_inline(CLAMP, name="demo_clamp")
    cold = time.perf_counter() - t0
    t0 = time.perf_counter()
    dlx.load_inline(CLAMP, name="demo_clamp")
    warm = time.perf_counter() - t0
    x = np.linspace(-2, 2, 5, dtype=np.float32)
    lib.clamp(x, -1.0, 1.0)
    print(f"dlx.load_inline: {os.path.basename(lib.path)} in {os.path.dirname(lib.path)}")
    print(f"  clamp(linspace(-2, 2, 5), -1, 1) -> {x.tolist()}")
    print(f"  first call {cold * 1e3:.1f} ms (compiled now, or found in the cache), "
          f"again {warm * 1e3:.2f} ms (stat-and-hash, no compiler)")


def main():
    print(f"dlx {os.path.dirname(dlx.__file__)}")
    print(f"  include dir: {dlx.include_dir()}")
    saxpy = dlx.load(os.path.join(BUILD, "examples", "saxpy.so"))
    report = dlx.load(os.path.join(BUILD, "examples", "stream_report.so"))
    print(f"  loaded {saxpy.path}: kernels {saxpy.kernels}")
    print(f"  loaded {report.path}: kernels {report.kernels}")

    import numpy as np

    x = np.arange(8, dtype=np.float32)
    y = np.ones(8, dtype=np.float32)
    saxpy.saxpy(x, y, 2.0)
    print(f"numpy {np.__version__}: table {dlx.exchange_api(np.ndarray)}")
    print(f"  saxpy(x, y, 2.0) -> y = {y.tolist()}")
    print(f"  {where(report, x)}")
    print(f"  {ns_per_call(saxpy.saxpy, x, y, 0.0):.0f} ns per saxpy call with 2 numpy arrays")

    inline_demo(np)

    try:
        import torch
    except ImportError:
        print("torch: not importable, skipped")
    else:
        from dlx import torch as dlx_torch

        name, reason = dlx_torch.selection()
        print(f"torch {torch.__version__}: backend {name} ({reason})")
        t0 = time.perf_counter()
        rec = dlx_torch.install()
        print(f"  table in force: {rec.source}" + (f", {rec.path}" if rec.path else "")
              + f" ({time.perf_counter() - t0:.2f} s)")
        tx = torch.arange(8, dtype=torch.float32)
        ty = torch.zeros(16, dtype=torch.float32)[::2]  # strided view
        saxpy.saxpy(tx, ty, 3.0)
        print(f"  saxpy(x, y[::2], 3.0) -> y = {ty.tolist()}")
        print(f"  {where(report, tx)}")
        print(f"  {ns_per_call(saxpy.saxpy, tx, ty, 0.0):.0f} ns per saxpy call with 2 torch tensors")
        ascend_demo()

    try:
        import dlx_fixture
    except ImportError:
        pass
    else:
        print("fixture framework (host memory posing as devices, per-thread streams):")
        for dev in (2, 10, 12):
            dlx_fixture.set_stream(dev, 0, 0x1000 + dev)
            t = dlx_fixture.tensor((4,), device=(dev, 0))
            print(f"  {where(report, t)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
