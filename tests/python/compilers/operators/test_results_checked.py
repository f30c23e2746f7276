"""Results checked against the declaration on every path (issue 30, item 4): a kernel whose
result breaks its declared shape, dtype or device is refused with dlx's error naming the
kernel and the result, before anyone reads it: the direct call (numpy, torch), the operator
(torch.ops.NS.k, C++ and the Python fallback), torch.compile (dlx speaks before inductor's
own size assertion or a float64 buffer read as float32) and jax.jit. One C function decides
(dlx_derive_check_result, unit-tested in tests/c/signatures/test_derive.c).

Also the error kinds of a kernel's dlx_error through the operator and compiled code: the
declared class, as the eager call raises it, not RuntimeError.

Kernels: tests/kernels/result_kernels.c."""
import numpy as np
import pytest

from conftest import BUILD, run_python

NS = "dlx_results"


class ShapeError(Exception):
    """A user's exception class a kernel names by its dotted path."""

    class Inner(Exception):
        pass


@pytest.fixture(scope="module")
def lib():
    import dlx

    return dlx.load(BUILD / "kernels" / "result_kernels.so")


def _torch_new():
    try:
        import torch
    except ImportError:
        return None
    v = tuple(int("".join(c for c in p if c.isdigit()) or 0)
              for p in torch.__version__.split("+")[0].split(".")[:2])
    return torch if v >= (2, 5) else None


needs_ops = pytest.mark.skipif(_torch_new() is None, reason="operators need torch >= 2.5")


@pytest.fixture(scope="module")
def ops(lib):
    torch = _torch_new()
    if torch is None:
        pytest.skip("operators need torch >= 2.5")
    import dlx.torch

    reg = dlx.torch.register(lib, NS)
    assert reg.implementation == "addon"
    return getattr(torch.ops, NS)


# (kernel, keyword arguments, exception, message) for x = [0, 1, 2, 3] (f32)
BAD = [
    ("too_long", {}, ValueError, "too_long(): result 0 must be f32[n] with n=4 (from 'x'), got f32[5]"),
    ("wrong_dtype", {}, TypeError,
     "wrong_dtype(): result 0 must be f32[n] with n=4 (from 'x'), got f64[4]"),
    ("other_dtype", {}, TypeError, "other_dtype(): result 0 must be f32|f64[n] with dtype f32 "
                                   "(from 'x'), n=4 (from 'x'), got f64[4]"),
    ("wrong_rank", {}, ValueError,
     "wrong_rank(): result 0 must be f32[n] with n=4 (from 'x'), got f32[4, 1]"),
    ("positives_at", {"skew": True}, ValueError,
     "positives_at(): result 1 must be i64[k] with k=3 (from result 0), got i64[4]"),
]


def x4(framework):
    if framework == "numpy":
        return np.arange(4, dtype=np.float32)
    torch = pytest.importorskip("torch")
    return torch.arange(4, dtype=torch.float32)


@pytest.mark.parametrize("framework", ["numpy", "torch"])
@pytest.mark.parametrize("name, kwargs, exc, words", BAD)
def test_direct_call_refuses(lib, framework, name, kwargs, exc, words):
    with pytest.raises(exc) as e:
        lib[name](x4(framework), **kwargs)
    assert str(e.value) == words


@pytest.mark.parametrize("framework", ["numpy", "torch"])
def test_direct_call_keeps_what_the_declaration_allows(lib, framework):
    x = x4(framework)
    v, at = lib.positives_at(x - 1)  # a data-dependent size: k=2
    assert list(v) == [1.0, 2.0] and list(at) == [2, 3]
    v, at = lib.positives_at(x - 9)  # k=0
    assert len(v) == 0 and len(at) == 0
    rows = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    if framework == "torch":
        import torch

        rows = torch.from_numpy(rows)
    sums = lib.row_sums(rows)  # "...": x's batch, [2, 3]
    assert tuple(sums.shape) == (2, 3) and float(sums[1, 2]) == 20 + 21 + 22 + 23
    with pytest.raises(ValueError) as e:
        lib.row_sums(rows, bad=True)
    assert str(e.value) == ("row_sums(): result 0 must be f32[...] with ...=[2, 3] (from 'x'), "
                            "got f32[3, 3]")
    assert list(lib.fail_with(x)) == [1.0, 2.0, 3.0, 4.0]


def test_direct_call_kinds(lib):
    x = x4("numpy")
    with pytest.raises(TypeError) as e:
        lib.int_for_tensor(x)
    assert str(e.value) == "int_for_tensor(): result 0 must be f32[n] with n=4 (from 'x'), got int"
    with pytest.raises(TypeError) as e:
        lib.tensor_for_int(x)
    assert str(e.value) == "tensor_for_int(): result 0 must be int, got a tensor f32[4]"


def test_direct_call_device(lib, fx):
    CUDA = 2
    x = fx.tensor((4,), device=(CUDA, 0))
    with pytest.raises(ValueError) as e:
        lib.on_cpu(x)
    assert str(e.value) == ("on_cpu(): result 0 must be f32[n] with n=4 (from 'x') on cuda:0 "
                            "(the call's device), got f32[4] on cpu:0")
    assert lib.on_cpu_declared(x).shape == (4,)  # declared cpu: where it belongs


# ---- the operator ----------------------------------------------------------------------

@needs_ops
@pytest.mark.parametrize("name, kwargs, exc, words", BAD)
def test_operator_refuses(ops, name, kwargs, exc, words):
    with pytest.raises(exc) as e:
        getattr(ops, name)(x4("torch"), **kwargs)
    assert str(e.value) == words


