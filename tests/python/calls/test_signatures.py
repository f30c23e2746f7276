"""Declared kernel signatures (interface.md, "Kernel signatures"): binding, defaults, checks
before the kernel runs, several results, dotted exception kinds, nogil, introspection,
stubs, and kernels built against the ABI before signatures."""
import ast
import inspect
import re
import subprocess
import sys
import threading

import numpy as np
import pytest

from conftest import BUILD, PYPATH

CPU, CUDA, EXT = 1, 2, 12


@pytest.fixture(scope="module")
def sk():
    import dlx

    return dlx.load(BUILD / "kernels" / "sig_kernels.so")


def f32(*shape):
    return np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)


def python_error(fn, *args, **kwargs):
    with pytest.raises(TypeError) as e:
        fn(*args, **kwargs)
    return str(e.value)


# ---- binding: CPython's own words for an equivalent def ----------------------------------

def softmax(x, out=None, axis=-1):  # the Python twin of the declared softmax
    pass


def no_args():
    pass


@pytest.mark.parametrize("args, kwargs", [
    ((), {}),
    ((1, 2, 3, 4), {}),
    ((1,), {"axes": 1}),
    ((1,), {"x": 1}),
    ((), {"out": 1}),
    ((1, 2, 3), {"out": 1}),
    # a surplus of positional arguments is reported after the keywords' errors, as a def's
    ((1, 2, 3, 4), {"axes": 1}),
    ((1, 2, 3, 4), {"x": 1}),
    ((1, 2, 3, 4), {"out": 1}),
    ((1, 2), {"out": 1, "zz": 1}),
])
def test_arity_errors_read_like_python(sk, args, kwargs):
    x = f32(2, 2)
    real = tuple(x if a == 1 else a for a in args)
    want = python_error(softmax, *args, **kwargs)
    with pytest.raises(TypeError) as e:
        sk.softmax(*real, **{k: x for k in kwargs})
    assert str(e.value) == want


@pytest.mark.parametrize("wrong", [
    "axes", "Axis", "AXIS", "ou", "outt", "OUT", "axis_", "xx", "X", "a", "weights",
    "ax", "_axis", "oax", "axis" * 11, "x" * 45, "ämpel", "óut"])
def test_misspelt_keywords_read_like_python(sk, wrong):
    """CPython 3.13+ says "Did you mean 'axis'?" for a near name; a kernel says the same."""
    x = f32(2, 2)
    want = python_error(softmax, 1, **{wrong: 1})
    with pytest.raises(TypeError) as e:
        sk.softmax(x, **{wrong: x})
    assert str(e.value) == want


def test_a_keyword_name_that_is_no_str_is_refused_as_unexpected(sk):
    """Python refuses such names before any call; a caller in C can still pass one, and the
    kernel refuses it as a def's unexpected keyword (nothing compares it as a str)."""
    import ctypes

    vectorcall = ctypes.pythonapi.PyObject_Vectorcall
    vectorcall.restype = ctypes.py_object
    vectorcall.argtypes = [ctypes.py_object, ctypes.POINTER(ctypes.py_object), ctypes.c_size_t,
                           ctypes.py_object]
    x = f32(2, 2)
    for name in (1, b"out", None):
        args = (ctypes.py_object * 2)(x, x)
        with pytest.raises(TypeError, match=r"^softmax\(\) got an unexpected keyword argument "
                           + re.escape(f"'{name}'") + "$"):
            vectorcall(sk.softmax, args, 1, (name,))
    out = np.zeros((2, 2), np.float32)
    args = (ctypes.py_object * 2)(x, out)
    assert vectorcall(sk.softmax, args, 1, ("out",)) is None  # a str: bound as usual
    np.testing.assert_allclose(out, sk.softmax(x))


def test_arity_of_a_kernel_without_parameters(sk):
    assert sk.no_args() == 0
    with pytest.raises(TypeError) as e:
        sk.no_args(1)
    assert str(e.value) == python_error(no_args, 1)


def two(a, b, c=0):
    pass


