"""The addon's tensors on the call path (issue 33): after a call's first tensor of a type
whose table is dlx's addon, its later tensors take the addon's view without the type
cache, and a `mut` tensor's view hands over its version counter, which the call bumps
itself. Every check still holds for each tensor, wherever it stands in the call.

A plain tensor (no autograd metadata, no subclass, its dims held in its TensorImpl) is
described by the call loop itself, from the layout the addon publishes (dlx_plain_view.h):
the tests below check that it is offered on this torch, that every tensor reads as torch
says it is at every position, and that every check torch makes on mutable access still
holds (copy-on-write, a storage that refuses it).

Runs where the addon is the table in force (Debian's torch 1.13). Where torch has its own
table and this session put that one in force, the module runs again in a child process
with the addon preferred (DLX_TEST_PREFER_ADDON)."""
import os
import sys
import threading

import numpy as np
import pytest

from conftest import BUILD, run_python

torch = pytest.importorskip("torch")

CHILD = os.environ.get("DLX_TEST_PREFER_ADDON") == "1"


def test_the_addon_path_on_this_torch_in_a_child():
    """Where this session's table is not the addon: this module, with the addon in force."""
    import dlx.torch as dt

    if CHILD:
        pytest.skip("this is the child")
    rec = dt.install()
    if rec is None or rec.source == "addon":
        pytest.skip("the addon is the table in force here: the tests below run in process")
    r = run_python(f"import sys, pytest; sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', "
                   f"{__file__!r}]))", env={"DLX_TEST_PREFER_ADDON": "1"}, check=False)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert " passed" in r.stdout and " failed" not in r.stdout, r.stdout[-2000:]


@pytest.fixture(scope="module")
def libs():
    import dlx
    import dlx.torch as dt

    rec = dt.install(prefer="addon" if CHILD else None)
    if rec is None or rec.source != "addon":
        pytest.skip(f"the table in force is {rec.source if rec else None}, not dlx's addon")
    return (dlx.load(BUILD / "kernels" / "sig_kernels.so"),  # fma3: "x, y: f32[n] mut, z"
            dlx.load(BUILD / "kernels" / "compile_kernels.so"))  # raw: unsigned, any args


@pytest.fixture(scope="module")
def tk(libs):
    import dlx

    return dlx.load(BUILD / "kernels" / "test_kernels.so")  # info_of, fill_at


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


@pytest.mark.parametrize("where", [0, 1, 2])
def test_a_signed_call_refuses_a_tensor_that_requires_grad_anywhere(libs, where):
    # a later tensor of the addon's type goes from its view straight to the declared check
    # (call.c's `viewed:`): its refusal must read as the first one's, and bump nothing
    sig, _ = libs
    args = [ones(), ones(), ones()]
    args[where] = torch.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"fma3\(\).*requires grad"):
        sig.fma3(*args)
    assert all(a._version == 0 for a in args)
    assert sig.fma3(ones(), args[1] if where != 1 else ones(), ones()) is None


def test_a_version_saved_by_autograd_sees_the_write(libs):
    sig, _ = libs
    a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    h = a * 1
    loss = (h * h).sum()
    with torch.no_grad():
        sig.fma3(ones(), h, ones())
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


# ---- plain tensors, described by the call loop (dlx_plain_view.h) ----------------------

DTYPES = {torch.float32: (2, 32), torch.float64: (2, 64), torch.int64: (0, 64),
          torch.int32: (0, 32), torch.uint8: (1, 8), torch.bool: (6, 8), torch.float16: (2, 16)}


def described(tk, tensors, which):
    """What the kernel sees of tensors[which], the tensors passed as one call."""
    t = tensors[which]
    q = lambda what: tk.info_of(which, what, *tensors)
    ndim = q(0)
    return {"ndim": ndim, "dtype": (q(1), q(2)), "byte_offset": q(3), "device": q(4),
            "shape": [q(10 + d) for d in range(ndim)],
            "strides": [q(20 + d) for d in range(ndim)],
            "data": q(30) if t.numel() else 0}


def torch_says(t):
    return {"ndim": t.dim(), "dtype": DTYPES[t.dtype], "byte_offset": 0, "device": 1,
            "shape": list(t.shape), "strides": list(t.stride()),
            "data": t.data_ptr() if t.numel() else 0}


def plain_at(base, offset, size, stride):
    """A tensor on base's storage from `offset` on, with no autograd metadata (a slice of
    base would be a view, which torch tracks)."""
    t = torch.empty(0, dtype=base.dtype)
    storage = base.untyped_storage() if hasattr(base, "untyped_storage") else base.storage()
    t.set_(storage, offset, size, stride)
    return t


