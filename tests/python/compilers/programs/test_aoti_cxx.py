"""AOTInductor from C++ with no Python (issue 31, item 6; docs/torch.md, "From C++"): Python
compiles a package holding dlx operators (test_aoti.py's model); a C++ program
(tests/aoti/main.cc) built with CMake against the wheel's libtorch and dlx::torch_ops
(find_package(dlx)) calls dlx_torch_register(lib, ns), loads the package with
torch::inductor::AOTIModelPackageLoader and gets eager's values. The program links no
libpython and runs with no Python variable in its environment. Bad input to
dlx_torch_register is -1 with a message, never a crash. Before running, the program checks
the package's dlx.digest.<ns> metadata (dlx_torch_check_package, issue 31 item 7): a
namespace registered from another library, or forged metadata, is refused with a message,
never run.

The program is built once per set of sources and torch (under the build folder: about a
minute on a small machine); the package is compiled once for the module."""
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import zipfile

import pytest

from conftest import BUILD, ROOT

torch = pytest.importorskip("torch")
from test_aoti import LIB, NS, Model, pytestmark  # noqa: E402,F401  (same kernels, same skip)

SOURCES = ROOT / "tests" / "aoti"


def _tool(name):
    if shutil.which(name) is None:
        pytest.skip(f"no {name} on PATH: the C++ program cannot be built")


@pytest.fixture(scope="module")
def program():
    import dlx

    _tool("cmake")
    _tool(os.environ.get("CXX", "c++"))
    torch_prefix = pathlib.Path(torch.__file__).parent  # its lib/ first, not a system libtorch
    if not (torch_prefix / "share" / "cmake" / "Torch" / "TorchConfig.cmake").exists():
        pytest.skip(f"torch {torch.__version__} ships no CMake config (share/cmake/Torch)")
    dlx_cmake = pathlib.Path(dlx.cmake_dir())
    if not (dlx_cmake / "dlxTorchOps.cmake").exists():
        pytest.skip(f"{dlx_cmake} has no dlxTorchOps.cmake: reinstall dlx (make venv)")
    addon = dlx_cmake.parents[2] / "addon"
    key = hashlib.sha256(torch.__version__.encode())
    for f in sorted([*SOURCES.iterdir(), *addon.iterdir(), *dlx_cmake.iterdir()]):
        key.update(f.name.encode() + f.read_bytes())
    out = BUILD / "aoti_cxx" / key.hexdigest()[:16]
    exe = out / "dlx_aoti_run"
    if not exe.exists():
        subprocess.run(["cmake", "-S", str(SOURCES), "-B", str(out),
                        f"-DCMAKE_PREFIX_PATH={torch_prefix};{dlx_cmake}"],
                       check=True, capture_output=True, text=True)
        r = subprocess.run(["cmake", "--build", str(out)], capture_output=True, text=True)
        assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    return exe


def run(exe, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    return subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=600)


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    import dlx
    import dlx.torch as dt

    folder = tmp_path_factory.mktemp("aoti_cxx")
    lib = dlx.load(LIB)
    dt.register(lib, NS)
    model = Model(lib)
    b = torch.export.Dim("b", min=2, max=1024)
    ep = torch.export.export(model, (torch.rand(3), torch.rand(2)),
                             dynamic_shapes={"x": {0: b}, "y": None})
    path = dt.aoti_compile_and_package(ep, package_path=str(folder / "model.pt2"))
    cases = [(torch.rand(n), torch.rand(2)) for n in (3, 5, 300)]
    lines = []
    for x, y in cases:
        lines.append(" ".join(f"{name} {t.numel()} " + " ".join(repr(v) for v in t.tolist())
                              for name, t in (("x", x), ("y", y))))
    (folder / "inputs.txt").write_text("\n".join(lines) + "\n")
    return path, folder / "inputs.txt", [model(x, y) for x, y in cases]