def test_missing_several_lists_them_like_python(sk):
    with pytest.raises(TypeError) as e:
        sk.handshake_gil()
    assert str(e.value) == ("handshake_gil() missing 3 required positional arguments: "
                            "'flags', 'me', and 'timeout_ms'")
    with pytest.raises(TypeError) as e:
        sk.handshake_gil(timeout_ms=1)
    assert str(e.value) == python_error(two, c=1).replace("two", "handshake_gil").replace(
        "'a' and 'b'", "'flags' and 'me'")


def test_keywords_and_defaults(sk):
    x = f32(3, 4)
    out = np.zeros((3, 4), np.float32)
    assert sk.softmax(x=x, out=out) is None  # wrote into out=, returned nothing
    np.testing.assert_allclose(out.sum(axis=1), 1, rtol=1e-6)
    np.testing.assert_allclose(sk.softmax(x, axis=1), out)
    # a keyword that is not the interned name object still binds (slow compare path)
    name = "".join(["o", "u", "t"])
    out2 = np.zeros((3, 4), np.float32)
    sk.softmax(x, **{name: out2})
    np.testing.assert_allclose(out2, out)
    with pytest.raises(ValueError, match=r"^softmax\(\): axis 0 is not supported$"):
        sk.softmax(x, None, 0)
    assert sk.kinds(1) == (1, 0.5, 0, 3, 3, 0.25, 6)
    assert sk.kinds(a=2, f=[1, 2], d="héllo", c=True, b=3) == (2, 3.0, 1, 6, 3, 3.0, 6)


def test_keywords_in_declared_order_bind_as_the_same_call(sk):
    """Keywords naming the parameters after the positional ones, in declared order, are read
    where vectorcall put them (nothing to bind); any other keywords are bound. Every form
    of one call gives the same values, and an error names the parameter its value went to."""
    vals = (2, 3.0, True, "héllo", (1, 2, 3), [0.5, 0.25])
    names = ("a", "b", "c", "d", "e", "f")
    want = (2, 3.0, 1, 6, 6, 0.75, 6)
    assert sk.kinds(*vals) == want
    for npos in range(len(vals) + 1):  # the first npos by position, the rest by keyword, in order
        assert sk.kinds(*vals[:npos], **dict(zip(names[npos:], vals[npos:]))) == want, npos
    assert sk.kinds(**dict(zip(reversed(names), reversed(vals)))) == want  # reversed: bound
    class Name(str):  # equal names that are never the interned objects: compared by value
        pass

    assert sk.kinds(**dict(zip(map(Name, names), vals))) == want
    assert sk.kinds(*vals[:2], **dict(zip(map(Name, names[2:]), vals[2:]))) == want
    assert sk.kinds(vals[0], b=vals[1]) == (2, 3.0, 0, 3, 3, 0.25, 6)  # in order, defaults after
    # a wrong value given by keyword in order: its own parameter's error
    with pytest.raises(TypeError, match=r"^kinds\(\): 'c' must be bool, got int$"):
        sk.kinds(a=1, b=1.0, c=1, d="x", e=(), f=())
    with pytest.raises(TypeError, match=r"^kinds\(\): 'e' must be ints, got str$"):
        sk.kinds(1, 1.0, c=False, d="x", e="no", f=())
    # a keyword that repeats a positional parameter is refused, as by a def
    with pytest.raises(TypeError, match=r"^kinds\(\) got multiple values for argument 'a'$"):
        sk.kinds(1, a=1, b=1.0, c=False, d="x", e=())
    # tensors by keyword in order reach the same checks as by position
    x, out = f32(3, 4), np.zeros((3, 4), np.float32)
    sk.softmax(x=x, out=out, axis=-1)
    np.testing.assert_allclose(out, sk.softmax(x))
    with pytest.raises(ValueError, match=r"^softmax\(\): 'out' is read-only"):
        ro = np.zeros((3, 4), np.float32)
        ro.flags.writeable = False
        sk.softmax(x=x, out=ro, axis=-1)


