"""A torch addon build that lacks a header (a fresh machine without pybind11-dev, say) names
the header and the Debian package that provides it: in the exception and in doctor. The
compiler really runs and really misses the header: DLX_CXXFLAGS makes it include one that is
not there, under a folder whose package dlx knows."""
import os
import subprocess
import sys

import pytest

from conftest import PYPATH

pytest.importorskip("torch")
import dlx._core as core  # noqa: E402

MISSING = "pybind11/dlx_not_installed.h"


def env(tmp_path):
    # Its own cache: the extra flag changes the identity, so nothing cached is reused.
    return dict(os.environ, PYTHONPATH=PYPATH, DLX_CACHE_DIR=str(tmp_path / "cache"),
                DLX_CXXFLAGS=f"-include {MISSING}")


def test_build_error_names_header_and_package(tmp_path):
    code = ("import dlx.torch\n"
            "try:\n    dlx.torch.ensure_addon('cpu')\n"  # install() builds nothing on a torch
                                                          # with its own table
            "except RuntimeError as e:\n    print(str(e).splitlines()[0])\n"
            "else:\n    raise SystemExit('the build did not fail')\n")
    r = subprocess.run([sys.executable, "-c", code], env=env(tmp_path), capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    first = r.stdout.strip()
    assert first.startswith("building the torch addon ")
    assert first.endswith(f"(missing header {MISSING}: install the Debian package pybind11-dev)")


@pytest.mark.skipif(
    __import__("torch").Tensor.__dict__.get("__dlpack_c_exchange_api__") is not None,
    reason="torch ships its own exchange table here: doctor builds no addon")
def test_doctor_names_header_and_package(tmp_path):
    r = subprocess.run([sys.executable, "-m", "dlx", "doctor"], env=env(tmp_path),
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert (f"  missing header: {MISSING} — install the Debian package pybind11-dev "
            "(apt-get install pybind11-dev)") in r.stdout.splitlines(), r.stdout


@pytest.mark.parametrize("output, expected", [
    ("x.cc:1:10: fatal error: torch/extension.h: No such file or directory\n",
     ("torch/extension.h", "libtorch-dev")),
    ("x.c:1:10: fatal error: 'Python.h' file not found\n", ("Python.h", "python3-dev")),
    ("x.c:1:10: fatal error: zzz/unknown.h: No such file or directory\n",
     ("zzz/unknown.h", None)),
    ("x.c:3:1: error: expected ';'\n", None),
])
def test_missing_header_from_compiler_output(output, expected):
    assert core.missing_header(output) == expected