def test_program_links_no_python(program):
    if shutil.which("ldd") is None:
        pytest.skip("no ldd")
    libs = subprocess.run(["ldd", str(program)], capture_output=True, text=True).stdout
    assert "libdlx_torch_ops" in libs and "libtorch" in libs, libs
    assert "libpython" not in libs and "libtorch_python" not in libs, libs


def test_package_runs_from_cxx_as_in_python(program, package):
    path, inputs, eager = package
    r = run(program, "--register", LIB, NS, "--run", path, inputs)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "register ok"
    results = lines[1:]
    assert len(results) == len(eager), r.stdout
    for line, want in zip(results, eager):
        head, _, values = line.partition(" : ")
        shape = tuple(int(d) for d in head.split()[1:])
        got = torch.tensor([float(v) for v in values.split()], dtype=torch.float64)
        assert shape == tuple(want.shape)
        assert torch.allclose(got.reshape(shape).float(), want), (got, want)


def test_schemas_are_the_python_paths(program, package):
    import dlx
    import dlx.torch  # noqa: F401  (the package fixture registered NS)

    lib = dlx.load(LIB)
    names = [n for n in lib.kernels if hasattr(getattr(torch.ops, NS), n)]
    assert {"outer", "minmax", "square"} <= set(names)
    args = ["--register", LIB, NS]
    for n in names:
        args += ["--schema", f"{NS}::{n}"]
    r = run(program, *args)
    assert r.returncode == 0, r.stdout + r.stderr
    got = [line.removeprefix("schema ") for line in r.stdout.splitlines()[1:]]
    want = [str(getattr(getattr(torch.ops, NS), n).default._schema) for n in names]
    assert got == want


@pytest.mark.parametrize("case", ["missing", "no_kernels", "bad_ns", "empty_ns", "twice",
                                  "torch_ns"])
def test_bad_input_is_an_error_not_a_crash(program, tmp_path, case):
    no_kernels = program.parent / "libdlx_torch_ops.so"  # a shared object, no DLX_KERNEL
    args, want = {
        "missing": (["--register", tmp_path / "none.so", "ns1"], "none.so"),
        "no_kernels": (["--register", no_kernels, "ns1"], "no dlx kernel torch can call"),
        "bad_ns": (["--register", LIB, "my-ops"], "'my-ops' is not an identifier"),
        "empty_ns": (["--register", LIB, ""], "'' is not an identifier"),
        "twice": (["--register", LIB, "ns1", "--register", LIB, "ns1"],
                  "torch refuses namespace 'ns1'"),
        "torch_ns": (["--register", LIB, "aten"], "torch refuses namespace 'aten'"),
    }[case]
    r = run(program, *args)
    assert r.returncode == 1, r.stdout + r.stderr  # an error status, not a signal
    last = r.stdout.splitlines()[-1]
    assert last.startswith("register error: dlx_torch_register: ") and want in last, r.stdout
    if case == "twice":
        assert r.stdout.splitlines()[0] == "register ok"


@pytest.mark.parametrize("name, n, want", [
    ("topk_like", 4, "NotImplementedError: topk_like(): only its declaration is tested"),
    ("minmax", 4, "minmax(): "),  # declared 2-d: dlx's check refuses a 1-d tensor
])
def test_kernel_error_names_kernel_and_kind(program, name, n, want):
    r = run(program, "--register", LIB, NS, "--call", f"{NS}::{name}", n)
    assert r.returncode == 1, r.stdout + r.stderr
    last = r.stdout.splitlines()[-1]
    assert last.startswith("call error: ") and want in last, r.stdout
    if name == "minmax":
        kind = last.removeprefix("call error: ").partition(": ")[0]
        assert kind.endswith("Error"), last


# ---- the package's libraries: dlx_torch_check_package before the first run -------------

def _sha256(path):
    return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()


