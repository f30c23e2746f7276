"""dlx_invoke through _core's capsules (dlx_invoke.h): a glue library's view of a kernel,
called without the Python call path, with the plan's checks and the kernel's errors."""
import ctypes
import sys

import numpy as np
import pytest

from conftest import BUILD
from dlpack_ctypes import DLDevice, DLTensor, capsule_address


class Arg(ctypes.Structure):
    class Value(ctypes.Union):
        _fields_ = [("i", ctypes.c_int64), ("f", ctypes.c_double), ("tensor", ctypes.c_void_p),
                    ("seq", ctypes.c_void_p)]

    _fields_ = [("kind", ctypes.c_int32), ("readonly", ctypes.c_int32), ("value", Value)]


class Invoke(ctypes.Structure):
    _fields_ = [("fn", ctypes.c_void_p), ("plan", ctypes.c_void_p), ("name", ctypes.c_char_p),
                ("args", ctypes.POINTER(Arg)), ("nargs", ctypes.c_int32), ("device", DLDevice),
                ("stream", ctypes.c_void_p), ("out", ctypes.c_void_p), ("nout", ctypes.c_int32),
                ("allocate", ctypes.c_void_p), ("allocate_ctx", ctypes.c_void_p),
                ("produced", ctypes.c_int32), ("error_kind", ctypes.c_char * 64),
                ("error", ctypes.c_char * 1024)]


class Handle(ctypes.Structure):
    _fields_ = [("fn", ctypes.c_void_p), ("plan", ctypes.c_void_p), ("name", ctypes.c_char_p)]


RUN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(Invoke))


class Api(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("size", ctypes.c_uint32), ("run", RUN),
                ("bind", ctypes.c_void_p), ("nparams", ctypes.c_void_p),
                ("nresults", ctypes.c_void_p), ("find", ctypes.c_void_p),
                ("check", ctypes.c_void_p), ("run_checked", ctypes.c_void_p),
                ("param_name", ctypes.CFUNCTYPE(ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int32))]


@pytest.fixture(scope="module")
def sk():
    import dlx

    return dlx.load(BUILD / "kernels" / "sig_kernels.so")


def view(a, keep):
    shape = (ctypes.c_int64 * a.ndim)(*a.shape)
    strides = (ctypes.c_int64 * a.ndim)(*[s // a.itemsize for s in a.strides])
    keep += [shape, strides]
    t = DLTensor()
    t.data = a.ctypes.data
    t.device = DLDevice(1, 0)
    t.ndim = a.ndim
    t.dtype.code, t.dtype.bits, t.dtype.lanes = {np.float32: (2, 32, 1), np.int32: (0, 32, 1)}[a.dtype.type]
    t.shape = ctypes.cast(shape, type(t.shape))
    t.strides = ctypes.cast(strides, type(t.strides))
    keep.append(t)
    return ctypes.addressof(t)


def test_capsules(sk):
    import dlx._core as core

    api = Api.from_address(capsule_address(core._invoke_api(), b"dlx.invoke_api"))
    assert api.version == 1 and api.size == ctypes.sizeof(Api)
    k = sk.fma3
    before = sys.getrefcount(k)
    cap = k._handle()
    assert sys.getrefcount(k) == before + 1  # the capsule keeps the kernel alive
    h = Handle.from_address(capsule_address(cap, b"dlx.kernel_handle"))
    assert h.name == b"fma3" and h.fn and h.plan
    # a parameter's name by index (the XLA handler's messages); out of range: "?"
    assert [api.param_name(h.plan, i) for i in (0, 1, 2, 3, -1)] == [b"x", b"y", b"z", b"?", b"?"]
    assert api.param_name(None, 0) == b"?"
    del cap
    assert sys.getrefcount(k) == before


def test_run_checks_and_errors(sk):
    import dlx._core as core

    api = Api.from_address(capsule_address(core._invoke_api(), b"dlx.invoke_api"))
    cap = sk.fma3._handle()
    h = Handle.from_address(capsule_address(cap, b"dlx.kernel_handle"))
    x, y, z = (np.arange(4, dtype=np.float32) + k for k in range(3))
    want = y + x * z
    keep = []
    args = (Arg * 3)()
    for i, a in enumerate((x, y, z)):
        args[i].kind, args[i].value.tensor = 4, view(a, keep)
    inv = Invoke(fn=h.fn, plan=h.plan, name=h.name, args=args, nargs=3)
    assert api.run(ctypes.byref(inv)) == 0, inv.error
    np.testing.assert_array_equal(y, want)
    # the plan's check, before the kernel: y is left alone
    args[2].value.tensor = view(np.zeros(5, np.float32), keep)
    assert api.run(ctypes.byref(inv)) == -1
    assert inv.error_kind == b"ValueError"
    assert inv.error.decode() == "fma3(): 'z' has n=5 where 'x' has n=4"
    np.testing.assert_array_equal(y, want)
