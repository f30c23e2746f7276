"""A dlx kernel keeps the contracts torch's own in-place operators keep (issue 30): version
counters, leaves that require grad, eager autograd, torch's modes, tensors torch refuses to
write. The direct call (lib.NAME) is an optimisation of the operator and must be invisible.

The direct-call half runs under every torch (Debian's 1.13 through dlx's addon, 2.13 through
its own table); the operator half needs torch >= 2.5 and runs in a child process, since an
operator namespace and its autograd formula are process-wide."""
import json

import numpy as np
import pytest

from conftest import BUILD, run_python

torch = pytest.importorskip("torch")

NEW_TORCH = tuple(int("".join(c for c in p if c.isdigit()) or 0)
                  for p in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 5)


@pytest.fixture(scope="module")
def lib():
    import dlx

    return dlx.load(BUILD / "kernels" / "sig_kernels.so")  # fma3: "x, y: f32[n] mut, z"


def ones(n=3):
    return torch.ones(n)


# ---- version counters -----------------------------------------------------------------

def test_a_mut_write_bumps_the_version_once_per_call(lib):
    y = ones()
    lib.fma3(ones(), y, ones())
    assert y._version == 1
    lib.fma3(ones(), y, ones())
    assert y._version == 2


def test_read_only_parameters_keep_their_version(lib):
    x, z = ones(), ones()
    lib.fma3(x, ones(), z)
    assert (x._version, z._version) == (0, 0)


def test_a_failed_call_does_not_bump(lib):
    y = ones()
    with pytest.raises(ValueError):
        lib.fma3(ones(), y, ones(4))  # n differs: refused before the kernel
    assert y._version == 0


def test_a_tensor_saved_for_backward_then_written_fails_backward(lib):
    a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    h = a * 1
    y = (h * h).sum()
    with torch.no_grad():
        lib.fma3(ones(), h, ones())  # h += 1 in place: autograd saved the old h
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


# ---- gradients: never silently dropped ------------------------------------------------

def test_a_tensor_that_requires_grad_is_refused_without_an_operator(lib):
    a = torch.ones(3, requires_grad=True)
    y = ones()
    with pytest.raises(RuntimeError) as e:
        lib.fma3(a, y, ones())
    msg = str(e.value)
    assert msg.startswith("fma3(): 'x' requires grad")
    assert "dlx.torch.register" in msg and "torch.no_grad()" in msg
    assert type(e.value.__cause__).__name__ == "OperatorPath"
    assert torch.equal(y, ones()) and y._version == 0  # nothing ran


def test_without_grad_mode_or_detached_the_call_runs(lib):
    a = torch.ones(3, requires_grad=True)
    y = ones()
    with torch.no_grad():
        lib.fma3(a, y, ones())
    lib.fma3(a.detach(), y, ones())
    assert y.tolist() == [3.0, 3.0, 3.0]


def test_a_leaf_that_requires_grad_is_not_written(lib):
    w = torch.nn.Parameter(torch.ones(3))
    with pytest.raises(RuntimeError, match=r"fma3\(\): 'y' is a leaf tensor that requires grad"):
        lib.fma3(ones(), w, ones())
    assert torch.equal(w.detach(), ones())
    with torch.no_grad():  # as an optimizer's step writes parameters
        lib.fma3(ones(), w, ones())
    assert w.detach().tolist() == [2.0, 2.0, 2.0] and w._version == 1


# ---- tensors torch refuses to write in place ------------------------------------------

def test_overlapping_elements_are_refused_for_mut(lib):
    y = torch.ones(1).expand(3)
    with pytest.raises(ValueError, match=r"fma3\(\): 'y' has elements that share memory"):
        lib.fma3(ones(), y, ones())
    assert y.tolist() == [1.0, 1.0, 1.0]
    lib.fma3(torch.ones(1).expand(3), ones(), ones())  # read-only parameters may overlap


def test_overlapping_numpy_arrays_are_refused_for_mut(lib):
    base = np.ones(1, np.float32)
    y = np.lib.stride_tricks.as_strided(base, shape=(3,), strides=(0,), writeable=True)
    with pytest.raises(ValueError, match="'y' has elements that share memory"):
        lib.fma3(np.ones(3, np.float32), y, np.ones(3, np.float32))
    assert base[0] == 1.0


def test_an_inference_tensor_is_written_only_in_inference_mode(lib):
    with torch.inference_mode():
        t = ones()
    with pytest.raises(RuntimeError, match=r"fma3\(\): 'y' is an inference tensor"):
        lib.fma3(ones(), t, ones())
    assert torch.equal(t, ones())
    with torch.inference_mode():
        lib.fma3(ones(), t, ones())
    assert t.tolist() == [2.0, 2.0, 2.0]


# ---- the operator and the direct call, registered (torch >= 2.5) -----------------------

