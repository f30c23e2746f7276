"""The call path under bad input (issue 25, "Hardening II"): read-only tensors behind a
table's view export, stream handles >= 2**63, complex numbers given as floats, empty
tensors and `contig`, errors that name the kernel and the parameter, dlx_error with an
exception class that cannot be built from a message, one dimension limit for arguments
and results, and kernels that cannot be deleted from their library.

Kernels: tests/kernels/hardening_calls.c; tensors on "devices": tests/fixtures/dlx_fixture.c
(host memory behind them); __dlpack__-only producers: tests/fixtures/dlpack_only."""
import json
import sys

import numpy as np
import pytest

import dlx

from conftest import BUILD, ROOT

sys.path.insert(0, str(ROOT / "tests" / "fixtures" / "dlpack_only"))
from dlpack_only import Recorder  # noqa: E402

CPU, CUDA = 1, 2


@pytest.fixture(scope="module")
def hk():
    return dlx.load(BUILD / "kernels" / "hardening_calls.so")


@pytest.fixture(scope="module")
def sk():
    return dlx.load(BUILD / "kernels" / "sig_kernels.so")


@pytest.fixture()
def no_providers():
    yield
    for tp in dlx._core._stream_providers():
        dlx.register_stream_provider(tp, None)


def f32(n):
    return np.zeros(n, np.float32)


def raised(exc_type, fn, *args, **kwargs):
    with pytest.raises(exc_type) as info:
        fn(*args, **kwargs)
    return info.value


# ---- 1. read-only tensors behind a table's view export ---------------------------------

@pytest.mark.parametrize("device", [(CPU, 0), (CUDA, 0)])
def test_mut_refuses_a_readonly_tensor_of_a_view_export_table(fx, hk, device):
    ro = fx.tensor([1.0, 2.0], device=device, readonly=True)
    e = raised(ValueError, hk.fill_mut, ro, 3.0)
    assert str(e) == "fill_mut(): 'out' is read-only, but the kernel writes it (f32[n] mut)"
    assert ro.tolist() == [1.0, 2.0]  # never written
    w = fx.tensor([1.0, 2.0], device=device)
    fx.reset_stats()
    hk.fill_mut(w, 3.0)
    assert w.tolist() == [3.0, 3.0]
    s = fx.stats()  # a mut parameter learns its flags through the owned export, released
    assert s["managed_exports"] == 1 and s["deleted"] == 1 and s["view_exports"] == 0


def test_non_mut_tensors_keep_the_view_export(fx, hk):
    fx.reset_stats()
    assert hk.count_contig(fx.tensor([1.0, 2.0, 3.0], device=(CUDA, 0))) == 3
    s = fx.stats()
    assert s["view_exports"] == 1 and s["managed_exports"] == 0


@pytest.mark.parametrize("device", [(CPU, 0), (CUDA, 0)])
def test_unsigned_kernel_learns_readonly_of_a_view_export(fx, hk, device):
    ro = fx.tensor([1.0, 2.0], device=device, readonly=True)
    w = fx.tensor([1.0, 2.0], device=device)
    a = f32(2)
    a.flags.writeable = False
    fx.reset_stats()
    # the view export carries no flags: answered 0 for `ro` before ABI 1.2
    assert hk.readonly_flags(ro, w, a, f32(2), 1, 2.0) == (1, 0, 1, 0, 0, 0)
    s = fx.stats()  # asked: the owned export of ro once (then remembered), of w twice
    assert s["view_exports"] == 2 and s["managed_exports"] == 3 and s["deleted"] == 3
    assert hk.readonly_nogil(ro) == 1 and hk.readonly_nogil(w) == 0


def test_a_kernel_that_does_not_ask_pays_no_owned_export(fx, hk):
    fx.reset_stats()
    assert hk.count_contig(fx.tensor([1.0, 2.0], readonly=True)) == 2
    s = fx.stats()
    assert s["view_exports"] == 1 and s["managed_exports"] == 0


