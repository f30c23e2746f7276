"""A kernel declared `; effects` is an effectful operator for torch.compile (issue 30):
dlx.torch.register marks it in torch's effect registry, so inductor neither removes a call
whose result is unused nor merges two calls. Inductor (not the counting backend): it is the
compiler that removes unused pure calls."""
import pytest

from conftest import BUILD

torch = pytest.importorskip("torch")
if not hasattr(torch.library.Library, "_register_effectful_op"):
    pytest.skip(f"torch {torch.__version__} has no effect registry for operators",
                allow_module_level=True)

NS = "dlx_effect_ops"
SLOT = {"op": 20, "lib": 21, "twice": 22, "eager": 23}


@pytest.fixture(scope="module")
def ek():
    import dlx
    import dlx.torch

    lib = dlx.load(BUILD / "kernels" / "effect_kernels.so")
    dlx.torch.register(lib, NS)
    return lib


@pytest.fixture(autouse=True)
def no_compile_caches():
    # torch's on-disk caches (AOTAutograd's, inductor's FX graph cache; the machine's, shared
    # by every run) key a graph without the effect registry: a graph compiled while the
    # operator was pure would be reused with the call removed (torch.md says so)
    with torch._functorch.config.patch(enable_autograd_cache=False), \
            torch._inductor.config.patch(fx_graph_cache=False):
        yield


def test_operator_is_registered_effectful(ek):
    from torch._higher_order_ops.effects import _get_effect
    from torch._library.effects import EffectType

    assert _get_effect(f"{NS}::tick") == EffectType.ORDERED
    assert _get_effect(f"{NS}::peek") is None  # pure: nothing registered


@pytest.mark.parametrize("how", ["op", "lib"])
def test_unused_result_still_runs_once_per_call(ek, how):
    slot = SLOT[how]
    call = getattr(torch.ops, NS).tick if how == "op" else ek.tick

    def f(x):
        call(x, slot)  # the result is dropped: a pure op's call would be removed
        return x * 2

    compiled = torch.compile(f, backend="inductor", fullgraph=True)
    x = torch.ones(3)
    start = int(ek.peek(slot))
    for _ in range(3):
        assert torch.equal(compiled(x), x * 2)
    assert int(ek.peek(slot)) == start + 3


def test_two_calls_are_not_merged(ek):
    slot = SLOT["twice"]
    op = getattr(torch.ops, NS).tick

    def f(x):
        return op(x, slot) + op(x, slot)  # same arguments: CSE would merge pure calls

    compiled = torch.compile(f, backend="inductor", fullgraph=True)
    x = torch.zeros(2)
    start = int(ek.peek(slot))
    assert compiled(x).tolist() == [2.0 * start + 1] * 2
    assert int(ek.peek(slot)) == start + 2


def test_eager_operator_unchanged(ek):
    slot = SLOT["eager"]
    start = int(ek.peek(slot))
    assert getattr(torch.ops, NS).tick(torch.zeros(2), slot).tolist() == [float(start)] * 2
    assert int(ek.peek(slot)) == start + 1
