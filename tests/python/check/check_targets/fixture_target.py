"""A `python -m dlx check` target: the fixture framework's tensors carrying one of its table
variants, chosen by the DLX_FIXTURE_VARIANT environment variable ("full" by default).
DLX_FIXTURE_ATTR says how the type carries it: "capsule" (default), "legacy" (the int
address in __c_dlpack_exchange_api__), or a Python literal put in __c_dlpack_exchange_api__
("legacy=1") or in __dlpack_c_exchange_api__ ("attr=12345") as it is.
The hooks tell the checker how to make tensors, what the framework thinks of them and how
to select a stream on a thread (docs/check.md)."""
import ast
import contextlib
import itertools
import os

import dlx_fixture as fx

VARIANT = os.environ.get("DLX_FIXTURE_VARIANT", "full")


class TYPE(fx.Tensor):
    pass


TYPE.__name__ = TYPE.__qualname__ = f"Fixture_{VARIANT}"
ATTR = os.environ.get("DLX_FIXTURE_ATTR", "capsule")
if ATTR == "capsule":
    TYPE.__dlpack_c_exchange_api__ = fx.table_capsule(VARIANT)
else:
    TYPE.__dlpack_c_exchange_api__ = None  # hide the base type's capsule
    if ATTR == "legacy":
        TYPE.__c_dlpack_exchange_api__ = fx.table_address(VARIANT)
    else:
        where, _, literal = ATTR.partition("=")
        name = "__c_dlpack_exchange_api__" if where == "legacy" else "__dlpack_c_exchange_api__"
        setattr(TYPE, name, ast.literal_eval(literal))

DTYPES = ["float32", "float64", "int32", "int64", "uint8", "bool"]
DL = {"float32": (2, 32, 1), "float64": (2, 64, 1), "int32": (0, 32, 1), "int64": (0, 64, 1),
      "uint8": (1, 8, 1), "bool": (6, 8, 1)}
DEVICES = [(fx.kDLCUDA, 0), (fx.kDLROCM, 0), (fx.kDLExtDev, 1)]
CPU = (fx.kDLCPU, 0)


def make(shape, dtype):
    return TYPE(tuple(shape), dtype=dtype, device=CPU)


def variants(dtype):
    base = make((4, 6), dtype)
    return {"contiguous": base, "strided": base.transpose(), "0-d": make((), dtype),
            "empty": make((0, 3), dtype), "sliced": base.slice(1, 3),
            "readonly": TYPE((4, 6), dtype=dtype, device=CPU, readonly=True)}


def describe(t):
    return {"shape": list(t.shape), "strides": list(t.strides), "ptr": t.data_ptr,
            "dtype": DL[t.dtype], "device": t.device, "readonly": t.readonly}


_cookies = itertools.count(0x5000)


@contextlib.contextmanager
def stream(device_type, device_id):
    """A new stream selected on this thread; yields what current_work_stream must say."""
    old = fx.current_stream(device_type, device_id)
    value = next(_cookies) * 16
    fx.set_stream(device_type, device_id, value)
    try:
        yield value
    finally:
        fx.set_stream(device_type, device_id, old or None)


def current_stream(device_type, device_id):
    return fx.current_stream(device_type, device_id)
