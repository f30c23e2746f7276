"""`python -m dlx` as a newcomer meets it: --help exits 0, an unknown command says which,
build-addon for a runtime this torch lacks ends in one line (exit 2), doctor prints the
kernel ABI as major.minor, and the usage lists check's options."""
import os
import subprocess
import sys

import pytest

from conftest import PYPATH

# dlx without the fixtures folder (it holds a torch_npu stand-in)
NO_FIXTURES = os.pathsep.join(p for p in PYPATH.split(os.pathsep)
                              if os.path.basename(p) != "fixtures")


def dlx_cli(*args, path=PYPATH, tmp_path=None, **extra):
    env = dict(os.environ, PYTHONPATH=path, **extra)
    if tmp_path is not None:
        env["DLX_CACHE_DIR"] = str(tmp_path / "cache")
    return subprocess.run([sys.executable, "-m", "dlx", *args], env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.parametrize("flag", ["--help", "-h", "help"])
def test_help_exits_0_on_stdout(flag):
    r = dlx_cli(flag)  # was: exit 2, on stderr
    assert r.returncode == 0 and r.stdout.startswith("usage: python -m dlx COMMAND")
    assert "[--select PREFIX]" in r.stdout  # check's options, --select among them


def test_no_command_and_unknown_command_are_usage_errors():
    r = dlx_cli()
    assert r.returncode == 2 and r.stderr.startswith("usage:")
    r = dlx_cli("frobnicate")
    assert r.returncode == 2 and "unknown command 'frobnicate'" in r.stderr


def test_doctor_prints_the_kernel_abi_as_major_minor():
    from dlx import _core

    r = dlx_cli("doctor", DLX_DISABLE_TORCH_ADDON="1")  # no addon to compile
    assert r.returncode == 0, r.stderr
    abi = f"{_core.ABI_VERSION >> 16}.{_core.ABI_VERSION & 0xFFFF}"
    assert f"kernel ABI {abi})" in r.stdout  # was: "kernel ABI 1" where the docs say 1.1


@pytest.mark.parametrize("args,runtime,attr", [(["--backend", "cuda"], "CUDA", "cuda"),
                                               (["--build-with-rocm"], "ROCm", "hip")])
def test_build_addon_for_a_runtime_torch_lacks_is_one_line(args, runtime, attr, tmp_path):
    torch = pytest.importorskip("torch")
    if getattr(torch.version, attr, None) is not None:
        pytest.skip(f"this torch has {runtime}")
    r = dlx_cli("build-addon", *args, tmp_path=tmp_path)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr  # was: a traceback
    assert f"was built without {runtime} (torch.version.{attr} is None)" in lines[0]
    assert "Debian" not in lines[0] and "dlx: building" not in r.stderr


def test_build_addon_for_ascend_without_torch_npu_is_one_line(tmp_path):
    pytest.importorskip("torch")
    r = dlx_cli("build-addon", "--build-with-ascend", path=NO_FIXTURES, tmp_path=tmp_path)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot import torch_npu" in lines[0], r.stderr