def test_asking_keeps_a_recorded_error(fx, hk):
    with pytest.raises(ValueError, match=r"^readonly_after_error\(\): recorded first$"):
        hk.readonly_after_error(fx.tensor([1.0], readonly=True))


def test_mut_still_refuses_readonly_numpy(hk):
    a = f32(2)
    a.flags.writeable = False
    with pytest.raises(ValueError, match=r"^fill_mut\(\): 'out' is read-only"):
        hk.fill_mut(a, 1.0)


# ---- 2. stream handles >= 2**63 --------------------------------------------------------

@pytest.mark.parametrize("handle", [2**63, 2**64 - 1, 2**64 - 2])
def test_large_stream_handles_reach_dlpack_unsigned(fx, examples, handle):
    p = Recorder(fx.tensor([1.0, 2.0], device=(CUDA, 0)))
    with dlx.stream(handle):
        examples.report.report_stream(p)
    assert p.streams == [handle]  # never negative: -1 would mean "do not synchronize"


def test_large_stream_handle_from_a_provider(fx, examples, no_providers):
    dlx.register_stream_provider(Recorder, lambda t, i: 2**64 - 1)
    p = Recorder(fx.tensor([1.0, 2.0], device=(CUDA, 0)))
    examples.report.report_stream(p)
    assert p.streams == [2**64 - 1]


# ---- 3. complex numbers are no floats --------------------------------------------------

@pytest.mark.parametrize("value", [np.complex128(1 + 2j), np.complex64(1 + 2j), 1 + 2j,
                                   np.complex128(3)])
def test_float_parameters_refuse_complex(hk, sk, value):
    e = raised(TypeError, hk.named, f32(2), s=value)
    assert str(e) == f"named(): 's' must be float, got {type(value).__module__}." \
                     f"{type(value).__name__}".replace("builtins.", "")
    e = raised(TypeError, hk.named, f32(2), fs=[1.0, value])
    assert str(e).startswith("named(): 'fs' must be floats, got a list whose element 1 is ")
    with pytest.raises(TypeError, match=r"^kinds\(\): 'b' must be float"):
        sk.kinds(1, value)


def test_unsigned_kernels_refuse_complex_scalars(kernels):
    with pytest.raises(TypeError, match=r"^echo_float\(\): argument 0 .*complex"):
        kernels.echo_float(np.complex128(1 + 2j))
    with pytest.raises(TypeError, match=r"^echo_float\(\): argument 0 \(list\): element 1 is "
                                        r"numpy.complex64"):
        kernels.echo_float([1.0, np.complex64(1j)])
    assert kernels.echo_float(np.float32(0.5)) == 0.5  # real numpy scalars still are floats


# ---- 4. contig and empty tensors --------------------------------------------------------

@pytest.mark.parametrize("shape, strides", [((0, 5), (0, 0)), ((5, 0), (0, 0)),
                                            ((2, 0, 3), (4, 8, 16))])
def test_empty_tensors_are_contiguous_whatever_their_strides(hk, shape, strides):
    x = np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), shape=shape, strides=strides)
    assert hk.count_contig(x) == 0


def test_contig_still_refuses_strided_tensors(hk):
    x = np.zeros((3, 4), np.float32)[:, ::2]
    with pytest.raises(ValueError, match=r"^count_contig\(\): 'x' must be C-contiguous"):
        hk.count_contig(x)


# ---- 6. errors name the kernel and the parameter ---------------------------------------

class RaisingIndex:
    def __index__(self):
        raise ValueError("no index today")


class WrongFloat:
    def __float__(self):
        return "not a float"


class Shrinking:
    """An __index__ that empties the list it is in."""

    def __init__(self, lst):
        self.lst = lst

    def __index__(self):
        self.lst.clear()
        return 1


def check_named(e, text, cause_type):
    assert str(e).startswith(text), str(e)
    assert isinstance(e.__cause__, cause_type), repr(e.__cause__)


