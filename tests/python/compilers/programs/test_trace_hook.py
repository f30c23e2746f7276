"""The traced-call hook (dlx._trace): a conversion failure asks registered handlers before
raising; a claimed call returns the handler's result, an unclaimed one the original error."""
import numpy as np
import pytest

from conftest import BUILD


class Fake:
    """An object no conversion takes, as a tracer is."""


@pytest.fixture(scope="module")
def libs():
    import dlx

    return dlx.load(BUILD / "kernels" / "sig_kernels.so")


@pytest.fixture
def hook():
    from dlx import _trace

    seen = []

    def handler(kernel, args, kwargs):
        seen.append((kernel, args, kwargs))
        if any(isinstance(a, str) and a == "fail" for a in args):
            raise TypeError("handler refused")
        return "staged"

    pred = lambda o: isinstance(o, Fake)  # noqa: E731
    _trace.register(pred, handler)
    yield seen
    _trace.unregister(pred, handler)


def test_claimed_calls(libs, hook):
    x = np.ones((2, 3), np.float32)
    fake = Fake()
    assert libs.softmax(fake) == "staged"  # a tensor parameter
    assert libs.softmax(x, axis=fake) == "staged"  # a scalar parameter, by keyword
    assert libs.fma3(x[0], x[0].copy(), fake) == "staged"  # after converted tensors
    assert libs.seq(fake) == "staged"  # an undeclared kernel
    k, args, kwargs = hook[1]
    # a declared kernel's arguments arrive bound: declared order, defaults filled
    assert k is libs.softmax and kwargs == {}
    assert len(args) == 3 and args[0] is x and args[1] is None and args[2] is fake
    assert hook[3][0] is libs.seq
    # the handler's own error, the conversion's as its cause
    with pytest.raises(TypeError, match="handler refused") as e:
        libs.softmax(fake, axis="fail")
    assert e.value.__cause__ is not None
    # an eager call still works after claimed ones
    np.testing.assert_allclose(libs.softmax(x).sum(axis=-1), 1, rtol=1e-6)


def test_unclaimed_errors_unchanged(libs, hook):
    with pytest.raises(TypeError) as e:
        libs.softmax([[1.0]])
    assert "softmax()" in str(e.value)
    with pytest.raises(TypeError, match="'axis'"):
        libs.softmax(np.ones((1, 1), np.float32), axis="x")
    assert hook == []
