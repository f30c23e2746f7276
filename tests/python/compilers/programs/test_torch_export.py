"""torch.export programs holding dlx operators, saved in one process and run in another
(issue 31, item 4; docs/torch.md, "Saved programs"): dlx.torch.register in the new process,
then torch.export.load (or dlx.torch.load, which checks the manifest dlx.torch.save wrote)
runs the program with the same values as eager. A namespace not registered, or registered
from another library, is refused naming the operators and the library.

Each "new process" is a child (run_python); the parent exports once per module."""
import json
import shutil
import zipfile

import pytest

from conftest import BUILD, ROOT, run_python

torch = pytest.importorskip("torch")

NEW_TORCH = tuple(int("".join(c for c in p if c.isdigit()) or 0)
                  for p in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 5)
pytestmark = pytest.mark.skipif(
    not NEW_TORCH or not hasattr(torch, "export"),
    reason=f"torch {torch.__version__}: dlx operators and torch.export.save need torch >= 2.5")
NS = "dlx_saved_ops"  # this module's: the children register it the same way
LIB = BUILD / "kernels" / "compile_kernels.so"
OTHER = BUILD / "kernels" / "factory_kernels.so"
LIB_SOURCE = ROOT / "tests" / "kernels" / "compile_kernels.c"


class Model(torch.nn.Module if NEW_TORCH else object):
    def __init__(self, lib):
        super().__init__()
        self.lib = lib

    def forward(self, x, y):
        lo, hi, _ = self.lib.minmax(self.lib.outer(x, y))
        return lo * hi + self.lib.square(x)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A program saved by dlx.torch.save and the same by torch.export.save, with inputs
    and the eager result (a dynamic first dimension: other lengths run too)."""
    import dlx
    import dlx.torch as dt

    folder = tmp_path_factory.mktemp("saved")
    lib = dlx.load(LIB)
    dt.register(lib, NS)
    model = Model(lib)
    x, y = torch.rand(3), torch.rand(2)
    m = torch.export.Dim("m", min=2, max=64)
    ep = torch.export.export(model, (x, y), dynamic_shapes={"x": {0: m}, "y": None})
    dt.save(ep, folder / "dlx.pt2")
    torch.export.save(ep, folder / "plain.pt2")
    cases = [(torch.rand(n), torch.rand(2)) for n in (3, 7)]
    torch.save({"cases": cases, "eager": [model(a, b) for a, b in cases]}, folder / "io.pt")
    return folder


def child(saved, body, register=LIB, check=True):
    reg = (f"dt.register(dlx.load({str(register)!r}), {NS!r})\n" if register else "")
    return run_python(f"""
import torch, dlx, dlx.torch as dt
{reg}io = torch.load({str(saved / "io.pt")!r})
{body}
""", check=check)


@pytest.mark.parametrize("how", ["torch.export.load", "dt.load"])
@pytest.mark.parametrize("name", ["dlx.pt2", "plain.pt2"])
def test_saved_program_runs_in_a_new_process(saved, how, name):
    r = child(saved, f"""
ep = {how}({str(saved / name)!r})
assert all(n.target.namespace == {NS!r} for n in ep.graph.nodes
           if isinstance(n.target, torch._ops.OpOverload) and n.target.namespace != "aten")
for (x, y), want in zip(io["cases"], io["eager"]):
    got = ep.module()(x, y)
    assert torch.equal(got, want), (got, want)
print("ok", len(io["cases"]))
""")
    assert r.stdout.strip() == "ok 2"


def test_unregistered_namespace_names_the_operators(saved):
    """torch.export.load itself says only "check the warnings above"; dlx.torch.load names
    the operators, the library (digest) and how to register it, with or without the
    manifest."""
    r = child(saved, f"""
for name in ("dlx.pt2", "plain.pt2"):
    try:
        dt.load({str(saved)!r} + "/" + name)
    except RuntimeError as e:
        print(name, "|", e, "|", type(e.__cause__).__name__)
