"""What an installed dlx offers besides kernels: dlx.torch after a plain `import dlx`
(without importing torch), and the folders and flags kernel authors' build systems use
(python -m dlx --include-dir/--cflags/--cmake-dir/--pkgconfig-dir). The wheel itself is
checked end to end by tests/install/run.sh (make test-install)."""
import os
import shlex
import shutil
import subprocess
import sys
import tarfile

import pytest

import dlx
from conftest import PYPATH, ROOT, run_python


def cli(*args):
    env = dict(os.environ, PYTHONPATH=PYPATH)
    return subprocess.run([sys.executable, "-m", "dlx", *args], env=env, capture_output=True,
                          text=True)


def test_import_dlx_does_not_import_torch_and_dlx_torch_resolves():
    r = run_python(
        "import sys, dlx\n"
        "assert 'torch' not in sys.modules, 'import dlx imported torch'\n"
        "assert 'dlx.torch' not in sys.modules\n"
        "m = dlx.torch\n"
        "assert m is sys.modules['dlx.torch'] and m.__name__ == 'dlx.torch'\n"
        "assert 'torch' not in sys.modules, 'dlx.torch imported torch before it was used'\n"
        "print(sorted(n for n in ('backend', 'install', 'Record') if hasattr(m, n)))\n")
    assert r.stdout.split() == ["['Record',", "'backend',", "'install']"]


def test_dlx_torch_install_after_plain_import():
    pytest.importorskip("torch")
    r = run_python("import dlx\nrec = dlx.torch.install()\n"
                   "print(rec.source, rec.backend, dlx.torch.backend())\n")
    source, backend, selected = r.stdout.split()
    assert source in ("native", "native+stream", "addon") and backend == selected


def test_the_dlx_under_test_is_the_installed_one_unless_the_build_is_on_the_path():
    """The venv's suite runs against dlx as pip installed it (make venv), not a build tree:
    what the interpreter imports is the distribution's own files."""
    import conftest
    from importlib import metadata

    if conftest._FROM_BUILD:
        pytest.skip(f"dlx comes from the build ({conftest.BUILD / 'python'}) here")
    dist = metadata.distribution("dlx")  # not from the build: installed, or nothing is right
    core = os.path.realpath(dlx._core.__file__)
    assert core.startswith(os.path.realpath(sys.prefix) + os.sep), (core, sys.prefix)
    assert os.path.realpath(dist.locate_file(f"dlx/{os.path.basename(core)}")) == core
    assert f"dlx/{os.path.basename(core)}" in {str(f) for f in dist.files}


def test_unknown_attribute_is_still_an_attribute_error():
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        dlx.no_such_name  # noqa: B018
    assert not hasattr(dlx, "tensorflow")


@pytest.mark.parametrize("flag, fn", [("--include-dir", dlx.include_dir),
                                      ("--cmake-dir", dlx.cmake_dir),
                                      ("--pkgconfig-dir", dlx.pkgconfig_dir)])
def test_folder_flags_print_the_package_folders(flag, fn):
    r = cli(flag)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == fn()
    assert os.path.isdir(fn())


def test_folders_hold_what_the_build_systems_look_for():
    assert os.path.isfile(os.path.join(dlx.include_dir(), "dlx", "dlx.h"))
    assert os.path.isfile(os.path.join(dlx.include_dir(), "dlx", "dlpack.h"))
    for name in ("dlxConfig.cmake", "dlxConfigVersion.cmake", "dlxKernels.cmake"):
        assert os.path.isfile(os.path.join(dlx.cmake_dir(), name)), name
    assert os.path.isfile(os.path.join(dlx.pkgconfig_dir(), "dlx.pc"))


def test_cflags_name_the_include_dir_and_match_pkg_config():
    r = cli("--cflags")
    assert r.returncode == 0, r.stderr
    assert shlex.split(r.stdout) == ["-I" + dlx.include_dir()]
    if shutil.which("pkg-config") is None:
        pytest.skip("pkg-config is not installed")
    env = dict(os.environ, PKG_CONFIG_PATH=dlx.pkgconfig_dir())
    pc = subprocess.run(["pkg-config", "--cflags", "dlx"], env=env, capture_output=True,
                        text=True)
    assert pc.returncode == 0, pc.stderr
    (flag,) = shlex.split(pc.stdout)
    assert flag.startswith("-I")
    assert os.path.realpath(flag[2:]) == os.path.realpath(dlx.include_dir())


def test_flags_take_no_arguments():
    r = cli("--cmake-dir", "extra")
    assert r.returncode == 2 and "--cmake-dir takes no arguments" in r.stderr


def test_the_sdist_carries_every_source_the_build_needs(tmp_path):
    """`python -m build --sdist` (scikit-build-core): every file under src/, include/, cmake/
    and python/ is in the archive, folders named build inside them too (an unanchored
    exclude once dropped src/core/build, now src/core/toolchain, and an sdist could not build)."""
    pytest.importorskip("scikit_build_core")
    r = subprocess.run([sys.executable, "-c", "import sys; from scikit_build_core.build import "
                        "build_sdist; print(build_sdist(sys.argv[1]))", str(tmp_path)],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    with tarfile.open(tmp_path / r.stdout.split()[-1]) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    wanted = {str(p.relative_to(ROOT)) for top in ("src", "include", "cmake", "python")
              for p in (ROOT / top).rglob("*")
              if p.is_file() and "__pycache__" not in p.parts}
    assert wanted and not wanted - names, sorted(wanted - names)[:10]
    assert not any(n.startswith(("build/", ".venv/")) for n in names)  # the trees, not sources