@needs_ops
def test_operator_keeps_what_the_declaration_allows(ops):
    import torch

    v, at = ops.positives_at(x4("torch") - 1)
    assert v.tolist() == [1.0, 2.0] and at.tolist() == [2, 3]
    rows = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
    assert ops.row_sums(rows).shape == (2, 3)
    with pytest.raises(ValueError, match=r"^row_sums\(\): result 0 must be f32\[\.\.\.\] with "
                                         r"\.\.\.=\[2, 3\] \(from 'x'\), got f32\[3, 3\]$"):
        ops.row_sums(rows, bad=True)


@needs_ops
def test_python_implementation_refuses_too():
    """Where the addon cannot be built the operators run the kernel through the direct call:
    the same check, the same words, the same kinds."""
    r = run_python(f"""
import torch, dlx, dlx.torch as dt
def no_addon(*args, **kwargs):
    raise RuntimeError("no compiler here")
dt.ensure_addon = no_addon
lib = dlx.load({str(BUILD / "kernels" / "result_kernels.so")!r})
reg = dt.register(lib, "py_results")
print(reg.implementation.split()[0])
x = torch.arange(4.0)
for call in (lambda: torch.ops.py_results.too_long(x),
             lambda: torch.ops.py_results.wrong_dtype(x),
             lambda: torch.ops.py_results.fail_with(x, "KeyError")):
    try:
        call()
    except Exception as e:
        print(type(e).__name__, str(e))
""")
    assert r.stdout.splitlines() == [
        "python",
        "ValueError too_long(): result 0 must be f32[n] with n=4 (from 'x'), got f32[5]",
        "TypeError wrong_dtype(): result 0 must be f32[n] with n=4 (from 'x'), got f64[4]",
        "KeyError 'fail_with(): boom'",
    ]


# ---- torch.compile: dlx speaks first ---------------------------------------------------

@needs_ops
@pytest.mark.parametrize("name, exc", [("too_long", ValueError), ("wrong_dtype", TypeError)])
def test_compiled_refuses_before_inductor(lib, ops, name, exc):
    """Inductor trusts the fake shapes: a longer result failed its own size assertion
    ('expected size 5==4'), a float64 one was read as float32 (wrong values, no error)."""
    import torch

    torch._dynamo.reset()
    kernel = lib[name]
    f = torch.compile(lambda x: kernel(x) + 1, backend="inductor", fullgraph=True)
    with pytest.raises(exc) as e:
        f(x4("torch"))
    assert str(e.value) == next(w for n, _, _, w in BAD if n == name)


# ---- the kinds of a kernel's dlx_error -------------------------------------------------

KINDS = [
    ("KeyError", KeyError, "'fail_with(): boom'"),
    ("MemoryError", MemoryError, "fail_with(): boom"),
    ("OverflowError", OverflowError, "fail_with(): boom"),
    ("asyncio.CancelledError", None, "fail_with(): boom"),
    (f"{__name__}.ShapeError", ShapeError, "fail_with(): boom"),
    (f"{__name__}.ShapeError.Inner", ShapeError.Inner, "fail_with(): boom"),
]


def _cls(cls):
    if cls is None:
        import asyncio

        return asyncio.CancelledError
    return cls


@pytest.mark.parametrize("kind, cls, words", KINDS)
def test_direct_call_kind(lib, kind, cls, words):
    with pytest.raises(_cls(cls)) as e:
        lib.fail_with(x4("numpy"), kind)
    assert type(e.value) is _cls(cls) and str(e.value) == words


@needs_ops
@pytest.mark.parametrize("kind, cls, words", KINDS)
def test_operator_kind(ops, kind, cls, words):
    with pytest.raises(_cls(cls)) as e:
        ops.fail_with(x4("torch"), kind)
    assert type(e.value) is _cls(cls) and str(e.value) == words


@needs_ops
def test_operator_kind_fallbacks(ops):
    """What the eager call makes RuntimeError stays RuntimeError: a class that cannot be
    built from one message, a kind that names nothing."""
    for kind in ("json.JSONDecodeError", "NoSuchError", "no_such_module.Error"):
        with pytest.raises(RuntimeError, match=rf"^{kind}: fail_with\(\): boom$"):
            ops.fail_with(x4("torch"), kind)
    with pytest.raises(ValueError, match=r"^fail_with\(\): boom$"):
        ops.fail_with(x4("torch"), "ValueError")


@needs_ops
@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compiled_kind(lib, ops, backend):
    """The code torch.compile generates calls the operator from Python: the kernel's kind
    reaches the caller as declared."""
    import torch

    torch._dynamo.reset()
    x = x4("torch")
    for kind, cls, words in KINDS:
        f = torch.compile(lambda x, kind=kind: lib.fail_with(x, kind) * 2, backend=backend,
                          fullgraph=True)
        with pytest.raises(_cls(cls)) as e:
            f(x)
        assert type(e.value) is _cls(cls) and str(e.value) == words, kind
    f = torch.compile(lambda x: lib.fail_with(x) * 2, backend=backend, fullgraph=True)
    assert f(x).tolist() == [2.0, 4.0, 6.0, 8.0]


# ---- jax.jit: the same check, the same words -------------------------------------------

@pytest.mark.parametrize("name, kwargs, exc, words", BAD[:4])
def test_jax_jit_refuses(lib, name, kwargs, exc, words):
    jax = pytest.importorskip("jax")
    import dlx.jax  # noqa: F401

    kernel = lib[name]
    with pytest.raises(jax.errors.JaxRuntimeError) as e:
        jax.block_until_ready(jax.jit(lambda x: kernel(x, **kwargs))(x4("numpy")))
    assert f"{exc.__name__}: {words}" in str(e.value)