def test_int_parameter_errors_are_named(hk):
    e = raised(ValueError, hk.named, f32(2), n=RaisingIndex())
    check_named(e, "named(): 'n': no index today", ValueError)
    e = raised(TypeError, hk.named, f32(2), n=np.array([1, 2]))
    check_named(e, "named(): 'n' must be int, got numpy.ndarray", TypeError)
    e = raised(TypeError, hk.named, f32(2), n=np.zeros((0,), np.int64))
    check_named(e, "named(): 'n' must be int, got numpy.ndarray", TypeError)
    e = raised(OverflowError, hk.named, f32(2), n=2**70)
    assert str(e) == f"named(): 'n' = {2**70} does not fit in 64 bits"
    e = raised(OverflowError, hk.named, f32(2), n=10**100000)  # no repr on 3.11+
    assert str(e) == "named(): 'n' (an int of 332193 bits) does not fit in 64 bits"


def test_float_parameter_errors_are_named(hk):
    e = raised(TypeError, hk.named, f32(2), s=WrongFloat())
    check_named(e, "named(): 's': ", TypeError)
    assert "__float__ returned non-float" in str(e)
    e = raised(OverflowError, hk.named, f32(2), s=2**2000)
    check_named(e, "named(): 's': int too large to convert to float", OverflowError)


def test_sequence_and_str_errors_are_named(hk):
    e = raised(ValueError, hk.named, f32(2), ns=[1, RaisingIndex()])
    check_named(e, "named(): 'ns': no index today", ValueError)
    e = raised(TypeError, hk.named, f32(2), fs=[1.0, WrongFloat()])
    check_named(e, "named(): 'fs': ", TypeError)
    e = raised(OverflowError, hk.named, f32(2), ns=[1, 2**64])
    check_named(e, "named(): 'ns': element 1 does not fit in 64 bits", OverflowError)
    lst = [1, 2, 3]
    lst[0] = Shrinking(lst)
    e = raised(RuntimeError, hk.named, f32(2), ns=lst)
    assert str(e) == "named(): 'ns': list changed size during conversion"
    e = raised(ValueError, hk.named, f32(2), t="a\ud800b")
    check_named(e, "named(): 't' must be a str with a UTF-8 form", UnicodeEncodeError)


@pytest.mark.parametrize("dtype", [object, ">f4", [("a", "i4"), ("b", "f4")]])
def test_inexpressible_dtype_of_a_declared_tensor_is_a_type_error(hk, dtype):
    e = raised(TypeError, hk.named, np.zeros(2, dtype=dtype))
    check_named(e, "named(): 'x' must be f32[n]: numpy dtype ", BufferError)
    e = raised(TypeError, hk.named, f32(2), g=np.zeros(2, dtype=dtype))
    check_named(e, "named(): 'g' must be tensor?: ", BufferError)


class BrokenProducer:
    def __init__(self, where):
        self.where = where

    def __dlpack_device__(self):
        if self.where == "device":
            raise OSError("no device today")
        return (CUDA, 0)

    def __dlpack__(self, **kwargs):
        raise OSError("no export today")


def test_tensor_errors_name_the_parameter_not_the_position(fx, hk, no_providers):
    e = raised(OSError, hk.named, f32(2), g=BrokenProducer("device"))
    check_named(e, "named(): 'g': no device today", OSError)
    e = raised(OSError, hk.named, f32(2), g=BrokenProducer("export"))
    check_named(e, "named(): 'g': no export today", OSError)
    e = raised(ValueError, hk.named, fx.tensor([1.0], device=(CUDA, 0)),
               g=fx.tensor([1.0], device=(CUDA, 1)))
    assert str(e).startswith("named(): 'x' is on cuda:0 but 'g' is on cuda:1;")

    def provider(t, i):
        raise LookupError("no stream today")

    dlx.register_stream_provider(Recorder, provider)
    e = raised(LookupError, hk.named, Recorder(fx.tensor([1.0], device=(CUDA, 0))))
    check_named(e, "named(): 'x': stream provider: no stream today", LookupError)