def test_declared_kinds_are_normalised_and_checked(sk):
    # an int for a float parameter arrives as a float, numpy scalars are numbers
    assert sk.kinds(np.int64(5), np.float32(0.25))[:2] == (5, 0.25)
    cases = [
        ((1.5,), {}, r"^kinds\(\): 'a' must be int, got float$"),
        ((1, "x"), {}, r"^kinds\(\): 'b' must be float, got str$"),
        ((1, 1.0, 1), {}, r"^kinds\(\): 'c' must be bool, got int$"),
        ((1,), {"d": b"abc"}, r"^kinds\(\): 'd' must be str, got bytes$"),
        ((1,), {"e": 3}, r"^kinds\(\): 'e' must be ints, got int$"),
        ((1,), {"e": (1, 2.5)}, r"^kinds\(\): 'e' must be ints, got a tuple whose element 1 is float$"),
        ((1,), {"f": ["a"]}, r"^kinds\(\): 'f' must be floats, got a list whose element 0 is str$"),
        ((None,), {}, r"^kinds\(\): 'a' must be int, got NoneType$"),
        ((1,), {"d": None}, r"^kinds\(\): 'd' must be str, got NoneType$"),
    ]
    for args, kwargs, msg in cases:
        with pytest.raises(TypeError, match=msg):
            sk.kinds(*args, **kwargs)
    with pytest.raises(OverflowError, match="'a'"):
        sk.kinds(2**70)
    with pytest.raises(TypeError, match=r"^softmax\(\): 'x' must be f32\[m, n\], got int$"):
        sk.softmax(3)
    with pytest.raises(TypeError, match=r"^softmax\(\): 'x' must be f32\[m, n\], got NoneType$"):
        sk.softmax(None)


def test_int_lists_floats_and_strings(sk):
    torch = pytest.importorskip("torch")
    assert sk.zeros(torch.Size([2, 3])).shape == (2, 3)
    z = sk.zeros([4], dtype="i64")
    assert z.dtype == np.int64 and z.tolist() == [0, 0, 0, 0]
    assert sk.zeros(()).shape == ()
    with pytest.raises(ValueError, match="dtype 'f16'"):
        sk.zeros((1,), "f16")
    big = list(range(100))  # beyond the per-argument scratch: heap, released after the call
    assert sk.kinds(1, e=big, f=[0.5] * 40)[4:6] == (sum(big), 20.0)
    assert sk.reduce(np.array([1.0, 5.0, 2.0]), "max") == 5.0
    assert sk.reduce(np.array([1.0, 5.0, 2.0])) == 8.0


def test_shape_checks_name_kernel_and_parameter(sk):
    x = f32(3, 4)
    with pytest.raises(ValueError, match=r"^softmax\(\): 'out' has n=5 where 'x' has n=4$"):
        sk.softmax(x, np.zeros((3, 5), np.float32))
    with pytest.raises(ValueError, match=r"^softmax\(\): 'out' has m=2 where 'x' has m=3$"):
        sk.softmax(x, out=np.zeros((2, 4), np.float32))
    with pytest.raises(ValueError, match=r"'x' must be f32\[m, n\], got 1 dimension of shape \[4\]"):
        sk.softmax(f32(4))
    with pytest.raises(TypeError, match=r"^softmax\(\): 'out' must be f32\[m, n\] mut\?, got dtype f64$"):
        sk.softmax(x, np.zeros((3, 4)))
    ro = np.zeros((3, 4), np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match=r"^softmax\(\): 'out' is read-only, but the kernel writes it"):
        sk.softmax(x, ro)
    with pytest.raises(ValueError, match=r"^minmax_rows\(\): 'x' must be C-contiguous"):
        sk.minmax_rows(f32(4, 6)[:, ::2])
    lo, hi = sk.minmax_rows(f32(2, 3))
    assert lo.tolist() == [0, 3] and hi.tolist() == [2, 5]
    with pytest.raises(TypeError, match=r"'x' must be f16\|bf16\|i8\|u8\|bool\|c64\[\.\.\.\], got dtype i32"):
        sk.dtypes(np.zeros(2, np.int32))
    for dt in (np.float16, np.int8, np.uint8, np.bool_, np.complex64):
        sk.dtypes(np.zeros((2, 1), dt))


