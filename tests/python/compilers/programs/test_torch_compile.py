"""Kernels inside torch.compile and torch.export (interface.md, "Kernels inside
torch.compile"): dlx.torch.register(lib, namespace) makes each declared kernel the operator
torch.ops.<namespace>.<name>, and `lib.NAME` traces to it.

torch.compile is slow on a small machine: the compiled functions use dynamo's counting
backend (no code generation) except one inductor run, tensors are tiny, and each test
compiles few times. The registration is process-wide, shared by the module."""
import numpy as np
import pytest

from conftest import BUILD, run_python

torch = pytest.importorskip("torch")

NEW_TORCH = tuple(int("".join(c for c in p if c.isdigit()) or 0)
                  for p in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 5)
needs_new = pytest.mark.skipif(not NEW_TORCH, reason=f"torch {torch.__version__} < 2.5")
NS = "dlx_test_ops"


@pytest.fixture(scope="module")
def lib():
    import dlx

    return dlx.load(BUILD / "kernels" / "compile_kernels.so")


@pytest.fixture(scope="module")
def reg(lib):
    if not NEW_TORCH:
        pytest.skip(f"torch {torch.__version__} < 2.5")
    import dlx.torch

    reg = dlx.torch.register(lib, NS)

    # square's backward is another dlx kernel. Registered before any test traces the
    # operator: torch's Python dispatcher caches an operator's autograd kernel when AOT
    # autograd first traces it (opcheck does), and a later registration misses that cache.
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return lib.square_grad(x, grad)

    torch.library.register_autograd(f"{NS}::square", backward, setup_context=setup_context)
    return reg


def counter():
    from torch._dynamo.testing import CompileCounter

    return CompileCounter()


def breaks(fn, *args):
    return torch._dynamo.explain(fn)(*args).graph_break_count


@needs_new
def test_registration(lib, reg):
    import dlx
    import dlx.torch

    assert set(reg.ops) == {"scale", "outer", "minmax", "kinds", "positives", "add3", "square",
                            "square_grad", "topk_like", "stream_into"}
    assert reg.ops["outer"] is torch.ops.dlx_test_ops.outer
    assert reg.implementation == "addon"  # C++: a call never enters Python
    assert "declare a signature" in reg.skipped["raw"]
    assert reg.skipped["count"].startswith("result 0 is a scalar")
    assert "'out' is an optional mut tensor" in reg.skipped["maybe_out"]
    assert str(torch.ops.dlx_test_ops.scale.default._schema) == \
        "dlx_test_ops::scale(Tensor(a!) x, float a=2.) -> ()"
    assert dlx.torch.register(lib, NS) is reg  # the same library again: the same registration
    other = dlx.load(BUILD / "kernels" / "sig_kernels.so")
    with pytest.raises(RuntimeError, match="namespace 'dlx_test_ops' is taken by"):
        dlx.torch.register(other, NS)
    with pytest.raises(RuntimeError, match="torch refuses namespace 'aten'"):
        dlx.torch.register(other, "aten")
    # outside tracing lib.NAME is dlx's own call: numpy arrays still work, no operator runs
    x = np.arange(3, dtype=np.float32)
    lib.scale(x)
    assert x.tolist() == [0, 2, 4]
    assert type(lib.scale).__name__ == "Kernel"


@needs_new
def test_operators_run_eagerly(lib, reg):
    x = torch.arange(4.0)
    torch.ops.dlx_test_ops.scale(x, a=0.5)
    assert x.tolist() == [0, 0.5, 1, 1.5]
    assert torch.equal(torch.ops.dlx_test_ops.outer(x, x[:2]), lib.outer(x, x[:2]))
    lo, hi, m = torch.ops.dlx_test_ops.minmax(torch.tensor([[1.0, 3.0], [2.0, -1.0]]))
    assert lo.tolist() == [1, -1] and hi.tolist() == [3, 2] and m.item() == 2
    with pytest.raises(ValueError, match=r"add3\(\): 'y' has n=4 where 'x' has n=3"):
        torch.ops.dlx_test_ops.add3(torch.ones(3), torch.ones(4), torch.ones(3))