OPERATOR_SCRIPT = r"""
import json, warnings
import dlx, dlx.torch, torch
warnings.simplefilter("error")  # the formula's registration warns about nothing
out = {}
lib = dlx.load(%(path)r)
reg = dlx.torch.register(lib, "parity_ops")
ops = torch.ops.parity_ops

x = torch.ones(3)
ops.scale(x); out["op_version"] = x._version
lib.scale(x); out["direct_version"] = x._version

a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
y = lib.square(a)
out["no_formula_grad_fn"] = y.grad_fn is not None
try:
    y.sum().backward(); out["no_formula_backward"] = None
except RuntimeError as e:
    out["no_formula_backward"] = str(e)
try:
    (ops.square(a) + a).sum().backward(); out["mixed"] = a.grad.tolist()
except RuntimeError as e:
    out["mixed"] = str(e)

def setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])

def backward(ctx, g):
    (x,) = ctx.saved_tensors
    return lib.square_grad(x, g)

torch.library.register_autograd("parity_ops::square", backward, setup_context=setup)
a.grad = None
(lib.square(a) + a).sum().backward()
out["direct_grad"] = a.grad.tolist()
a.grad = None
(ops.square(a) + a).sum().backward()
out["op_grad"] = a.grad.tolist()
try:  # torch.func's transforms reach the operator too: the gradient, or torch's own error
    out["func_grad"] = torch.func.grad(lambda t: lib.square(t).sum())(a.detach()).tolist()
except RuntimeError as e:
    out["func_grad"] = str(e)

h = a * 1
s = (h * h).sum()
try:
    lib.scale(h); s.backward(); out["saved_then_written"] = None
except RuntimeError as e:
    out["saved_then_written"] = str(e)

for name, t in (("leaf", torch.nn.Parameter(torch.ones(3))), ("overlap", torch.ones(1).expand(3))):
    try:
        ops.scale(t); out["op_" + name] = None
    except RuntimeError as e:
        out["op_" + name] = str(e)
try:
    ops.add3(None, torch.ones(3), torch.ones(3)); out["op_none"] = None
except TypeError as e:
    out["op_none"] = str(e)
with torch.inference_mode():
    t = torch.ones(3)
try:
    ops.scale(t); out["op_inference"] = None
except RuntimeError as e:
    out["op_inference"] = str(e)

from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
seen = []
class FunctionSpy(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        seen.append("function:" + str(func)); return func(*args, **(kwargs or {}))
class DispatchSpy(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        seen.append("dispatch:" + str(func)); return func(*args, **(kwargs or {}))
x = torch.ones(3)
with FunctionSpy():
    lib.scale(x)
with DispatchSpy():
    lib.scale(x)
out["modes_saw"] = seen
out["modes_result"] = x.tolist()
from torch.utils.flop_counter import FlopCounterMode
with FlopCounterMode(display=False) as fc:
    lib.square(torch.ones(3))
out["flop_counter_ops"] = sorted(str(k) for k in fc.get_flop_counts().get("Global", {}))
with torch.profiler.profile() as prof:
    lib.scale(torch.ones(3))
out["profiled"] = sorted({e.name for e in prof.events() if "parity_ops" in e.name})
import pickle
copy = pickle.loads(pickle.dumps(lib))  # another Library object, the same file
out["copy_same_registration"] = dlx.torch.register(copy, "parity_ops") is reg
f = torch.compile(lambda t: copy.outer(t, t), fullgraph=True, backend="eager")
out["copy_compiled"] = f(torch.ones(2)).tolist()
out["copy_grad_fn"] = type(copy.square(torch.ones(2, requires_grad=True)).grad_fn).__name__
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def operator_run():
    if not NEW_TORCH:
        pytest.skip(f"torch {torch.__version__} < 2.5: no operators")
    r = run_python(OPERATOR_SCRIPT % {"path": str(BUILD / "kernels" / "compile_kernels.so")})
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_operator_and_direct_call_bump_the_version_once_each(operator_run):
    assert operator_run["op_version"] == 1
    assert operator_run["direct_version"] == 2


def test_without_a_formula_backward_raises_naming_the_operator(operator_run):
    assert operator_run["no_formula_grad_fn"]
    assert "parity_ops::square" in operator_run["no_formula_backward"]
    assert "parity_ops::square" in operator_run["mixed"]  # not 1 where 2a + 1 is right


def test_with_a_formula_the_direct_call_is_the_operator(operator_run):
    assert operator_run["direct_grad"] == [3.0, 5.0, 7.0]  # 2a + 1
    assert operator_run["op_grad"] == [3.0, 5.0, 7.0]
    # never silently zeros: torch 2.13 refuses a formula registered this way under
    # torch.func ("must override the setup_context"), as it does for any such operator
    fg = operator_run["func_grad"]
    assert fg == [2.0, 4.0, 6.0] or "setup_context" in fg, fg


def test_a_saved_tensor_written_through_the_operator_fails_backward(operator_run):
    assert operator_run["saved_then_written"] is not None


def test_the_operator_refuses_what_torch_refuses(operator_run):
    assert "leaf Variable that requires grad" in operator_run["op_leaf"]
    assert "'x' has elements that share memory" in operator_run["op_overlap"]
    assert "'x' is an inference tensor" in operator_run["op_inference"]
    assert operator_run["op_none"].startswith("add3(): 'x' must be a tensor, got None")


def test_modes_and_the_profiler_see_the_registered_kernel(operator_run):
    saw = operator_run["modes_saw"]
    assert any(s.startswith("function:") and "parity_ops.scale" in s for s in saw), saw
    assert any(s.startswith("dispatch:") and "parity_ops.scale" in s for s in saw), saw
    assert operator_run["modes_result"] == [4.0, 4.0, 4.0]  # each call wrote once
    assert operator_run["profiled"], "the profiler saw no parity_ops operator"


def test_a_copy_of_a_registered_library_is_the_same_operators(operator_run):
    assert operator_run["copy_same_registration"]
    assert operator_run["copy_compiled"] == [[1.0, 1.0], [1.0, 1.0]]  # fullgraph: traced
    assert "parity_ops_square" in operator_run["copy_grad_fn"]  # the formula registered above