# A call whose first argument is an ndarray runs the arrays' own loop (call.c:
# signed_arrays) and hands over to the general one at the first other object: every
# position and every kind of hand-over reads as the general loop alone would.
@pytest.mark.parametrize("where", [0, 1, 2])
def test_an_array_call_refuses_at_every_position_as_the_general_loop(sk, where):
    def args():
        return [np.ones(4, np.float32), np.full(4, 2.0, np.float32), np.full(4, 3.0, np.float32)]
    name = "xyz"[where]
    wrong = args()
    wrong[where] = np.ones(4)  # f64
    with pytest.raises(TypeError, match=rf"^fma3\(\): '{name}' must be f32\[n\]"):
        sk.fma3(*wrong)
    if where:
        short = args()
        short[where] = np.ones(5, np.float32)
        with pytest.raises(ValueError, match=rf"^fma3\(\): '{name}' has n=5 where 'x' has n=4$"):
            sk.fma3(*short)
    ro = args()
    ro[1].flags.writeable = False
    with pytest.raises(ValueError, match=r"^fma3\(\): 'y' is read-only, but the kernel writes it"):
        sk.fma3(*ro)
    same = args()
    same[1] = np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), (4,), (0,))
    with pytest.raises(ValueError, match=r"^fma3\(\): 'y'"):  # its elements share memory
        sk.fma3(*same)
    ok = args()
    sk.fma3(*ok)
    assert ok[1].tolist() == [5.0] * 4  # y += x * z


def test_an_array_call_hands_over_to_the_general_loop(sk):
    x = f32(2, 3)
    assert np.allclose(sk.softmax(x, None, 1), sk.softmax(x))  # None: optional tensor
    out = np.zeros((2, 3), np.float32)
    sk.softmax(x, out, -1)  # arrays, then an exact int: all in the arrays' loop
    assert np.allclose(out, sk.softmax(x))
    sk.softmax(x, out=out, axis=np.int64(-1))  # keywords, a numpy integer for the int
    assert np.allclose(out, sk.softmax(x))
    with pytest.raises(TypeError, match=r"^softmax\(\): 'axis'"):
        sk.softmax(x, out, "1")
    y = np.zeros(3, np.float32)
    sk.fma3(np.ones(3, np.float32), y, memoryview(np.arange(3, dtype=np.float32)))
    assert y.tolist() == [0.0, 1.0, 2.0]  # a buffer after the arrays: the general loop
    torch = pytest.importorskip("torch")
    t = torch.zeros(3)
    sk.fma3(np.ones(3, np.float32), t, np.full(3, 2.0, np.float32))
    assert t.tolist() == [2.0, 2.0, 2.0] and t._version == 1  # torch's rules, bumped once
    with pytest.raises(RuntimeError, match=r"^fma3\(\).*requires grad"):
        sk.fma3(np.ones(3, np.float32), torch.zeros(3, requires_grad=True), np.ones(3, np.float32))


def test_size_symbols_and_dlx_size(sk):
    x = np.zeros((2, 7, 1, 5))
    assert sk.sizes(x) == 2
    assert sk.sizes(x, None, "b") == 5
    assert sk.sizes(x, np.zeros((5, 9)), "c") == 9
    assert sk.sizes(np.zeros((3, 4)), None, "b") == 4  # "..." may stand for no dimension
    with pytest.raises(ValueError, match=r"'x' must be tensor\[a, \.\.\., b\], got 1 dimension"):
        sk.sizes(np.zeros(3))
    with pytest.raises(ValueError, match=r"^sizes\(\): 'y' has b=4 where 'x' has b=5$"):
        sk.sizes(x, np.zeros((4, 9)))
    with pytest.raises(ValueError, match=r"size symbol 'c' is not bound in this call"):
        sk.sizes(x, None, "c")
    with pytest.raises(ValueError, match=r"'zz' is not a size symbol"):
        sk.sizes(x, None, "zz")
    with pytest.raises(ValueError, match=r"'n' is not a size symbol"):
        sk.size_unsigned()


