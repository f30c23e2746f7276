"""Real-GPU check of dlx (not in CI): run by tests/gpu/run.sh on a machine with CUDA,
torch with a native exchange table, and nvcc. Prints what it saw and exits non-zero
when the kernel did not run on the caller's stream."""
import os
import sys
import time

import torch

import dlx
import dlx.torch

lib = dlx.load(sys.argv[1])
rec = dlx.torch.install()
print(f"torch {torch.__version__}, cuda {torch.version.cuda}, {torch.cuda.get_device_name()}")
print(f"backend {dlx.torch.backend()}, table {rec.source}")
assert rec.source in ("native", "addon"), rec

n = 1 << 22
x = torch.ones(n, device="cuda")
y = torch.zeros(n, device="cuda")
big = torch.randn(4096, 4096, device="cuda")
s = torch.cuda.Stream()
ok = True
with torch.cuda.stream(s):
    for _ in range(8):          # keep s busy, so a launch on another stream would race
        big = big @ big / 4096
    y.fill_(1.0)                # on s: must happen before axpy
    used = lib.axpy(x, y, 2.0)  # y = 2*1 + 1 = 3, only if ordered after fill_ on s
    z = y * 1.0                 # on s: must see axpy's result, no synchronisation in between
s.synchronize()
print(f"stream reported by the kernel: {hex(used)}; s.cuda_stream: {hex(s.cuda_stream)}")
ok &= used == s.cuda_stream
ok &= bool((z == 3.0).all())
print(f"result right without synchronising: {bool((z == 3.0).all())}")
default = lib.axpy(x, y, 0.0)
print(f"outside the context: {hex(default)} (current stream {hex(torch.cuda.current_stream().cuda_stream)})")
ok &= default == torch.cuda.current_stream().cuda_stream

a, b, c = (torch.empty(16, device="cuda") for _ in range(3))


def ns(fn, *args, n=200_000):
    fn(*args)
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter_ns()
        for _ in range(n):
            fn(*args)
        best = min(best, (time.perf_counter_ns() - t0) / n)
    return best


print(f"dlx noop kernel, 3 CUDA tensors: {ns(lib.noop, a, b, c):.0f} ns per call")
print(f"dlx noop kernel, 3 ints:         {ns(lib.noop, 1, 2, 3):.0f} ns per call")
print(f"torch.utils.dlpack.to_dlpack x3: {ns(lambda p, q, r: (torch.utils.dlpack.to_dlpack(p), torch.utils.dlpack.to_dlpack(q), torch.utils.dlpack.to_dlpack(r)), a, b, c, n=50_000):.0f} ns per call")
print(f"torch a.add_(0) (torch's own launch path): {ns(a.add_, 0, n=50_000):.0f} ns per call")
if len(sys.argv) > 2:  # examples/saxpy_cuda.cu: the user-facing example, on a side stream
    ex = dlx.load(sys.argv[2])
    xs = torch.arange(1 << 20, device="cuda", dtype=torch.float32)
    ys = torch.empty_like(xs)
    s2 = torch.cuda.Stream()
    with torch.cuda.stream(s2):
        for _ in range(4):
            big = big @ big / 4096
        ys.fill_(1.0)
        ex.saxpy_cuda(xs, ys, 2.0)          # ordered after fill_ on s2
        good = bool(torch.equal(ys, 2 * xs + 1))
        zs = torch.ones(1 << 20, device="cuda")[::2]  # strided operands
        ex.saxpy_cuda(xs[::2], zs, 1.0)
        good &= bool(torch.equal(zs, xs[::2] + 1))
    s2.synchronize()
    print(f"examples/saxpy_cuda on a side stream without synchronising: {good}")
    ok &= good
print("OK" if ok else "FAILED")
sys.exit(0 if ok else 1)
