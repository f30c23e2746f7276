"""The addon's tensors on the call path (issue 33): after a call's first tensor of a type
whose table is dlx's addon, its later tensors take the addon's view without the type
cache, and a `mut` tensor's view hands over its version counter, which the call bumps
itself. Every check still holds for each tensor, wherever it stands in the call.

Runs where the addon is the table in force (Debian's torch 1.13; a torch with its own
table when the addon is what install() chose)."""
import numpy as np
import pytest

from conftest import BUILD

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def libs():
    import dlx
    import dlx.torch as dt

    rec = dt.install()
    if rec is None or rec.source != "addon":
        pytest.skip(f"the table in force is {rec.source if rec else None}, not dlx's addon")
    return (dlx.load(BUILD / "kernels" / "sig_kernels.so"),  # fma3: "x, y: f32[n] mut, z"
            dlx.load(BUILD / "kernels" / "compile_kernels.so"))  # raw: unsigned, any args


def ones(n=3):
    return torch.ones(n)


@pytest.mark.parametrize("where", [0, 1, 2])
def test_a_tensor_requiring_grad_is_refused_at_any_position(libs, where):
    _, lib = libs
    args = [ones(), ones(), ones()]
    args[where] = torch.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"raw\(\).*requires grad"):
        lib.raw(*args)
    with torch.no_grad():
        lib.raw(*args)  # without grad mode the call runs


@pytest.mark.parametrize("where", [0, 1, 2])
def test_a_view_requiring_grad_is_refused_at_any_position(libs, where):
    _, lib = libs
    args = [ones()[::1], ones(6)[::2], ones().t()]  # views: autograd metadata, no grad
    lib.raw(*args)
    args[where] = torch.ones(6, requires_grad=True)[::2]
    with pytest.raises(RuntimeError, match=r"raw\(\).*requires grad"):
        lib.raw(*args)


@pytest.mark.parametrize("where", [0, 1, 2])
def test_a_negative_view_is_refused_at_any_position(libs, where):
    _, lib = libs
    args = [ones(), ones(), ones()]
    args[where] = torch._neg_view(ones())
    with pytest.raises(BufferError, match="negative"):
        lib.raw(*args)


def test_later_tensors_are_described_as_themselves(libs):
    sig, _ = libs
    x = torch.arange(3.0)
    y = torch.full((3,), 10.0)
    z = torch.arange(6.0)[::2]  # strided: a view of its own storage, offset 0
    sig.fma3(x, y, z)  # y += x * z
    assert y.tolist() == [10.0, 12.0, 18.0]
    sig.fma3(x, y, torch.arange(6.0)[1::2])  # offset 1: 1, 3, 5
    assert y.tolist() == [10.0, 15.0, 28.0]


def test_a_mut_tensor_first_of_its_type_bumps_once(libs):
    sig, _ = libs
    y = ones()
    sig.fma3(np.ones(3, np.float32), y, np.ones(3, np.float32))  # numpy around it
    assert y._version == 1 and y.tolist() == [2.0, 2.0, 2.0]
    sig.fma3(ones(), y, ones())  # after a tensor of its type
    assert y._version == 2


def test_a_parameter_written_in_place_bumps_once(libs):
    sig, _ = libs
    with torch.no_grad():
        p = torch.nn.Parameter(ones())
    p.requires_grad_(False)
    sig.fma3(ones(), p, ones())
    assert p._version == 1 and p.tolist() == [2.0, 2.0, 2.0]


def test_an_inference_tensor_in_inference_mode_is_written_without_a_counter(libs):
    sig, _ = libs
    with torch.inference_mode():
        t = ones()
        sig.fma3(ones(), t, ones())
        sig.fma3(ones(), t, ones())
    assert t.tolist() == [3.0, 3.0, 3.0]
    with pytest.raises(RuntimeError, match=r"fma3\(\): 'y' is an inference tensor"):
        sig.fma3(ones(), t, ones())


def test_a_refused_call_bumps_nothing(libs):
    sig, _ = libs
    y = ones()
    with pytest.raises(ValueError):
        sig.fma3(ones(), y, ones(4))  # its later tensor is refused after y's view
    assert y._version == 0
    x = torch.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="requires grad"):
        sig.fma3(ones(), y, x)
    assert y._version == 0 and y.tolist() == [1.0, 1.0, 1.0]


def test_a_version_saved_by_autograd_sees_the_write(libs):
    sig, _ = libs
    a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    h = a * 1
    loss = (h * h).sum()
    with torch.no_grad():
        sig.fma3(ones(), h, ones())
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()
