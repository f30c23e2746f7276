"""AOTInductor from C++ with no Python (issue 31, item 6; docs/torch.md, "From C++"): Python
compiles a package holding dlx operators (test_aoti.py's model); a C++ program
(tests/aoti/main.cc) built with CMake against the wheel's libtorch and dlx::torch_ops
(find_package(dlx)) calls dlx_torch_register(lib, ns), loads the package with
torch::inductor::AOTIModelPackageLoader and gets eager's values. The program links no
libpython and runs with no Python variable in its environment. Bad input to
dlx_torch_register is -1 with a message, never a crash.

The program is built once per set of sources and torch (under the build folder: about a
minute on a small machine); the package is compiled once for the module."""
import hashlib
import os
import pathlib
import shutil
import subprocess

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
