"""torch's own operator test generator, run over dlx kernels called as users write them.

torch.testing._internal.optests.generate_opcheck_tests turns each test of a TestCase into
schema, autograd-registration, fake-tensor and AOT-dispatch checks of every operator of
the given namespaces the test calls, by watching the calls with a TorchFunctionMode. The
tests below call `lib.NAME(...)`, never `torch.ops...`: the generated checks see the
operators only because a registered kernel's direct call is the operator under a mode
(issue 30). The generated checks watch the operators of the
namespace, and pass vacuously for calls they never see: the test asserts which operators
the checks saw. One child process: an operator namespace is process-wide."""
import json

import pytest

from conftest import BUILD, run_python

torch = pytest.importorskip("torch")
if tuple(int("".join(c for c in p if c.isdigit()) or 0)
         for p in torch.__version__.split("+")[0].split(".")[:2]) < (2, 5):
    pytest.skip(f"torch {torch.__version__} < 2.5: no operators", allow_module_level=True)

SCRIPT = r"""
import json, os, sys, tempfile, unittest
import dlx, dlx.torch, torch
from torch.testing._internal.optests import generate_opcheck_tests

lib = dlx.load(%(path)r)
dlx.torch.register(lib, "opcheck_ops")

def setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])

def backward(ctx, g):
    (x,) = ctx.saved_tensors
    return lib.square_grad(x, g)

torch.library.register_autograd("opcheck_ops::square", backward, setup_context=setup)

class Block(torch.nn.Module):
    # a small model that calls the kernels as a user writes them; only square has a formula
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.rand(3))

    def forward(self, x, y):
        lo, hi, n = lib.minmax(lib.outer(x, y))
        return lib.square(self.w * (hi - lo)).sum() + n

class Kernels(unittest.TestCase):
    def test_block(self):
        block = Block()
        out = block(torch.rand(3), torch.rand(4))
        out.backward()
        self.assertIsNotNone(block.w.grad)

    def test_in_place(self):
        x, y, out = torch.ones(4), torch.full((4,), 2.0), torch.zeros(4)
        lib.add3(x, y, out)
        self.assertEqual(out.tolist(), [3.0] * 4)
        lib.scale(out, 2.0)
        self.assertEqual(out.tolist(), [6.0] * 4)

    def test_several_results_and_kinds(self):
        x = torch.rand(2, 5, dtype=torch.float64)
        self.assertEqual(lib.square(x).shape, (2, 5))
        v = lib.kinds(torch.ones(3), i=2, f=1.5, b=True, s="twice")
        self.assertEqual(v.shape, (3,))

folder = tempfile.mkdtemp()
failures = os.path.join(folder, "failures_dict.json")
from torch.testing._internal.optests.generate_tests import FailuresDict
FailuresDict(failures, {}).save()  # no expected failures: every generated check must pass
utils = ["test_schema", "test_autograd_registration", "test_faketensor",
         "test_aot_dispatch_static", "test_aot_dispatch_dynamic"]
# which operators the generated checks saw (they pass vacuously for calls they never see)
from torch.testing._internal.optests import generate_tests
seen = set()
watch = generate_tests.OpCheckMode.__torch_function__
def counted(self, func, types, args=(), kwargs=None):
    if isinstance(func, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        ns, _, name = func._qualified_op_name.partition("::")
        if ns == "opcheck_ops":
            seen.add(name)
    return watch(self, func, types, args, kwargs)
generate_tests.OpCheckMode.__torch_function__ = counted
generate_opcheck_tests(Kernels, ["opcheck_ops"], failures, {}, utils)
suite = unittest.TestLoader().loadTestsFromTestCase(Kernels)
generated = sorted(t.id().rsplit(".", 1)[1] for t in suite if "__" in t.id().rsplit(".", 1)[1])
result = unittest.TextTestRunner(stream=sys.stderr, verbosity=1).run(suite)
print(json.dumps({"ran": result.testsRun, "generated": generated, "seen": sorted(seen),
                  "failed": [(t.id(), tb[-2000:]) for t, tb in result.failures + result.errors]}))
"""


def test_generated_opcheck_tests_pass_for_kernels_called_directly():
    r = run_python(SCRIPT % {"path": str(BUILD / "kernels" / "compile_kernels.so")})
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert len(out["generated"]) == 15, out  # 3 tests x 5 checks
    assert out["seen"] == ["add3", "kinds", "minmax", "outer", "scale", "square"], out
    assert out["failed"] == [], "\n\n".join(f"{n}:\n{tb}" for n, tb in out["failed"])