def _all_kinds(x, o):
    y = x.clone()
    lib_ = _all_kinds.lib
    lib_.scale(y)                                   # mutates, default a
    lib_.scale(y, a=0.5)                            # keyword
    z = lib_.outer(y, x[:2])                        # allocates [m, n]
    lo, hi, m = lib_.minmax(z)                      # several results
    k1 = lib_.kinds(x)                              # every default
    k2 = lib_.kinds(x, 3, 0.25, True, "twice", (1, 2, 3), (0.5, 1.5), o)
    k3 = lib_.kinds(x, s="twice", o=o, li=[4], f=2)  # keywords, out of order; int for float
    return y, z, lo + hi, m, k1, k2, k3


@needs_new
def test_compiled_equals_eager_without_breaks(lib, reg):
    _all_kinds.lib = lib
    x, o = torch.arange(1.0, 5.0), torch.full((4,), 0.5)
    want = _all_kinds(x, o)
    assert breaks(_all_kinds, x, o) == 0
    cnt = counter()
    got = torch.compile(_all_kinds, backend=cnt, fullgraph=True)(x, o)
    assert cnt.frame_count == 1
    for g, w in zip(got, want):
        assert torch.equal(g, w)
    # the whole stack once: inductor around the operator
    f = torch.compile(lambda x: lib.outer(x, x) * 2 + 1, fullgraph=True)
    assert torch.equal(f(x), lib.outer(x, x) * 2 + 1)


@needs_new
def test_dynamic_shapes_compile_once(lib, reg):
    def f(x, y):
        out = torch.empty_like(x)
        lib.add3(x, y, out)
        return lib.outer(out, y[:2]).sum(1)

    cnt = counter()
    cf = torch.compile(f, backend=cnt, dynamic=True, fullgraph=True)
    for n in (3, 5, 8):
        x, y = torch.rand(n), torch.rand(n)
        assert torch.allclose(cf(x, y), f(x, y))
    assert cnt.frame_count == 1
    # a size-symbol disagreement is a trace-time error in dlx's words
    with pytest.raises(Exception, match=r"add3\(\): 'y' has n=4 where 'x' has n=3"):
        torch.compile(f, backend=counter(), fullgraph=True)(torch.rand(3), torch.rand(4))


@needs_new
def test_data_dependent_size(lib, reg):
    x = torch.tensor([1.0, -2.0, 3.0, -4.0, 5.0])
    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):
        f = torch.compile(lambda x: lib.positives(x) * 2, backend=counter(), fullgraph=True)
        assert torch.equal(f(x), torch.tensor([2.0, 6.0, 10.0]))


SAMPLES = {
    "scale": ((torch.rand(3),), {"a": 3.0}),
    "outer": ((torch.rand(3), torch.rand(2)), {}),
    "minmax": ((torch.rand(2, 3),), {}),
    "kinds": ((torch.rand(3),), {"i": 2, "s": "twice", "o": torch.rand(3)}),
    "positives": ((torch.randn(6),), {}),
    "add3": ((torch.rand(3), torch.rand(3), torch.rand(3)), {}),
    "square": ((torch.rand(2, 3, dtype=torch.float64),), {}),
    "square_grad": ((torch.rand(2, 3), torch.rand(2, 3)), {}),
    "stream_into": ((torch.rand(2), torch.zeros(1, dtype=torch.int64)), {}),
}


@needs_new
def test_opcheck_every_operator(reg):
    assert set(SAMPLES) == set(reg.ops) - {"topk_like"}  # topk_like only declares
    for name, (args, kwargs) in SAMPLES.items():
        result = torch.library.opcheck(reg.ops[name], args, kwargs)
        assert set(result.values()) == {"SUCCESS"}, (name, result)