def test_unsigned_kernels_keep_positions(kernels):
    e = raised(OSError, kernels.noop, 1, BrokenProducer("device"))
    check_named(e, "noop(): argument 1 (BrokenProducer): no device today", OSError)


def test_a_long_kernel_name_is_never_cut(hk):
    name = next(k for k in hk.kernels if len(k) > 300)
    e = raised(ValueError, getattr(hk, name))
    assert str(e) == f"{name}(): long and failing"
    e = raised(TypeError, getattr(hk, name), "x")
    assert str(e) == f"{name}(): 'x' must be int, got str"


# ---- 7. dlx_error with a class that needs other arguments ------------------------------

class NeedsTwo(Exception):
    def __init__(self, a, b):
        super().__init__(a, b)


@pytest.mark.parametrize("kind", ["json.JSONDecodeError", "UnicodeDecodeError",
                                  "ExceptionGroup", f"{__name__}.NeedsTwo"])
def test_unconstructible_kinds_fall_back_to_runtime_error(sk, kind):
    if kind == "ExceptionGroup" and sys.version_info < (3, 11):
        pytest.skip("ExceptionGroup is 3.11's")
    e = raised(RuntimeError, sk.raise_kind, kind, "custom words")
    assert type(e) is RuntimeError and str(e) == f"raise_kind(): {kind}: custom words"


def test_unconstructible_kind_from_a_nogil_worker(sk):
    e = raised(RuntimeError, sk.nogil_worker, True, kind="json.JSONDecodeError")
    assert type(e) is RuntimeError
    assert str(e) == "nogil_worker(): json.JSONDecodeError: raised on a worker thread"


def test_constructible_dotted_kinds_still_raise_themselves(sk):
    e = raised(ValueError, sk.raise_kind, "builtins.ValueError", "boom")
    assert type(e) is ValueError and str(e) == "raise_kind(): boom"
    import subprocess

    e = raised(subprocess.SubprocessError, sk.raise_kind, "subprocess.SubprocessError", "x")
    assert str(e) == "raise_kind(): x"


# ---- 12. one dimension limit: the framework's ------------------------------------------

def test_results_have_no_dimension_limit_of_dlx(fx, hk):
    like = fx.tensor([1.0], device=(CUDA, 0))
    r = hk.new_ndim(32, like)  # the fixture's own limit
    assert r.ndim == 32
    # beyond it the table refuses, in its own words: dlx adds no limit of its own (it
    # refused more than 64 before, while arguments of any ndim were taken)
    e = raised(ValueError, hk.new_ndim, 65, like)
    assert str(e) == "new_ndim(): dlx_fixture: ndim 65 outside 0..32"
    maxdims = 64 if np.lib.NumpyVersion(np.__version__) >= "2.0.0" else 32
    assert hk.new_ndim(maxdims).ndim == maxdims
    with pytest.raises(ValueError, match=r"^new_ndim\(\): numpy supports at most"):
        hk.new_ndim(maxdims + 1)


# ---- 13. kernels cannot be deleted -----------------------------------------------------

def test_kernels_cannot_be_deleted():
    lib = dlx.load(BUILD / "kernels" / "hardening_calls.so")
    with pytest.raises(AttributeError, match="cannot delete kernel 'named' of .*belong"):
        del lib.named
    lib.named(f32(2))  # still there, still itself
    assert isinstance(lib.named, dlx.Kernel)
    lib.named = print  # rebinding is the caller's business; lib["named"] stays the kernel
    with pytest.raises(AttributeError, match="cannot delete kernel 'named'"):
        del lib.named
    lib.extra = 1  # other names: as on any object
    del lib.extra
    with pytest.raises(AttributeError):
        del lib.extra