""", register=None)
    with_manifest, plain = r.stdout.strip().splitlines()
    assert with_manifest.startswith("dlx.pt2 | the saved program ")
    for op in ("minmax", "outer", "square"):
        assert f"{NS}::{op}" in with_manifest and f"{NS}::{op}" in plain
    assert str(LIB) in with_manifest and "sha256 " in with_manifest
    assert f"dlx.torch.register(dlx.load({str(LIB)!r}), {NS!r})" in with_manifest
    assert plain.startswith("plain.pt2 | ") and "has not registered" in plain
    assert plain.endswith("| RuntimeError")  # torch's own error kept as the cause


def test_namespace_from_another_library_is_refused(saved, tmp_path):
    """Another library under the namespace, even a copy of the same library whose bytes
    differ (one byte appended: still loadable), is refused before anything runs."""
    changed = tmp_path / "compile_kernels_changed.so"
    shutil.copyfile(LIB, changed)
    with open(changed, "ab") as f:
        f.write(b"\0")
    for lib in (OTHER, changed):
        r = child(saved, f"""
try:
    dt.load({str(saved / "dlx.pt2")!r})
except RuntimeError as e:
    print(e)
else:
    print("loaded")
""", register=lib)
        out = r.stdout.strip()
        assert "registered here from another library" in out, out
        assert str(lib) in out and str(LIB) in out and f"{NS}::outer" in out


def test_same_library_loaded_from_a_copy_is_accepted(saved, tmp_path):
    """Identity is the content: the same bytes at another path serve the program."""
    copy = tmp_path / "copy.so"
    shutil.copyfile(LIB, copy)
    r = child(saved, f"""
ep = dt.load({str(saved / "dlx.pt2")!r})
(x, y), want = io["cases"][1], io["eager"][1]
print(torch.equal(ep.module()(x, y), want))
""", register=copy)
    assert r.stdout.strip() == "True"


def test_a_library_changed_on_disk_since_it_was_loaded_is_not_its_file(saved, tmp_path):
    """What runs is what was loaded: once a registered library's file is replaced (other
    bytes, a new inode), no digest or file identity of the new file stands for it. A
    program calling it is not saved; a saved program is not served by it (even when the
    new file holds the program's bytes); a library loaded through another path to the new
    file is not its copy."""
    path, link = tmp_path / "lib.so", tmp_path / "link.so"
    replace = tmp_path / "replace.so"
    with open(path, "wb") as f:  # LIB's kernels, other bytes (one byte appended)
        f.write(LIB.read_bytes() + b"\0")
    link.symlink_to(path)
    r = child(saved, f"""
import os
lib = dlx.load({str(path)!r})
replace = {str(replace)!r}
with open(replace, "wb") as f:
    f.write(open({str(LIB)!r}, "rb").read())  # the saved program's own library's bytes
os.replace(replace, {str(path)!r})
reg = dt.register(lib, {NS!r})
print("key", reg.file_key)
try:
    dt.load({str(saved / "dlx.pt2")!r})
except RuntimeError as e:
    print("load |", e)
class M(torch.nn.Module):
    def forward(self, x, y):
        return lib.outer(x, y)
ep = torch.export.export(M(), (torch.rand(3), torch.rand(2)))
for save in (lambda: dt.save(ep, {str(tmp_path / "p.pt2")!r}),
             lambda: dt.aoti_compile_and_package(ep)):
    try:
        save()
    except RuntimeError as e:
        print("save |", e)
try:
    dt.register(dlx.load({str(link)!r}), {NS!r})
except RuntimeError as e:
    print("link |", e)
""", register=None)
    lines = r.stdout.strip().splitlines()
    assert lines[0] == "key None"
    assert lines[1].startswith("load | ") and "changed on disk since it was loaded" in lines[1]
    for line in lines[2:4]:
        assert line.startswith("save | cannot save a program calling dlx_saved_ops::outer")
        assert str(path) in line and "changed on disk" in line
    assert lines[4].startswith("link | ") and "is taken by" in lines[4], lines
    assert len(lines) == 5 and not (tmp_path / "p.pt2").exists()


def test_each_load_of_a_cache_file_is_named_by_the_file_it_loaded(tmp_path):
    """A file in dlx's cache replaced at its path (republished: here its own bytes under a
    new inode) is a new file for what loads it next, and no longer the one an earlier load
    runs: a program calling the earlier library is not saved, one calling the later is,
    named by the file's digest."""
    r = run_python(f"""
import hashlib, json, os, shutil, torch, dlx, dlx.torch as dt
from dlx import torch_saved
path = dlx.build([{str(LIB_SOURCE)!r}])
first = dlx.load(path)
dt.register(first, "cache_first")
shutil.copyfile(path, path + ".new")
os.replace(path + ".new", path)
second = dlx.load(path)
dt.register(second, "cache_second")
class M(torch.nn.Module):
    def __init__(self, lib):
        super().__init__()
        self.lib = lib
    def forward(self, x, y):
        return self.lib.outer(x, y)
for name, lib in (("first", first), ("second", second)):
    ep = torch.export.export(M(lib), (torch.rand(3), torch.rand(2)))
    saved = os.path.join({str(tmp_path)!r}, name + ".pt2")
    try:
        dt.save(ep, saved)
    except RuntimeError as e:
        print(name, "refused", "changed on disk" in str(e))
    else:
        ns = json.loads(torch_saved._read_extra(saved))
        sha = hashlib.sha256(open(path, "rb").read()).hexdigest()
        print(name, "saved", ns["namespaces"]["cache_" + name]["sha256"] == sha)
""", env={"DLX_CACHE_DIR": str(tmp_path / "cache")})
    assert r.stdout.splitlines() == ["first refused True", "second saved True"]