def test_the_plain_layout_is_offered_and_known_here(libs):
    import dlx._core as core

    plain = core._torch_plain()
    assert plain is not None, "the addon offers no plain layout on this torch"
    assert plain["known"] in (1, 2), f"offsets {plain['offsets']} are not a layout dlx knows"
    assert plain["views"], "views (autograd metadata, no grad) are not read in line"


def test_kinds_follow_the_dtypes_a_program_uses(libs, tk):
    import dlx._core as core

    tensors = [torch.ones(2, dtype=d) for d in (torch.int64, torch.float64)]
    tk.info_of(0, 0, *tensors)
    kinds = [k[:2] for k in core._torch_plain()["kinds"]]
    assert (0, 64) in kinds and (2, 64) in kinds


@pytest.mark.parametrize("where", [0, 1, 2])
def test_each_kind_of_plain_tensor_reads_as_torch_says_at_any_position(libs, tk, where):
    base = torch.arange(64.0)
    cases = [
        torch.ones(3),
        torch.arange(6, dtype=torch.int64),
        torch.zeros(2, 3, dtype=torch.float64),
        plain_at(base, 5, (3, 4), (1, 3)),  # a storage offset, transposed strides
        torch.zeros(0),  # empty: no data pointer
        torch.tensor(7.0),  # 0-d
        torch.ones(1, 2, 1, 2, 1),  # 5 dims: held in the TensorImpl
        torch.ones(1, 2, 1, 2, 1, 2),  # 6 dims: held outside it (the addon's view)
        torch.ones(4, dtype=torch.uint8),
        torch.ones(4, dtype=torch.bool),
        torch.ones(4, dtype=torch.float16),
        torch.ones(4, dtype=torch.int32),
    ]
    for _ in range(3):  # new kinds published on the way, then read from them
        for case in cases:
            others = [torch.ones(2), torch.ones(2, dtype=torch.int64)]
            tensors = others[:where] + [case] + others[where:]
            assert described(tk, tensors, where) == torch_says(case), case


def test_more_dtypes_in_one_call_than_the_layout_holds_kinds(libs, tk):
    tensors = [torch.full((2,), 3, dtype=d) for d in DTYPES]  # 7 kinds, the layout keeps 4
    for _ in range(3):
        for which, t in enumerate(tensors):
            assert described(tk, tensors, which) == torch_says(t)


@pytest.mark.parametrize("where", [0, 1, 2])
def test_a_write_to_a_copy_on_write_tensor_leaves_its_original(libs, tk, where):
    if not hasattr(torch, "_lazy_clone"):
        pytest.skip("this torch has no copy-on-write tensors")
    original = torch.arange(4.0)
    clone = torch._lazy_clone(original)
    assert torch._C._is_cow_tensor(clone)
    others = [torch.ones(4), torch.ones(4)]
    tensors = others[:where] + [clone] + others[where:]
    tk.fill_at(where, 9.0, *tensors)
    assert clone.tolist() == [9.0] * 4
    assert original.tolist() == [0.0, 1.0, 2.0, 3.0]


@pytest.mark.parametrize("where", [0, 1, 2])
def test_a_storage_that_refuses_mutable_access_refuses_the_call(libs, tk, where):
    if not hasattr(torch._C, "_set_throw_on_mutable_data_ptr"):
        pytest.skip("this torch has no storage that refuses mutable access")
    refusing = torch.ones(4)
    torch._C._set_throw_on_mutable_data_ptr(refusing)
    with pytest.raises(RuntimeError) as err:
        refusing.add_(1)  # torch's own in-place operator refuses it
    others = [torch.ones(4), torch.ones(4)]
    tensors = others[:where] + [refusing] + others[where:]
    with pytest.raises(RuntimeError, match="info_of") as ours:
        tk.info_of(where, 30, *tensors)
    assert str(err.value).splitlines()[0] in str(ours.value)


@pytest.mark.parametrize("where", [0, 1, 2])
def test_a_subclass_and_a_parameter_read_as_torch_says(libs, tk, where):
    class Sub(torch.Tensor):
        pass

    for odd in (torch.ones(3).as_subclass(Sub), torch.nn.Parameter(torch.ones(3), False)):
        others = [torch.ones(2), torch.ones(2)]
        tensors = others[:where] + [odd] + others[where:]
        assert described(tk, tensors, where) == torch_says(odd)


