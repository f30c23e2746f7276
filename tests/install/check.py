"""Part of tests/install/run.sh: load kernel libraries built against an installed dlx and
call them with numpy and torch. Usage: check.py LIB.so... [--cuda SAXPY_CUDA.so]"""
import importlib.util
import sys

import numpy as np

import dlx

args = sys.argv[1:]
cuda = None
if "--cuda" in args:
    i = args.index("--cuda")
    cuda = args[i + 1]
    del args[i:i + 2]
torch = None
if importlib.util.find_spec("torch") is not None:
    import torch
else:
    print("install test: torch is not installed for this interpreter: numpy only")

for path in args:
    lib = dlx.load(path)
    assert lib.kernels == ("saxpy",), lib.kernels
    x = np.arange(6, dtype=np.float32)
    y = np.ones(6, dtype=np.float32)
    lib.saxpy(x, y, 2.0)
    assert (y == 2 * x + 1).all(), y
    ys = np.ones(12, dtype=np.float32)[::2]  # strided: the kernel honours strides
    lib.saxpy(x, ys, -1.0)
    assert (ys == 1 - x).all(), ys
    try:
        lib.saxpy(x, np.ones(6, dtype=np.float64), 1.0)
    except TypeError as e:
        assert "float32" in str(e), e
    else:
        raise AssertionError("a float64 y was accepted")
    if torch is not None:
        xt = torch.arange(6, dtype=torch.float32)
        yt = torch.ones(6)
        lib.saxpy(xt, yt, 3.0)
        assert torch.equal(yt, 3 * xt + 1), yt
    print(f"install test: {path}: numpy{' and torch' if torch is not None else ''} ok")

if torch is not None:
    rec = dlx.torch.install()  # dlx.torch resolves after a plain `import dlx`
    assert rec.source in ("native", "native+stream", "addon"), rec
    print(f"install test: torch {torch.__version__}: table {rec.source}"
          + (f" ({rec.path})" if rec.path else ""))

if cuda:
    lib = dlx.load(cuda)
    assert lib.kernels == ("saxpy_cuda",), lib.kernels
    try:  # no GPU needed: the kernel refuses host memory before touching CUDA
        lib.saxpy_cuda(np.ones(4, dtype=np.float32), np.ones(4, dtype=np.float32), 1.0)
    except ValueError as e:
        assert "CUDA device" in str(e), e
    else:
        raise AssertionError("saxpy_cuda accepted host arrays")
    print(f"install test: {cuda}: loads, refuses host memory (runs on a GPU: tests/gpu/run.sh)")
