"""numpy's own __dlpack__ through dlx's protocol path, and numpy 2's dimensions through
dlx's numpy table. Runs under both interpreters: numpy 2 (the venv) exports versioned
capsules, honours max_version and copy and flags read-only arrays; numpy 1.24 (Debian)
exports legacy capsules only and refuses read-only arrays. Each test states what each
version must do, so neither passes by doing nothing."""
import ctypes
import sys

import numpy as np
import pytest

from dlpack_ctypes import DLManagedTensorVersioned

NUMPY2 = int(np.__version__.split(".")[0]) >= 2
needs_numpy2 = pytest.mark.skipif(
    not NUMPY2, reason=f"numpy {np.__version__}: versioned DLPack export needs numpy >= 2")
IS_COPIED = 2


class Producer:
    """Speaks only __dlpack__, delegating to a numpy array: dlx takes the protocol path.
    Records the keywords dlx passed and the capsule numpy returned; `force` adds keywords
    (copy=...) the way a producer's own policy would."""

    def __init__(self, inner, **force):
        self.inner, self.force, self.calls, self.capsules = inner, force, [], []

    def __dlpack__(self, **kw):
        self.calls.append(dict(kw))
        cap = self.inner.__dlpack__(**{**kw, **self.force})
        self.capsules.append(repr(cap).split('"')[1])
        return cap

    def __dlpack_device__(self):
        return self.inner.__dlpack_device__()


class LegacyProducer(Producer):
    """A producer from before DLPack 1.0: no keywords at all."""

    def __dlpack__(self, stream=None):
        return super().__dlpack__()


def test_protocol_path_asks_for_a_versioned_capsule(kernels):
    a = np.arange(6, dtype=np.float32)
    before = sys.getrefcount(a)
    p = type("Fresh", (Producer,), {})(a)  # a new type: dlx remembers refusals per type
    assert kernels.sum(p) == 15.0
    kernels.fill(p, 2.0)  # a view, not a copy: the kernel writes numpy's memory
    assert a.tolist() == [2.0] * 6
    if NUMPY2:
        assert p.calls == [{"max_version": (1, 3)}] * 2
        assert p.capsules == ["dltensor_versioned"] * 2
    else:  # numpy 1.24 rejects max_version; dlx retries without it and takes the legacy
        # one, and remembers for the type: the second call asks without it at once
        assert p.calls == [{"max_version": (1, 3)}, {}, {}]
        assert p.capsules == ["dltensor"] * 2
    del p
    assert sys.getrefcount(a) == before  # every export's deleter ran


def test_legacy_only_producer(kernels):
    a = np.arange(12, dtype=np.int64).reshape(3, 4)[:, ::2]
    p = LegacyProducer(a)
    assert kernels.sum(p) == a.sum()
    assert [kernels.info(p, 20 + d) for d in range(2)] == [4, 2]  # element strides
    assert p.capsules == ["dltensor"] * 3  # one per call


def test_readonly_array_through_dlpack(kernels):
    a = np.arange(4, dtype=np.float32)
    a.setflags(write=False)
    p = Producer(a)
    if not NUMPY2:  # numpy 1.24 cannot signal read-only, so it refuses to export
        with pytest.raises(BufferError, match=r"argument 0 \(Producer\): .*readonly"):
            kernels.sum(p)
        return
    assert kernels.sum(p) == 6.0
    assert kernels.is_readonly(p) == 1  # the versioned capsule's READ_ONLY flag reached it
    with pytest.raises(ValueError, match="read-only"):
        kernels.fill(p, 9.0)
    assert a.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert kernels.is_readonly(Producer(np.zeros(2, np.float32))) == 0


@needs_numpy2
def test_copy_requested_by_the_producer(kernels):
    a = np.arange(4, dtype=np.float64)
    p = Producer(a, copy=True)
    kernels.fill(p, 7.0)  # writes numpy's copy, which the deleter then frees
    assert a.tolist() == [0.0, 1.0, 2.0, 3.0]
    cap = a.__dlpack__(max_version=(1, 3), copy=True)
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    m = ctypes.cast(get(cap, b"dltensor_versioned"),
                    ctypes.POINTER(DLManagedTensorVersioned)).contents
    assert m.flags & IS_COPIED  # what dlx received above: numpy's own copy
    assert kernels.sum(Producer(a, copy=False)) == 6.0


@needs_numpy2
def test_max_version_too_old_for_numpy2(kernels):
    """A consumer asking for (0, 8) gets a legacy capsule from numpy 2: the same fallback."""
    a = np.ones(3, np.float32)

    class Old(Producer):
        def __dlpack__(self, **kw):
            return super().__dlpack__(**{**kw, "max_version": (0, 8)})

    p = Old(a)
    assert kernels.sum(p) == 3.0 and p.capsules == ["dltensor"]


@pytest.mark.parametrize("ndim", [9, 32, 64])
def test_many_dimensions(kernels, ndim):
    """numpy 2 allows 64 dimensions (1.24: 32); beyond the per-argument scratch (8) dlx's
    numpy table exports a managed tensor, and __dlpack__ goes the protocol path."""
    limit = 64 if NUMPY2 else 32
    if ndim > limit:
        pytest.skip(f"numpy {np.__version__} allows at most {limit} dimensions")
    a = np.arange(6, dtype=np.float32).reshape((1,) * (ndim - 2) + (2, 3))
    v = a[..., ::2]
    assert kernels.info(v, 0) == ndim
    assert kernels.sum(v) == v.sum()
    assert kernels.sum(Producer(v)) == v.sum()
    kernels.fill(v, 1.0)
    assert a.sum() == 4 * 1.0 + 1 + 4  # columns 0 and 2 set to 1, column 1 kept (1, 4)
