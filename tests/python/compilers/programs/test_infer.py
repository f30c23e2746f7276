"""What compilers read from a declaration (dlx_derive.c, kernel._plan/_derived/_schema) and
dlx._infer's abstract evaluation over it: the same binding, checks and wording as the eager
call, result shapes from size symbols, data-dependent sizes, and the reasons for what
cannot be derived. Framework-neutral: numpy arrays stand in for traced values."""
import numpy as np
import pytest

from conftest import BUILD

from dlx import _infer


@pytest.fixture(scope="module")
def sk():
    import dlx

    return dlx.load(BUILD / "kernels" / "sig_kernels.so")


NAMES = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64", np.dtype(np.int64): "i64"}


def shape(x):
    return x.shape


def dtype(x):
    return NAMES.get(x.dtype, str(x.dtype))


def infer(k, *args, fresh=None, **kwargs):
    bound = _infer.bind(k, args, kwargs)
    return _infer.results(k, bound, shape=shape, dtype=dtype,
                          fresh=fresh or (lambda sym: pytest.fail("no fresh size expected")))


def eager_error(k, *args, **kwargs):
    with pytest.raises((TypeError, ValueError)) as e:
        k(*args, **kwargs)
    return type(e.value), str(e.value)


def infer_error(k, *args, **kwargs):
    with pytest.raises((TypeError, ValueError)) as e:
        infer(k, *args, **kwargs)
    return type(e.value), str(e.value)


def test_plan_is_structural(sk):
    plan = sk.softmax._plan
    assert plan[0] == ("x", "tensor", False, Ellipsis, ("f32",), ("m", "n"), frozenset())
    assert plan[1] == ("out", "tensor", True, None, ("f32",), ("m", "n"), frozenset({"mut"}))
    assert plan[2] == ("axis", "int", False, -1, None, None, frozenset())
    assert sk.sizes._plan[0][4:6] == (None, ("a", Ellipsis, "b"))
    assert sk.dtypes._plan[0][4] == ("f16", "bf16", "i8", "u8", "bool", "c64")
    assert sk.seq._plan is None and sk.seq._derived is None and sk.seq._schema is None


def test_schema_and_derived(sk):
    with pytest.raises(ValueError, match=r"softmax\(\): 'out' is an optional mut tensor"):
        sk.softmax._schema
    assert sk.minmax_rows._schema == "minmax_rows(Tensor x) -> (Tensor, Tensor)"
    assert sk.fma3._schema == "fma3(Tensor x, Tensor(a!) y, Tensor z) -> ()"
    with pytest.raises(ValueError, match=r"reduce\(\): result 0 is a scalar"):
        sk.reduce._schema
    results, eqs = sk.minmax_rows._derived
    assert results == (("f32", (("dim", 0, 0, False, "m"),)),) * 2
    assert eqs == ()
    assert sk.fma3._derived == ((), (("n", (0, 0, False), (1, 0, False)),
                                     ("n", (0, 0, False), (2, 0, False))))
    with pytest.raises(ValueError, match=r"zeros\(\): result 0 declares no shape"):
        sk.zeros._derived


def test_bind_words_as_eager(sk):
    assert _infer.bind(sk.softmax, (1,), {"axis": 0}) == [1, None, 0]
    cases = [(sk.softmax, (), {}), (sk.softmax, (1, 2, 3, 4), {}), (sk.softmax, (1,), {"axes": 1}),
             (sk.softmax, (1,), {"x": 1}), (sk.softmax, (1, 2, 3, 4), {"x": 1}),
             (sk.softmax, (1, 2, 3, 4), {"q": 1}), (sk.fma3, (), {}), (sk.fma3, (1,), {}),
             (sk.fma3, (1, 2, 3, 4), {}), (sk.fma3, (), {"z": 1})]
    for k, args, kwargs in cases:
        want = eager_error(k, *args, **kwargs)
        with pytest.raises(TypeError) as e:
            _infer.bind(k, args, kwargs)
        assert (TypeError, str(e.value)) == want


def test_results_and_checks_match_eager(sk):
    x = np.zeros((3, 4), np.float32)
    assert infer(sk.minmax_rows, x) == [((3,), "f32"), ((3,), "f32")]
    assert infer(sk.fma3, np.zeros(3, np.float32), np.zeros(3, np.float32),
                 np.zeros(3, np.float32)) == []
    bad = [
        (np.zeros(3, np.float32), np.zeros(4, np.float32), np.zeros(3, np.float32)),  # symbol
        (np.zeros(3, np.float64), np.zeros(3, np.float32), np.zeros(3, np.float32)),  # dtype
        (np.zeros((3, 1), np.float32), np.zeros(3, np.float32), np.zeros(3, np.float32)),  # rank
    ]
    for args in bad:
        assert infer_error(sk.fma3, *args) == eager_error(sk.fma3, *args)
    assert "'y' has n=4 where 'x' has n=3" in infer_error(sk.fma3, *bad[0])[1]


def test_fresh_sizes_and_batch(sk):
    import dlx

    lib = dlx.load(BUILD / "kernels" / "compile_kernels.so")
    made = []

    def fresh(sym):
        made.append(sym)
        return 100 + len(made)

    x = np.zeros((2, 5, 3), np.float64)
    # "x: f32|f64[..., n] -> (f32|f64[..., j], i64[j])": j only in results, one size for both
    assert infer(lib.topk_like, x, fresh=fresh) == [((2, 5, 101), "f64"), ((101,), "i64")]
    assert made == ["j"]
    assert infer(lib.square, x) == [((2, 5, 3), "f64")]
    assert infer(lib.minmax, np.zeros((4, 2), np.float32)) == [((4,), "f32"), ((4,), "f32"), ((), "i64")]
    with pytest.raises(ValueError, match=r"count\(\): result 0 is a scalar"):
        lib.count._schema
    assert lib.kinds._schema == (
        'kinds(Tensor x, SymInt i=1, float f=0.5, bool b=False, str s="once", '
        'SymInt[] li=[1, 2], float[] lf=[0.25], Tensor? o=None) -> Tensor')
