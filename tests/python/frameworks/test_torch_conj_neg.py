"""Conjugate and negative torch views never reach a kernel unresolved (issue 25 item 5b).

torch.conj(z) and torch._neg_view(t) share their base's memory and carry a bit saying how
to read it; torch 2.13's own exchange table exports that memory as it is, so a kernel would
compute on z instead of conj(z). dlx refuses them with a BufferError naming the kernel and
the parameter, on every path (a declared kernel's view, a `mut` parameter's owned export,
an unsigned kernel), whichever table is in force: torch's native one (torch >= 2.10) or
dlx's addon (which refuses them itself; the only table torch 1.13 gets)."""
import json

import pytest

import dlx

from conftest import BUILD, run_python

torch = pytest.importorskip("torch")

MSG = r"resolve_conj\(\) / \.resolve_neg\(\)"


@pytest.fixture(scope="module")
def hk():
    return dlx.load(BUILD / "kernels" / "hardening_calls.so")


@pytest.fixture(scope="module")
def tk():
    return dlx.load(BUILD / "kernels" / "test_kernels.so")


def views():
    z = torch.tensor([1 + 2j, 3 - 4j])
    t = torch.tensor([1.0, 2.0])
    return [("conj", torch.conj(z)), ("neg", torch._neg_view(t)),
            ("neg of conj", torch._neg_view(torch.conj(z)))]


@pytest.mark.parametrize("which", range(3))
def test_declared_kernel_refuses_unresolved_views(hk, which):
    name, v = views()[which]
    assert v.is_conj() or v.is_neg(), name
    with pytest.raises(BufferError, match=r"^count_contig\(\): 'x': .*" + MSG):
        hk.count_contig(v)


@pytest.mark.parametrize("which", range(3))
def test_unsigned_kernel_refuses_unresolved_views(tk, which):
    _, v = views()[which]
    with pytest.raises(BufferError, match=r"^noop\(\): argument 1 \(Tensor\): .*" + MSG):
        tk.noop(torch.ones(2), v)


def test_mut_parameter_refuses_a_negative_view_and_writes_nothing(hk):
    base = torch.tensor([1.0, 2.0])
    with pytest.raises(BufferError, match=r"^fill_mut\(\): 'out': .*" + MSG):
        hk.fill_mut(torch._neg_view(base), 3.0)  # the owned export's path
    assert base.tolist() == [1.0, 2.0]


def test_plain_and_resolved_tensors_are_taken(hk, tk):
    z = torch.tensor([1 + 2j, 3 - 4j])
    assert hk.count_contig(z) == 2
    assert hk.count_contig(torch.conj(z).resolve_conj()) == 2
    assert hk.count_contig(torch._neg_view(torch.ones(3)).resolve_neg()) == 3
    assert hk.count_contig(torch.conj(torch.ones(4))) == 4  # real: conj is the tensor itself
    tk.noop(z, torch.ones(2))
    out = torch.zeros(2)
    hk.fill_mut(out, 3.0)
    assert out.tolist() == [3.0, 3.0]


def test_torchs_native_table_is_checked_too():
    """In a child, torch's own table in force (DLX_TORCH_TABLE=native): the same refusals,
    and the exports of refused tensors are released (no leak of the owned one)."""
    if getattr(torch._C, "_dlpack_exchange_api", None) is None:
        pytest.skip(f"torch {torch.__version__} ships no exchange table of its own")
    r = run_python(f"""
import json, gc, torch, dlx, dlx.torch as dt
hk = dlx.load({str(BUILD / "kernels" / "hardening_calls.so")!r})
tk = dlx.load({str(BUILD / "kernels" / "test_kernels.so")!r})
z = torch.tensor([1 + 2j, 3 - 4j]); base = torch.tensor([1.0, 2.0])
out = {{}}
def msg(f, *a):
    try:
        f(*a)
        return "accepted"
    except BufferError as e:
        return str(e)
out["view"] = msg(hk.count_contig, torch.conj(z))
out["owned"] = msg(hk.fill_mut, torch._neg_view(base), 3.0)
out["unsigned"] = msg(tk.noop, torch._neg_view(base))
out["plain"] = hk.count_contig(z)
out["source"] = dt.installed().source
out["base"] = base.tolist()
print(json.dumps(out))
""", env={"DLX_TORCH_TABLE": "native"})
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["source"] == "native"
    assert out["view"].startswith("count_contig(): 'x': a conjugate/negative view")
    assert out["owned"].startswith("fill_mut(): 'out': a conjugate/negative view")
    assert out["unsigned"].startswith("noop(): argument 0 (Tensor): a conjugate/negative view")
    assert all("resolve_conj() / .resolve_neg()" in out[k] for k in ("view", "owned", "unsigned"))
    assert out["plain"] == 2 and out["base"] == [1.0, 2.0]
