"""Real-GPU check of the streams of producers without a table (issue 13; not in CI): run by
tests/gpu/run.sh when CuPy is importable. torch and CuPy on one device, inside
torch.cuda.stream(s), CuPy alone on its own stream, dlx.stream, and a CUDA graph capture.
Prints what it saw; exits non-zero when a kernel ran on the wrong stream or a result
needed a synchronisation it did not get."""
import sys

import cupy
import torch

import dlx

lib = dlx.load(sys.argv[1])  # tests/gpu/stream_kernels.cu: axpy returns the stream it used
print(f"torch {torch.__version__}, cupy {cupy.__version__}, {torch.cuda.get_device_name()}")
n = 1 << 22
ok = True


def check(what, cond):
    global ok
    print(f"{'ok  ' if cond else 'FAIL'} {what}")
    ok &= bool(cond)


x = torch.ones(n, device="cuda")

# 1. torch + CuPy in one call inside torch.cuda.stream(s): the kernel runs on s, and the
#    CuPy array is exported with __dlpack__(stream=s), so CuPy makes s wait for its pending
#    work. That work is slow and sits on a non-blocking CuPy stream (nothing but that wait
#    orders it before s: not the legacy default stream, which torch's default stream is), it
#    *sets* y (a second += would commute with axpy's and hide the order), and s itself has
#    nothing to do first. Without the stream, axpy reads y == 0 and the fill then overwrites
#    its result: y ends 1, not 3.
y = cupy.zeros(n, dtype=cupy.float32)
m = cupy.ones((4096, 4096), dtype=cupy.float32)
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())  # x is ready for s
cupy.cuda.Device().synchronize()  # y and m are ready for cs1
cs1 = cupy.cuda.Stream(non_blocking=True)
with cs1:
    for _ in range(8):
        m = m @ m / 4096  # keeps cs1 busy (stays all ones)
    y.fill(1)  # after the matmuls, on cs1
    with torch.cuda.stream(s):
        used = lib.axpy(x, y, 2.0)  # y = 2*1 + 1 = 3 only if ordered after the fill
s.synchronize()
cupy.cuda.Device().synchronize()
check(f"mixed call on torch's stream: {hex(used)} == {hex(s.cuda_stream)}", used == s.cuda_stream)
check("mixed call ordered after CuPy's pending work", bool((y == 3).all()))

# 2. CuPy alone: the built-in provider gives CuPy's current stream.
xc = cupy.ones(n, dtype=cupy.float32)
cupy.cuda.Device().synchronize()  # xc and y are ready for a non-blocking stream
cs = cupy.cuda.Stream(non_blocking=True)
with cs:
    y.fill(1)  # on cs
    used = lib.axpy(xc, y, 1.0)  # y = 2, on cs after fill
    z = y * 1.0  # on cs: sees axpy's result without synchronising
cs.synchronize()
check(f"CuPy alone on CuPy's stream: {hex(used)} == {hex(cs.ptr)}", used == cs.ptr)
check("CuPy alone ordered on its stream", bool((z == 2).all()))

# 3. dlx.stream(s) overrides torch's own current stream, for torch and CuPy alike.
s2 = torch.cuda.Stream()
with dlx.stream(s2):
    used_t = lib.axpy(x, x, 0.0)
    used_c = lib.axpy(xc, y, 0.0)
torch.cuda.synchronize()
check(f"dlx.stream(torch stream): {hex(used_t)}, {hex(used_c)} == {hex(s2.cuda_stream)}",
      used_t == s2.cuda_stream and used_c == s2.cuda_stream)
with dlx.stream(cs):  # a cupy.cuda.Stream: its .ptr
    check("dlx.stream(cupy stream)", lib.axpy(x, x, 0.0) == cs.ptr)
cs.synchronize()

# 4. CUDA graph capture: torch + CuPy captured on torch's capture stream; CuPy's current
#    stream is that stream too (ExternalStream), so its export needs no event from outside.
gx = torch.ones(n, device="cuda")
gy = cupy.zeros(n, dtype=cupy.float32)
side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):  # warm up off the default stream, as torch's docs ask
    cap = torch.cuda.current_stream()
    with cupy.cuda.ExternalStream(cap.cuda_stream):
        lib.axpy(gx, gy, 0.0)
torch.cuda.current_stream().wait_stream(side)
torch.cuda.synchronize()
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    cap = torch.cuda.current_stream()
    with cupy.cuda.ExternalStream(cap.cuda_stream):
        used = lib.axpy(gx, gy, 1.0)  # captured, not run
torch.cuda.synchronize()
check(f"captured on the capture stream: {hex(used)} == {hex(cap.cuda_stream)}",
      used == cap.cuda_stream)
gy.fill(0)
cupy.cuda.Device().synchronize()
g.replay()
g.replay()
torch.cuda.synchronize()
check("graph replayed twice: y == 2", bool((gy == 2).all()))

print("OK" if ok else "FAILED")
sys.exit(0 if ok else 1)