def test_devices_and_contiguity_with_fixture_tensors(sk, fx):
    cpu = fx.tensor((2,), device=(CPU, 0))
    cuda = fx.tensor((2,), device=(CUDA, 0))
    npu = fx.tensor((2,), device=(EXT, 0))
    sk.placed(cpu, cuda_t=cuda, gpu_t=cuda)  # one device per call (issue 7 item 16)
    sk.placed(cpu, gpu_t=npu, npu_t=npu)
    sk.placed(None, gpu_t=cuda)
    with pytest.raises(ValueError, match=r"^placed\(\): 'cpu_t' must be tensor cpu\?, got a tensor on cuda:0$"):
        sk.placed(cuda)
    with pytest.raises(ValueError, match=r"'cuda_t' must be tensor cuda\?, got a tensor on npu"):
        sk.placed(cpu, npu)
    with pytest.raises(ValueError, match=r"'gpu_t' must be tensor gpu\?, got a tensor on cpu:0"):
        sk.placed(cpu, gpu_t=cpu)
    with pytest.raises(ValueError, match=r"'npu_t' must be tensor npu\?"):
        sk.placed(cpu, npu_t=cuda)
    with pytest.raises(ValueError, match=r"'c' must be C-contiguous"):
        sk.placed(cpu, c=fx.tensor((3, 4), device=(CPU, 0)).transpose())


def test_a_failed_check_releases_every_export_once(sk, fx):
    class ManagedOnly(fx.Tensor):
        pass

    ManagedOnly.__dlpack_c_exchange_api__ = fx.table_capsule("managed_only")
    a = ManagedOnly((2,), device=(CPU, 0))
    b = ManagedOnly((2,), device=(CUDA, 0))
    fx.reset_stats()
    with pytest.raises(ValueError, match="'cuda_t'"):
        sk.placed(a, a)  # the second fails its device check after two exports
    with pytest.raises(ValueError, match="'npu_t'"):
        sk.placed(a, b, b, b)  # four exports, the last fails
    with pytest.raises(TypeError, match="'c_' |got an unexpected"):
        sk.placed(a, c_=a)  # binding fails before anything is exported
    s = fx.stats()
    assert s["managed_exports"] == 6 and s["deleted"] == 6
    sk.placed(a, b, b)
    assert fx.stats()["deleted"] == 9


def test_several_results(sk):
    assert sk.fewer_results() == 7  # fewer than declared: fine, one value is itself
    with pytest.raises(RuntimeError, match=r"^too_many_results\(\): returned more than the 1 result"):
        sk.too_many_results()
    n, v, f = sk.nogil_services(4)
    assert n.tolist() == [0, 1, 2, 3] and v == 4 and f == 0.5