@needs_new
def test_autograd_with_a_dlx_backward(lib, reg):
    x = torch.rand(2, 3, dtype=torch.float64, requires_grad=True)
    # eager: the operator (lib.square itself stays dlx's direct call, outside autograd)
    assert torch.autograd.gradcheck(torch.ops.dlx_test_ops.square, (x,))
    f = torch.compile(lambda x: lib.square(x).sin(), backend="aot_eager", fullgraph=True)
    assert torch.autograd.gradcheck(f, (x,))
    (g,) = torch.autograd.grad(f(x).sum(), x)
    assert torch.allclose(g, 2 * x * x.detach().pow(2).cos())


@needs_new
@pytest.mark.parametrize("strict", [False, True])
def test_export_keeps_the_operator(lib, reg, strict):
    class M(torch.nn.Module):
        def forward(self, x, y):
            lo, hi, _ = lib.minmax(lib.outer(x, y))
            return lo * hi

    x, y = torch.rand(3), torch.rand(2)
    ep = torch.export.export(M(), (x, y), strict=strict)
    targets = [n.target for n in ep.graph.nodes if n.op == "call_function"]
    assert torch.ops.dlx_test_ops.outer.default in targets
    assert torch.ops.dlx_test_ops.minmax.default in targets
    x, y = torch.rand(3), torch.rand(2)
    assert torch.equal(ep.module()(x, y), M()(x, y))


