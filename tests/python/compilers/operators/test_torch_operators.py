"""dlx operators keep the contracts of torch's own (issue 30, items 9 and 10): a kernel
called with no tensor (a factory function) is a callable operator on the CPU, eager,
compiled and under fake tensors; every operator carries torch.Tag.pt2_compliant_tag, as
torch.library.custom_op's do, so torch.compile takes it under only_allow_pt2_compliant_ops,
and torch.library.opcheck holds for it.

Compiles use dynamo's eager backend except one inductor run (a small machine)."""
import pytest

from conftest import BUILD, run_python

torch = pytest.importorskip("torch")

NEW_TORCH = tuple(int("".join(c for c in p if c.isdigit()) or 0)
                  for p in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 5)
pytestmark = pytest.mark.skipif(not NEW_TORCH, reason=f"torch {torch.__version__} < 2.5")
NS = "dlx_factory_ops"
COMPILE_NS = "dlx_opcheck_ops"  # compile_kernels loaded anew: not test_torch_compile's


@pytest.fixture(scope="module")
def lib():
    import dlx

    return dlx.load(BUILD / "kernels" / "factory_kernels.so")


@pytest.fixture(scope="module")
def reg(lib):
    import dlx.torch

    return dlx.torch.register(lib, NS)


@pytest.fixture(scope="module")
def compile_ops():
    import dlx
    import dlx.torch

    lib = dlx.load(BUILD / "kernels" / "compile_kernels.so")
    return dlx.torch.register(lib, COMPILE_NS).ops


def test_factory_kernels_are_callable_operators(reg):
    assert {"ones3", "pair", "filled"} <= set(reg.ops) and not reg.skipped
    assert reg.implementation == "addon"
    ops = torch.ops.dlx_factory_ops
    out = ops.ones3(4)
    assert out.dtype == torch.float32 and out.device.type == "cpu"
    assert out.tolist() == [4.0, 4.0, 4.0]
    a, b = ops.pair(3)
    assert (a.dtype, b.dtype) == (torch.int64, torch.float64)
    assert a.tolist() == [3, 3] and b.tolist() == [2.5]
    assert ops.pair(-1, b=0.5)[1].tolist() == [0.5]
    assert ops.filled().tolist() == [7.0, 7.0]  # an optional tensor given None: no tensor
    assert ops.filled(torch.tensor([1.0, 2.0])).tolist() == [2.0, 3.0]  # the C++ CPU kernel


def test_factory_operators_from_python_implementation(tmp_path):
    """Where the addon cannot be built, the Python implementation serves calls without
    tensors too (the eager call returns numpy arrays there: the operator returns tensors).
    In a child: its registration of the library must not replace this process's."""
    r = run_python(f"""
import torch, dlx
from dlx import torch_ops
def no_addon():
    raise RuntimeError("no compiler here")
lib = dlx.load({str(BUILD / "kernels" / "factory_kernels.so")!r})
reg = torch_ops.register(lib, "dlx_factory_py", no_addon)
assert reg.implementation.startswith("python (torch addon unavailable"), reg.implementation
ops = torch.ops.dlx_factory_py
a, b = ops.pair(3)
print(type(ops.ones3(2)).__name__, ops.ones3(2).tolist(), a.tolist(), b.tolist(),
      ops.filled().tolist(), ops.filled(torch.ones(2)).tolist())
""")
    assert r.stdout.split(maxsplit=1) == ["Tensor",
                                          "[2.0, 2.0, 2.0] [3, 3] [2.5] [7.0, 7.0] [2.0, 2.0]\n"]


def test_factory_operators_under_fake_tensors_and_compile(lib, reg):
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

    with FakeTensorMode():
        out = torch.ops.dlx_factory_ops.ones3(2)
        a, b = torch.ops.dlx_factory_ops.pair(2)
    assert isinstance(out, FakeTensor) and out.shape == (3,) and out.dtype == torch.float32
    assert out.device.type == "cpu" and (a.shape, b.dtype) == ((2,), torch.float64)

    def f(n):
        a, b = lib.pair(n)
        return lib.ones3(n) * 2, a + 1, b

    for backend in ("eager", "inductor"):
        torch._dynamo.reset()
        got = torch.compile(f, backend=backend, fullgraph=True)(5)
        assert [t.tolist() for t in got] == [[10.0] * 3, [6, 6], [2.5]], backend


def test_opcheck_holds_for_factory_operators(reg):
    ops = torch.ops.dlx_factory_ops
    for op, args in [(ops.ones3.default, (2,)), (ops.pair.default, (3, 0.5)),
                     (ops.filled.default, ()), (ops.filled.default, (torch.ones(2),))]:
        result = torch.library.opcheck(op, args)
        assert all(v == "SUCCESS" for v in result.values()), (op, result)


def test_operators_are_pt2_compliant(reg, compile_ops):
    tag = torch.Tag.pt2_compliant_tag
    for op in (*reg.ops.values(), *compile_ops.values()):
        assert tag in op.default.tags, op
    x = torch.tensor([1.0, 2.0, 3.0])

    def f(x):
        return torch.ops.dlx_opcheck_ops.outer(x, x).sum() + torch.ops.dlx_factory_ops.ones3(2)

    torch._dynamo.reset()
    with torch._dynamo.config.patch(only_allow_pt2_compliant_ops=True):
        got = torch.compile(f, backend="eager", fullgraph=True)(x)
    assert got.tolist() == [38.0] * 3


# opcheck's checks: schema, autograd registration, fake tensor, AOT dispatch static/dynamic.
OPCHECKED = [  # compile_kernels' operators
    ("scale", lambda: (torch.rand(3), 3.0)),
    ("add3", lambda: (torch.rand(3), torch.rand(3), torch.zeros(3))),
    ("outer", lambda: (torch.rand(3), torch.rand(2))),
    ("minmax", lambda: (torch.rand(2, 3),)),
    ("kinds", lambda: (torch.rand(3),)),
    ("positives", lambda: (torch.tensor([1.0, -2.0, 3.0]),)),
]


@pytest.mark.parametrize("name,args", OPCHECKED, ids=[n for n, _ in OPCHECKED])
def test_opcheck_holds_for_compile_kernels(compile_ops, name, args):
    result = torch.library.opcheck(compile_ops[name].default, args())
    assert all(v == "SUCCESS" for v in result.values()), result


def test_register_refuses_what_is_no_library_or_namespace(lib, monkeypatch):
    import gc
    import sys

    import dlx.torch

    unraisable = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    for bad in ("__init__", "__name__", "__class__", "__getattr__", "higher_order",
                "loaded_libraries", "load_library", "import_module", "_dir"):
        with pytest.raises(ValueError, match=f"namespace '{bad}' cannot hold operators"):
            dlx.torch.register(lib, bad)
    gc.collect()
    assert unraisable == []  # no torch.library.Library half made, finalized with an error
    with pytest.raises(TypeError, match="expected a dlx.Library .*, got str"):
        dlx.torch.register("x", "dlx_ns")
    with pytest.raises(TypeError, match="got the kernel 'ones3'; register its library"):
        dlx.torch.register(lib.ones3, "dlx_ns")
    with pytest.raises(TypeError, match="namespace must be a str, got int"):
        dlx.torch.register(lib, 3)
    with pytest.raises(ValueError, match="namespace 'a b' is not an identifier"):
        dlx.torch.register(lib, "a b")
