"""dlx's exchange table for numpy.ndarray, used by dlx itself and by any consumer."""
import ctypes
import gc
import sys

import numpy as np
import pytest

import dlx
from dlpack_ctypes import DLManagedTensorVersioned, table_of

INFO_NDIM, INFO_CODE, INFO_BITS, INFO_OFFSET, INFO_DEVTYPE = 0, 1, 2, 3, 4
SHAPE, STRIDES, DATA = 10, 20, 30


def info(k, t, what):
    return k.info(t, what)


def numpy_table():
    return table_of(dlx.exchange_api(np.ndarray))


def test_exchange_api_is_a_capsule_for_type_and_instance():
    for what in (np.ndarray, np.zeros(3)):
        cap = dlx.exchange_api(what)
        assert type(cap).__name__ == "PyCapsule"
        assert 'dlpack_exchange_api' in repr(cap)
    assert dlx.exchange_api(object) is None


def test_managed_export_describes_a_strided_view_and_deleter_releases_it():
    api = numpy_table()
    base = np.arange(24, dtype=np.int32).reshape(4, 6)
    view = base[1:, ::2]
    before = sys.getrefcount(view)
    out = ctypes.POINTER(DLManagedTensorVersioned)()
    assert api.managed_tensor_from_py_object_no_sync(view, ctypes.byref(out)) == 0
    m = out.contents
    t = m.dl_tensor
    assert (m.version.major, m.version.minor) == (1, 3)
    assert m.flags == 0
    assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == (0, 32, 1)
    assert t.ndim == 2 and [t.shape[i] for i in range(2)] == [3, 3]
    assert [t.strides[i] for i in range(2)] == [6, 2]  # elements, not bytes
    assert t.data == view.ctypes.data and t.byte_offset == 0
    assert sys.getrefcount(view) == before + 1
    m.deleter(out)
    assert sys.getrefcount(view) == before


@pytest.mark.parametrize("arr, why", [
    (np.zeros(3, dtype=">f4") if sys.byteorder == "little" else np.zeros(3, dtype="<f4"),
     "byte order"),
    (np.zeros(3, dtype=object), "cannot be expressed"),
    (np.zeros(3, dtype="U3"), "cannot be expressed"),
    (np.zeros(3, dtype=np.longdouble), "cannot be expressed"),
    (np.lib.stride_tricks.as_strided(np.zeros(16, np.float32), shape=(3,), strides=(6,)),
     "not a multiple"),
])
def test_inexpressible_arrays_raise_buffer_error(arr, why, kernels):
    api = numpy_table()
    out = ctypes.POINTER(DLManagedTensorVersioned)()
    with pytest.raises(BufferError, match=why):
        api.managed_tensor_from_py_object_no_sync(arr, ctypes.byref(out))
    with pytest.raises(BufferError, match=f"argument 0 .*{why}"):
        kernels.noop(arr)


def test_kernel_sees_element_strides_and_offsetless_data(kernels):
    a = np.arange(24, dtype=np.float64).reshape(2, 3, 4)
    v = a[:, ::-1, 1::2]
    assert info(kernels, v, INFO_NDIM) == 3
    assert [info(kernels, v, SHAPE + d) for d in range(3)] == [2, 3, 2]
    assert [info(kernels, v, STRIDES + d) for d in range(3)] == [12, -4, 2]
    assert info(kernels, v, DATA) == v.ctypes.data
    assert kernels.sum(v) == pytest.approx(v.sum())


@pytest.mark.parametrize("dtype, code, bits", [
    (np.bool_, 6, 8), (np.int8, 0, 8), (np.uint16, 1, 16), (np.int64, 0, 64),
    (np.float16, 2, 16), (np.float32, 2, 32), (np.complex64, 5, 64), (np.complex128, 5, 128)])
def test_dtypes(kernels, dtype, code, bits):
    a = np.zeros(2, dtype=dtype)
    assert (info(kernels, a, INFO_CODE), info(kernels, a, INFO_BITS)) == (code, bits)


def test_zero_d_and_empty_arrays(kernels):
    assert info(kernels, np.ones((), np.float32), INFO_NDIM) == 0
    assert kernels.sum(np.full((), 5, np.float32)) == 5.0
    e = np.zeros((0, 3), np.float32)
    assert kernels.sum(e) == 0.0
    assert [info(kernels, e, SHAPE + d) for d in range(2)] == [0, 3]


def test_kernel_writes_in_place_and_readonly_is_reported(kernels):
    a = np.zeros((3, 4), np.float32)
    kernels.fill(a[:, 1], 7.0)
    assert a[:, 1].tolist() == [7.0] * 3 and a.sum() == 21.0
    a.setflags(write=False)
    assert kernels.is_readonly(a) == 1
    with pytest.raises(ValueError, match="read-only"):
        kernels.fill(a, 1.0)


def test_return_new_tensor_without_tensor_args_is_numpy(kernels):
    r = kernels.arange(5)
    assert isinstance(r, np.ndarray) and r.dtype == np.float32
    assert r.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    r2 = kernels.new_tensor(0, 64, 2, 3)
    assert r2.shape == (2, 3) and r2.dtype == np.int64
    with pytest.raises(TypeError, match="numpy has no dtype"):
        kernels.new_tensor(4, 16, 2)  # bfloat16


def test_allocation_failing_inside_kernel_leaks_nothing(kernels):
    gc.collect()
    with pytest.raises(RuntimeError, match="failed after allocating"):
        kernels.alloc_then_fail()


def test_many_calls_do_not_grow_refcounts(kernels):
    a = np.ones(8, np.float32)
    before = sys.getrefcount(a)
    for _ in range(1000):
        kernels.noop(a, a, a)
    assert sys.getrefcount(a) == before