@needs_new
@pytest.mark.parametrize("strict", [False, True])
def test_a_copy_registered_again_is_that_namespaces_operator(lib, reg, strict):
    """A copy of a registered library (dlx.load of the same file) registered under a taken
    namespace is adopted: the same Registration, and its kernels trace as that namespace's
    operators, whatever other namespaces the file is registered under (in any order)."""
    import dlx
    import dlx.torch

    def exported_targets(copy):
        class M(torch.nn.Module):
            def forward(self, x, y):
                return copy.outer(x, y)

        ep = torch.export.export(M(), (torch.rand(3), torch.rand(2)), strict=strict)
        return {n.target for n in ep.graph.nodes if n.op == "call_function"}

    also_ns = f"dlx_test_ops_also_{int(strict)}"
    also = dlx.torch.register(dlx.load(lib.path), also_ns)
    assert also is not reg and also.file_key == reg.file_key
    assert dlx.torch.register(dlx.load(lib.path), also_ns) is also
    copy = dlx.load(lib.path)
    assert dlx.torch.register(copy, NS) is reg
    assert exported_targets(copy) == {torch.ops.dlx_test_ops.outer.default}
    assert dlx.torch.register(copy, also_ns) is also  # the latest registration speaks
    assert exported_targets(copy) == {getattr(torch.ops, also_ns).outer.default}
    assert exported_targets(lib) == {torch.ops.dlx_test_ops.outer.default}  # lib keeps its own
    # a registration's own library, registered elsewhere and back: each time the latest
    assert dlx.torch.register(also.lib, NS) is reg
    assert exported_targets(also.lib) == {torch.ops.dlx_test_ops.outer.default}
    assert dlx.torch.register(also.lib, also_ns) is also
    assert exported_targets(also.lib) == {getattr(torch.ops, also_ns).outer.default}
    # the direct call under a torch mode is the operator too (the same mapping)
    from torch.overrides import TorchFunctionMode

    seen = []

    class Watch(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen.append(func)
            return func(*args, **(kwargs or {}))

    with Watch():
        also.lib.outer(torch.rand(3), torch.rand(2))
    assert getattr(torch.ops, also_ns).outer.default in seen or \
        getattr(torch.ops, also_ns).outer in seen, seen


@needs_new
@pytest.mark.parametrize("env", [{}, {"DLX_TORCH_TABLE": "native"}])
def test_register_puts_the_addon_table_in_force(env):
    """The addon is built for the operators anyway: before any call chose a table, and with
    DLX_TORCH_TABLE unset, its table serves direct calls too; a choice made stays."""
    r = run_python(f"""
import torch, dlx, dlx.torch as dt
lib = dlx.load({str(BUILD / "kernels" / "compile_kernels.so")!r})
dt.register(lib, "table_ops")
x = torch.zeros(2)
lib.scale(x)
print(dt.installed().source, dt.choice().origin)
""", env=env)
    if env:
        assert r.stdout.split()[:2] == ["native", "DLX_TORCH_TABLE=native"]
    else:
        assert r.stdout.strip() == "addon dlx.torch.register built the addon for its operators"


@needs_new
def test_python_implementation_where_the_addon_cannot_be_built(tmp_path):
    r = run_python(f"""
import torch, dlx, dlx.torch as dt
def no_addon(*args, **kwargs):
    raise RuntimeError("no compiler here")
dt.ensure_addon = no_addon
lib = dlx.load({str(BUILD / "kernels" / "compile_kernels.so")!r})
reg = dt.register(lib, "py_ops")
print(reg.implementation)
x = torch.arange(3.0)
print(torch.ops.py_ops.outer(x, x[:2]).tolist())
try:
    torch.ops.py_ops.add3(x, x[:2], x)
except ValueError as e:
    print(e)
print(dt.installed())
""", env={"DLX_CACHE_DIR": str(tmp_path / "cold")})  # no addon cached: the default is torch's
    lines = r.stdout.splitlines()
    assert lines[0] == "python (torch addon unavailable: RuntimeError: no compiler here)"
    assert lines[1] == "[[0.0, 0.0], [0.0, 1.0], [0.0, 2.0]]"
    assert lines[2] == "add3(): 'y' has n=2 where 'x' has n=3"
    assert lines[3].startswith("Record(source='native'")  # no addon: torch's own table


@needs_new
def test_a_load_meanwhile_does_not_wait_for_the_addon_build(tmp_path):
    """register builds the addon (a minute, the first time) before it takes the lock every
    dlx.load takes: a library loaded meanwhile on another thread does not wait for it."""
    r = run_python(f"""
import threading, dlx, dlx.torch as dt
entered, gate, out = threading.Event(), threading.Event(), []
def slow_build(*args, **kwargs):
    entered.set()
    if not gate.wait(20):
        raise RuntimeError("a dlx.load waited for the build")
    raise RuntimeError("no compiler here")
dt.ensure_addon = slow_build
lib = dlx.load({str(BUILD / "kernels" / "compile_kernels.so")!r})
t = threading.Thread(target=lambda: out.append(dt.register(lib, "meanwhile_ops")))
t.start()
assert entered.wait(60)
other = dlx.load({str(BUILD / "kernels" / "factory_kernels.so")!r})
gate.set()
t.join()
print(out[0].implementation)
""", env={"DLX_CACHE_DIR": str(tmp_path / "cold")})
    assert r.stdout.strip() == "python (torch addon unavailable: RuntimeError: no compiler here)"


@needs_new
def test_a_register_torch_refuses_puts_no_table_in_force():
    """The addon built ahead of register's lock goes in force only once the operators are
    defined: a namespace torch refuses (another Library holds it) leaves the choice open."""
    r = run_python(f"""
import torch, dlx, dlx.torch as dt
held = torch.library.Library("held_ops", "DEF")
lib = dlx.load({str(BUILD / "kernels" / "compile_kernels.so")!r})
try:
    dt.register(lib, "held_ops")
except RuntimeError as e:
    print("refused:", "torch refuses namespace 'held_ops'" in str(e))
print(dt.installed())
""")
    assert r.stdout.splitlines() == ["refused: True", "None"]


@pytest.mark.skipif(NEW_TORCH, reason="torch >= 2.5 registers")
def test_old_torch_refuses(lib):
    import dlx.torch

    with pytest.raises(RuntimeError, match=r"needs torch 2\.5 or newer.*this is torch 1\."):
        dlx.torch.register(lib, NS)
    x = np.zeros(2, np.float32)  # nothing else changed
    lib.scale(x)