@pytest.mark.parametrize("where", [0, 1, 2])
def test_views_read_as_torch_says_at_any_position(libs, tk, where):
    """A view has autograd metadata: the loop reads it in line once torch says it does not
    require grad (dlx_torch_plain.meta_no_grad)."""
    base = torch.arange(24.0).reshape(4, 6)
    cases = [
        base.t(),  # transposed
        base[1:3, 2:],  # a storage offset
        base[:, ::2],  # strided
        base[2],  # one row: offset 12
        base.narrow(1, 3, 2).unsqueeze(0),  # 3 dims
        torch.arange(5.0).expand(3, 5),  # stride 0
        torch.arange(6, dtype=torch.int64)[1::2],  # another kind
        base.t().t()[1:],  # a view of a view
        base[:0],  # empty: no data pointer
        base[1, 1],  # 0-d
    ]
    for case in cases:
        assert case._is_view(), case
        for _ in range(2):
            others = [torch.ones(2), torch.ones(2)[1:]]
            tensors = others[:where] + [case] + others[where:]
            assert described(tk, tensors, where) == torch_says(case), case


@pytest.mark.parametrize("where", [0, 1, 2])
@pytest.mark.parametrize("how", ["base after", "under no_grad"])
def test_a_view_whose_grad_comes_from_its_base_is_refused_at_any_position(libs, where, how):
    """A view requires grad when its base does, though neither its flag nor a grad_fn says
    so: a base that came to require grad after the view was taken, a view taken under
    no_grad of one that does. Only torch's requires_grad() knows; the call must ask it."""
    _, lib = libs
    base = torch.ones(6, requires_grad=how == "under no_grad")
    with torch.no_grad():
        view = base[::2]
    if how == "base after":
        base.requires_grad_(True)
    assert view.requires_grad and view.grad_fn is None
    args = [ones()[::1], ones()[::1], ones()[::1]]
    lib.raw(*args)  # views that do not require grad run
    args[where] = view
    for _ in range(2):
        with pytest.raises(RuntimeError, match=r"raw\(\).*requires grad"):
            lib.raw(*args)
    with torch.no_grad():
        lib.raw(*args)  # without grad mode the call runs


@pytest.mark.parametrize("first", ["tensor", "ndarray"])
def test_a_mut_view_writes_its_base_and_bumps_their_counter_once(libs, first):
    sig, _ = libs
    x = torch.ones(3) if first == "tensor" else np.ones(3, np.float32)
    base = torch.zeros(6)
    y = base[1::2]  # a view: base's elements 1, 3, 5, one version counter for both
    for n in (1, 2):
        sig.fma3(x, y, torch.full((3,), 2.0)[::1])
        assert base._version == n and y._version == n
    assert base.tolist() == [0.0, 4.0, 0.0, 4.0, 0.0, 4.0]
    leaf = torch.zeros(3, requires_grad=True)
    with torch.no_grad():
        v = leaf[::1]
    with pytest.raises(RuntimeError, match="requires grad"):
        sig.fma3(x, v, torch.ones(3))
    assert leaf._version == 0 and leaf.tolist() == [0.0, 0.0, 0.0]


def test_a_mut_plain_tensor_bumps_once_wherever_its_type_was_met(libs):
    sig, _ = libs
    for first in (torch.ones(3), np.ones(3, np.float32)):
        y = torch.ones(3)
        sig.fma3(first, y, torch.ones(3))
        assert y._version == 1
        sig.fma3(first, y, torch.ones(3))
        assert y._version == 2 and y.tolist() == [3.0, 3.0, 3.0]


def test_threads_with_their_own_dtypes_read_their_own(libs, tk):
    """Layouts are published while other threads read them: each thread keeps its dtypes."""
    dtypes = list(DTYPES)[:6]
    errors = []

    def work(d):
        try:
            tensors = [torch.ones(3, dtype=d), torch.ones(2, 2, dtype=d)]
            for _ in range(300):
                for which, t in enumerate(tensors):
                    got = described(tk, tensors, which)
                    if got != torch_says(t):
                        errors.append((d, got))
                        return
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append((d, e))

    threads = [threading.Thread(target=work, args=(d,)) for d in dtypes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]


@pytest.mark.parametrize("mode", ["inference_mode", "FakeTensorMode"])
def test_the_layout_is_learnt_whatever_mode_the_first_install_runs_in(libs, mode):
    """The addon learns the layout on probe tensors when dlx first installs it: a mode the
    caller is in then must neither change the probes nor cost the layout."""
    code = f"""
import torch, dlx.torch as dt, dlx._core as core
if {mode!r} == "inference_mode":
    ctx = torch.inference_mode()
else:
    from torch._subclasses.fake_tensor import FakeTensorMode
    ctx = FakeTensorMode()
with ctx:
    rec = dt.install(prefer="addon")
assert rec.source == "addon", rec
plain = core._torch_plain()
assert plain is not None and plain["known"] in (1, 2), plain
print("ok")
"""
    r = run_python(code, check=False)
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout[-2000:] + r.stderr[-3000:]