def _rewrite_manifest(src, dst, edit):
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename.endswith("extra/dlx_operators.json"):
                data = edit(data)
            zout.writestr(info, data)


def test_tampered_manifest_is_refused(saved, tmp_path):
    """A declaration that is not the registered one (same digest, forged schema), and a
    manifest that is no JSON dlx wrote: refused, never run."""
    def forge(data):
        m = json.loads(data)
        m["namespaces"][NS]["operators"]["square"] = "square(Tensor x, int k) -> Tensor"
        return json.dumps(m).encode()

    _rewrite_manifest(saved / "dlx.pt2", tmp_path / "forged.pt2", forge)
    _rewrite_manifest(saved / "dlx.pt2", tmp_path / "garbled.pt2", lambda d: d[: len(d) // 2])
    r = child(saved, f"""
for name in ("forged.pt2", "garbled.pt2"):
    try:
        dt.load({str(tmp_path)!r} + "/" + name)
    except (RuntimeError, ValueError) as e:
        print(type(e).__name__, e)
""")
    forged, garbled = r.stdout.strip().splitlines()
    assert forged.startswith("RuntimeError ") and f"calls {NS}::square as " in forged
    assert "'square(Tensor x) -> Tensor'" in forged
    assert garbled.startswith("ValueError ") and "not one dlx wrote" in garbled


def test_manifest_mutations_are_refused_cleanly(saved):
    """The manifest is input: every truncation, byte flip and odd shape of it is accepted
    (when it still says the same) or refused with ValueError/RuntimeError, never another
    exception (a deep nesting included: json's RecursionError)."""
    from dlx import torch_saved

    text = torch_saved._read_extra(str(saved / "dlx.pt2"))
    torch_saved.check(text, "the program")  # the real one: accepted
    path = json.dumps(json.loads(text)["namespaces"][NS]["library"])
    inside = range(text.index(path) + 1, text.index(path) + len(path) - 1)  # not compared
    cases = [(text[:i], False) for i in range(0, len(text), 7)]
    cases += [(text[:i] + chr((ord(text[i]) + 1) % 128) + text[i + 1:], i in inside)
              for i in range(0, len(text), 5)]
    cases += [(c, False) for c in (
        "[" * 100_000, "{}", "[]", '{"format": 1, "namespaces": []}',
        '{"format": 1, "namespaces": {"x": 1}}',
        f'{{"format": 1, "namespaces": {{"{NS}": {{"library": 1, "sha256": 2, '
        '"operators": "ab"}}}}',
        f'{{"format": 1, "namespaces": {{"{NS}": {{"library": [], "sha256": {{}}, '
        '"operators": ["ab"]}}}}')]
    for case, same in cases:
        try:
            torch_saved.check(case, "the program")
        except (ValueError, RuntimeError) as e:
            assert not same and str(e).startswith("the program"), (case, e)
        else:
            assert same, case
