"""The registered operator's short paths keep what the long ones did (issue 33, item 5):
torch.ops.NS.NAME skips torch's autogradNotImplementedFallback only for a call where no
tensor has autograd metadata, reads the schema's mutable arguments once, checks a mut
tensor's overlap on its view and builds only the results the kernel allocates. Each test
here reaches the edge of one of them. torch >= 2.5, in a child process (an operator
namespace is process-wide)."""
import json

import pytest

from conftest import BUILD, run_python

torch = pytest.importorskip("torch")

NEW_TORCH = tuple(int("".join(c for c in p if c.isdigit()) or 0)
                  for p in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 5)
pytestmark = pytest.mark.skipif(not NEW_TORCH, reason=f"torch {torch.__version__} < 2.5")

SCRIPT = r"""
import json
import dlx, dlx.torch, torch
import torch.autograd.forward_ad as fwAD
out = {}
dlx.torch.register(dlx.load(%(compile)r), "fast_ops")
dlx.torch.register(dlx.load(%(sig)r), "fast_sig")
ops, sig = torch.ops.fast_ops, torch.ops.fast_sig

def outcome(fn):
    try:
        r = fn()
        return ["ok", r]
    except Exception as e:
        return [type(e).__name__, str(e)]

# forward AD: a dual tensor has autograd metadata; the fallback refuses it
with fwAD.dual_level():
    dual = fwAD.make_dual(torch.ones(3), torch.ones(3))
    out["dual"] = outcome(lambda: sig.fma3(dual, torch.zeros(3), torch.ones(3)) and None)
    out["dual_mut"] = outcome(lambda: ops.scale(fwAD.make_dual(torch.ones(3), torch.ones(3))))

# metadata without requires_grad (a tensor that required grad once): served, bumped once
t = torch.ones(3, requires_grad=True).detach().requires_grad_(True).requires_grad_(False)
y = torch.zeros(3)
sig.fma3(t, y, torch.ones(3)); out["meta_version"] = y._version; out["meta_y"] = y.tolist()

# a mutable leaf that requires grad: refused (check_inplace), on the long path
out["leaf"] = outcome(lambda: ops.scale(torch.ones(3, requires_grad=True)))
with torch.no_grad():  # no grad mode: served
    leaf = torch.ones(3, requires_grad=True)
    ops.scale(leaf); out["leaf_no_grad"] = leaf.tolist()

# a result requires grad when an input does; none when none does
a = torch.tensor([1.0, 2.0], requires_grad=True)
out["result_grad"] = ops.square(a).requires_grad
out["result_plain"] = ops.square(torch.tensor([1.0, 2.0])).requires_grad

# mut and overlap: stride 0 over more than one element refused, over one element served
out["overlap"] = outcome(lambda: ops.scale(torch.ones(1).expand(3)))
one = torch.ones(1)
out["overlap_one"] = outcome(lambda: ops.scale(one.expand(1)) and None)
out["overlap_2d"] = outcome(lambda: ops.scale(torch.ones(3, 1).expand(3, 2)[:, 0]))

# versions: each mut argument once per call, none for read-only ones
x, o = torch.ones(3), torch.zeros(3)
ops.add3(x, x, o); ops.add3(x, x, o)
out["versions"] = [x._version, o._version]
with torch.inference_mode():
    inf = torch.ones(3)
out["inference"] = outcome(lambda: ops.scale(inf))
with torch.inference_mode():
    ops.scale(inf); out["inference_in_mode"] = inf.tolist()

# results: three (two tensors and a scalar tensor), one, and a kernel's count
r = ops.minmax(torch.tensor([[1.0, 5.0], [-2.0, 3.0]]))
out["minmax"] = [r[0].tolist(), r[1].tolist(), int(r[2])]
out["outer"] = ops.outer(torch.ones(2), torch.ones(3)).shape == (2, 3)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def run():
    r = run_python(SCRIPT % {"compile": str(BUILD / "kernels" / "compile_kernels.so"),
                             "sig": str(BUILD / "kernels" / "sig_kernels.so")})
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_forward_ad_still_reaches_torchs_fallback(run):
    for key in ("dual", "dual_mut"):
        kind, text = run[key]
        assert kind == "NotImplementedError" and "forward AD" in text, run[key]


def test_autograd_metadata_without_grad_is_served_and_bumped_once(run):
    assert run["meta_version"] == 1
    assert run["meta_y"] == [1.0, 1.0, 1.0]


def test_a_mutable_leaf_that_requires_grad_is_refused_only_under_grad_mode(run):
    kind, text = run["leaf"]
    assert kind == "RuntimeError" and "leaf Variable that requires grad" in text, run["leaf"]
    assert run["leaf_no_grad"] == [2.0, 2.0, 2.0]


def test_results_require_grad_as_their_inputs_do(run):
    assert run["result_grad"] is True
    assert run["result_plain"] is False


def test_overlap_is_refused_where_torch_refuses_it(run):
    kind, text = run["overlap"]
    assert kind == "RuntimeError" and "'x' has elements that share memory" in text
    assert run["overlap_one"][0] == "ok", run["overlap_one"]
    assert run["overlap_2d"][0] == "ok", run["overlap_2d"]  # a column of it: stride 1


def test_versions_and_inference_tensors(run):
    assert run["versions"] == [0, 2]
    kind, text = run["inference"]
    assert kind == "RuntimeError" and "'x' is an inference tensor" in text
    assert run["inference_in_mode"] == [2.0, 2.0, 2.0]


def test_results_are_the_kernels(run):
    assert run["minmax"] == [[1.0, -2.0], [5.0, 3.0], 2], run["minmax"]
    assert run["outer"] is True
