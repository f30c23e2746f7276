"""AOTInductor packages holding dlx operators (issue 31, item 5; docs/torch.md, "Saved
programs"): torch._inductor.aoti_compile_and_package in one process; in a new one,
dlx.torch.register then torch._inductor.aoti_load_package runs the package with eager's
values, at batch sizes other than the traced one (torch.export.Dim). The package calls the
operators through AOTInductor's proxy executor, i.e. the dispatcher: dlx's C++ kernel.
dlx.torch.aoti_load_package checks the manifest dlx.torch.aoti_compile_and_package put in
the package's metadata: another library under the namespace is refused before any call.

One compile for the module (about a minute on a small machine); each process is a child."""
import shutil

import pytest

from conftest import BUILD, run_python

torch = pytest.importorskip("torch")

NEW_TORCH = tuple(int("".join(c for c in p if c.isdigit()) or 0)
                  for p in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 5)
pytestmark = pytest.mark.skipif(
    not NEW_TORCH or not hasattr(torch, "_inductor")
    or not hasattr(getattr(torch, "_inductor", None), "aoti_compile_and_package"),
    reason=f"torch {torch.__version__} has no AOTInductor packages (torch >= 2.6)")
NS = "dlx_aoti_ops"
LIB = BUILD / "kernels" / "compile_kernels.so"


class Model(torch.nn.Module if NEW_TORCH else object):
    def __init__(self, lib):
        super().__init__()
        self.lib = lib

    def forward(self, x, y):
        lo, hi, _ = self.lib.minmax(self.lib.outer(x, y) + 1)
        return lo * hi + self.lib.square(x)


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    import dlx
    import dlx.torch as dt

    folder = tmp_path_factory.mktemp("aoti")
    lib = dlx.load(LIB)
    dt.register(lib, NS)
    model = Model(lib)
    b = torch.export.Dim("b", min=2, max=1024)
    ep = torch.export.export(model, (torch.rand(3), torch.rand(2)),
                             dynamic_shapes={"x": {0: b}, "y": None})
    path = dt.aoti_compile_and_package(ep, package_path=str(folder / "model.pt2"))
    cases = [(torch.rand(n), torch.rand(2)) for n in (3, 5, 300)]
    torch.save({"cases": cases, "eager": [model(a, b) for a, b in cases]}, folder / "io.pt")
    return folder, path


def child(package, body, register=LIB):
    folder, path = package
    reg = f"dt.register(dlx.load({str(register)!r}), {NS!r})\n" if register else ""
    return run_python(f"""
import torch, dlx, dlx.torch as dt
{reg}io = torch.load({str(folder / "io.pt")!r})
path = {path!r}
{body}
""")


@pytest.mark.parametrize("load", ["torch._inductor.aoti_load_package", "dt.aoti_load_package"])
def test_package_runs_in_a_new_process_at_any_batch(package, load):
    r = child(package, f"""
m = {load}(path)
for (x, y), want in zip(io["cases"], io["eager"]):
    got = m(x, y)
    assert got.shape == want.shape and torch.allclose(got, want), (got, want)
print("ok", [x.shape[0] for x, _ in io["cases"]])
""")
    assert r.stdout.strip() == "ok [3, 5, 300]"


def test_unregistered_namespace_names_the_operator(package):
    r = child(package, """
try:
    torch._inductor.aoti_load_package(path)
except RuntimeError as e:
    print(e)
""", register=None)
    assert f"{NS}::" in r.stdout  # torch's: "Could not find schema for dlx_aoti_ops::outer."


def test_namespace_from_another_library_is_refused(package, tmp_path):
    changed = tmp_path / "changed.so"  # the same kernels, other bytes: another library
    shutil.copyfile(LIB, changed)
    with open(changed, "ab") as f:
        f.write(b"\0")
    r = child(package, """
try:
    dt.aoti_load_package(path)
except RuntimeError as e:
    print(e)
else:
    print("loaded")
""", register=changed)
    out = r.stdout.strip()
    assert out.startswith("the AOTInductor package ") and "from another library" in out, out
    assert str(changed) in out and str(LIB) in out