def _with_metadata(src, dst, change):
    """A copy of the package src whose metadata (the *_metadata.json files, wrapper's and
    kernel's, its loader reads: what get_metadata() returns) is change(dict)'s: a package
    dlx did not write, without compiling one."""
    found = False
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for item in zin.infolist():
            data = zin.read(item)
            if item.filename.endswith("_metadata.json"):
                meta = json.loads(data)
                change(meta)
                data = json.dumps(meta).encode()
                found = True
            zout.writestr(item, data)
    assert found, f"no *_metadata.json in {src}"
    return dst


def _refused(r, *want):
    assert r.returncode == 1, r.stdout + r.stderr  # a refusal, not a signal
    assert not any(line.startswith("result") for line in r.stdout.splitlines()), r.stdout
    last = r.stdout.splitlines()[-1]
    assert last.startswith("check error: dlx: "), r.stdout
    for w in want:
        assert w in last, (w, last)


def test_package_names_its_library_by_digest(package):
    path = package[0]
    with zipfile.ZipFile(path) as z:
        metas = [json.loads(z.read(n)) for n in z.namelist() if n.endswith("_metadata.json")]
    assert metas and all(m[f"dlx.digest.{NS}"] == _sha256(LIB) for m in metas)


def test_namespace_from_another_library_is_refused(program, package, tmp_path):
    path, inputs, _ = package
    other = tmp_path / "libother_kernels.so"  # the same kernels, other content
    other.write_bytes(LIB.read_bytes() + b"\0another build")
    r = run(program, "--register", other, NS, "--run", path, inputs)
    assert r.stdout.splitlines()[0] == "register ok", r.stdout  # it loads: the check refuses
    _refused(r, f"namespace '{NS}'", _sha256(LIB), f"{other} (sha256 {_sha256(other)})",
             "not the ones the package was made with")


def test_unregistered_namespace_is_refused(program, package):
    path, inputs, _ = package
    _refused(run(program, "--run", path, inputs),
             f"no library is registered under '{NS}'", _sha256(LIB))


def test_plain_package_passes(program, package, tmp_path):
    """No dlx entries (a package torch's own aoti_compile_and_package wrote): nothing to
    check; the operators registered run it."""
    path, inputs, eager = package

    def plain(meta):
        for k in [k for k in meta if k.startswith("dlx")]:
            del meta[k]

    plain_path = _with_metadata(path, tmp_path / "plain.pt2", plain)
    r = run(program, "--register", LIB, NS, "--run", plain_path, inputs)
    assert r.returncode == 0, r.stdout + r.stderr
    assert len([x for x in r.stdout.splitlines() if x.startswith("result")]) == len(eager)


@pytest.mark.parametrize("key, value, want", [
    (f"dlx.digest.{NS}", "unknown", "not a sha256"),
    (f"dlx.digest.{NS}", "", "not a sha256"),
    (f"dlx.digest.{NS}", "A" * 64, "not a sha256"),
    (f"dlx.digest.{NS}", "a" * 64 + "\n" + "b" * 5000, "not a sha256"),
    (f"dlx.digest.{NS}", "0" * 64, "registered here from another library"),
    ("dlx.digest.1bad", "a" * 64, "does not name a namespace"),
    ("dlx.digest.", "a" * 64, "does not name a namespace"),
    ("dlx.digest.unknown_ns", "a" * 64, "no library is registered under 'unknown_ns'"),
    (None, None, "carries no dlx.digest.<namespace> entries"),  # manifest, digests removed
], ids=["unknown", "empty", "upper_hex", "huge", "other_digest", "digit_ns", "no_ns",
        "unregistered_ns", "digests_removed"])
def test_forged_metadata_is_refused(program, package, tmp_path, key, value, want):
    path, inputs, _ = package

    def forge(meta):
        del meta[f"dlx.digest.{NS}"]
        if key is not None:
            meta[key] = value

    forged = _with_metadata(path, tmp_path / "forged.pt2", forge)
    r = run(program, "--register", LIB, NS, "--run", forged, inputs)
    _refused(r, want)
    assert len(r.stdout.splitlines()[-1]) < 1024 and "b" * 80 not in r.stdout  # bounded