def test_dotted_exception_kinds(sk, tmp_path, monkeypatch):
    pkg = tmp_path / "sigerrs"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "errors.py").write_text(
        "class ShapeError(ValueError):\n    pass\n\n"
        "class Outer:\n    class Inner(LookupError):\n        pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError) as e:
        sk.raise_kind("sigerrs.errors.ShapeError", "bad shape")
    assert type(e.value).__name__ == "ShapeError" and str(e.value) == "raise_kind(): bad shape"
    assert type(e.value).__module__ == "sigerrs.errors"
    with pytest.raises(LookupError) as e:
        sk.raise_kind("sigerrs.errors.Outer.Inner")
    assert type(e.value).__qualname__ == "Outer.Inner"
    with pytest.raises(KeyError):
        sk.raise_kind("KeyError")
    with pytest.raises(RuntimeError, match=r"^raise_kind\(\): nosuch\.module\.Err: boom$"):
        sk.raise_kind("nosuch.module.Err")
    with pytest.raises(RuntimeError, match=r"^raise_kind\(\): os\.path: boom$"):  # not an exception class
        sk.raise_kind("os.path")
    with pytest.raises(RuntimeError, match=r"^raise_kind\(\): sigerrs\.errors\.Nope: boom$"):
        sk.raise_kind("sigerrs.errors.Nope")


# ---- introspection ---------------------------------------------------------------------

def test_inspect_signature_doc_and_text(sk, kernels):
    sig = inspect.signature(sk.softmax)
    assert list(sig.parameters) == ["x", "out", "axis"]
    assert sig.parameters["x"].default is inspect.Parameter.empty
    assert sig.parameters["out"].default is None and sig.parameters["axis"].default == -1
    assert sig.parameters["x"].annotation == "f32[m, n]"
    assert sig.return_annotation == "f32[m, n]"
    assert sig.bind(1, axis=2).arguments == {"x": 1, "axis": 2}
    assert sk.softmax.__doc__.startswith(
        "softmax(x: f32[m, n], out: f32[m, n] mut? = None, axis: int = -1) -> f32[m, n]\n")
    assert sk.softmax.signature == ("x: f32[m, n], out: f32[m, n] mut? = None, axis: int = -1 "
                                    "-> f32[m, n]")
    ks = inspect.signature(sk.kinds).parameters
    assert ks["e"].default == (1, 2) and ks["f"].default == (0.25,) and ks["d"].default == "abc"
    assert inspect.signature(sk.minmax_rows).return_annotation == "(f32[m], f32[m])"
    assert "Runs without the GIL" in sk.busy_nogil.__doc__
    # undeclared kernels: (*args), no signature, a doc that says so
    assert str(inspect.signature(kernels.noop)) == "(*args)"
    assert kernels.noop.signature is None
    assert kernels.noop.__doc__.startswith("noop(*args)")
    assert "softmax(x: f32[m, n]" in __import__("pydoc").render_doc(sk.softmax)


def test_stubs_parse_and_carry_the_declarations(tmp_path):
    import os

    env = dict(os.environ, PYTHONPATH=PYPATH)
    r = subprocess.run([sys.executable, "-m", "dlx", "stubs", str(BUILD / "kernels" / "sig_kernels.so")],
                       capture_output=True, text=True, env=env, check=True)
    tree = ast.parse(r.stdout)
    funcs = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}
    assert {"softmax", "zeros", "kinds", "seq", "minmax_rows"} <= set(funcs)
    assert ("def softmax(x: Tensor, out: Optional[Tensor] = None, axis: int = -1) -> Tensor:"
            in r.stdout)
    assert "def zeros(shape: Sequence[int], dtype: str = 'f32') -> Tensor:" in r.stdout
    assert "def minmax_rows(x: Tensor) -> Tuple[Tensor, Tensor]:" in r.stdout
    assert "def seq(*args: Any) -> Any:" in r.stdout
    assert "def placed(cpu_t: Optional[Tensor], " in r.stdout
    compile(r.stdout, "stubs.pyi", "exec")
    bad = subprocess.run([sys.executable, "-m", "dlx", "stubs", str(BUILD / "kernels" / "bad_signature.so")],
                         capture_output=True, text=True, env=env)
    assert bad.returncode == 1 and "column 15" in bad.stderr


# ---- load-time: malformed signatures, ABI versions ---------------------------------------

def test_malformed_signature_is_an_import_error_with_the_column():
    import dlx

    with pytest.raises(ImportError) as e:
        dlx.load(BUILD / "kernels" / "bad_signature.so")
    msg = str(e.value)
    assert "kernel 'broken'" in msg and "malformed signature at column 15" in msg
    assert "x: f32[n], y: f33[n]\n" in msg and msg.endswith("\n                ^")


def test_newer_minor_abi_is_refused():
    import dlx

    minor = dlx._core.ABI_VERSION & 0xFFFF
    with pytest.raises(ImportError, match=rf"kernel 'future' .*built for dlx ABI 1\.99, this dlx is ABI 1\.{minor} \("):
        dlx.load(BUILD / "kernels" / "future_abi.so")


def test_kernels_built_before_signatures_load_and_run():
    import dlx

    old = dlx.load(BUILD / "kernels" / "old_abi.so")
    assert old.kernels == ("old_kinds", "old_new", "old_scale", "old_sum")
    assert old.old_sum.signature is None
    assert old.old_sum(np.ones(4, np.float32)) == 4.0
    x = np.ones(3, np.float32)
    old.old_scale(x, 2)
    assert x.tolist() == [2, 2, 2]
    ro = np.ones(3, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        old.old_scale(ro, 2.0)
    assert old.old_kinds(1, 2.5, None, True, x) == 13024
    assert old.old_kinds("s", (1,), (1.5,)) == 567  # new kinds reach old kernels as numbers
    assert old.old_new().shape == (3,)
    with pytest.raises(TypeError, match="takes no keyword arguments"):
        old.old_sum(x=x)


# ---- unsigned kernels: str, ints, floats, None ---------------------------------------------

def test_unsigned_kernels_take_str_and_number_lists(sk):
    import dlx_fixture  # noqa: F401  (the fixtures are built)

    STR, INTS, FLOATS = 5, 6, 7
    assert sk.seq("héllo") == (STR, 6, 6)
    assert sk.seq((1, 2, 3)) == (INTS, 3, 6)
    assert sk.seq([True, 2]) == (INTS, 2, 3)
    assert sk.seq(()) == (INTS, 0, 0)
    assert sk.seq([1, 2.5]) == (FLOATS, 2, 3.5)  # mixed: floats
    assert sk.seq([np.float32(0.5), np.int64(2)]) == (FLOATS, 2, 2.5)
    assert sk.floats_of((1, 2, 3)) == 14.0  # ints read as floats, converted once
    assert sk.floats_of(list(range(40))) == float(sum(i * (i + 1) for i in range(40)))
    assert sk.ints_of(list(range(100))) == 100
    with pytest.raises(TypeError, match=r"argument 0: expected a tuple or list of ints, got floats"):
        sk.ints_of([1.5])
    with pytest.raises(TypeError, match=r"argument 0: expected a str, got ints"):
        sk.str_of([1])
    with pytest.raises(TypeError, match=r"argument 0 \(list\): element 1 is str"):
        sk.seq([1, "a"])
    assert sk.none_at(1, None) == 1 and sk.none_at(0) == 0 and sk.none_at(5) == 0


# ---- nogil ---------------------------------------------------------------------------------

def _both(kernel, timeout_ms):
    flags = np.zeros(2, np.int64)
    seen = [None, None]
    barrier = threading.Barrier(2)

    def run(me):
        barrier.wait()
        seen[me] = kernel(flags, me, timeout_ms)

    ts = [threading.Thread(target=run, args=(i,)) for i in (0, 1)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return seen


def test_nogil_kernels_run_in_parallel():
    import dlx

    sk = dlx.load(BUILD / "kernels" / "sig_kernels.so")
    # each waits (up to 20 s) to observe the other running: only possible without the GIL
    assert _both(sk.handshake_nogil, 20000) == [1, 1]
    # with the GIL held, the first to enter gives up after its timeout, then the second runs;
    # a free-threaded CPython has no GIL to hold: every kernel runs in parallel
    if getattr(sys, "_is_gil_enabled", lambda: True)():
        assert sorted(_both(sk.handshake_gil, 300)) == [0, 1]
    else:
        assert _both(sk.handshake_gil, 20000) == [1, 1]


def test_nogil_services_from_a_worker_thread(sk):
    # dlx_error, the allocator and dlx_return_* called from a thread the kernel started
    # (no Python thread state of its own): the error arrives as its own exception class
    # with its message, the results as results
    for _ in range(20):
        with pytest.raises(KeyError, match=r"nogil_worker\(\): raised on a worker thread"):
            sk.nogil_worker(True)
    with pytest.raises(ValueError, match=r"^nogil_worker\(\): raised on a worker thread$"):
        sk.nogil_worker(True, "ValueError")
    t, v = sk.nogil_worker(False)
    assert t.tolist() == [0.0, 1.0, 2.0] and v == 42


def test_nogil_services_take_the_gil(sk):
    for _ in range(50):
        with pytest.raises(KeyError, match="failed without the GIL after allocating"):
            sk.nogil_services(8, True)
    ts = [threading.Thread(target=sk.nogil_services, args=(1000,)) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
