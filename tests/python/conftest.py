"""Shared fixtures: where the build put kernels and the fixture framework."""
import os
import pathlib
import subprocess
import sys
import tempfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
# tests/python: conftest.py and the helpers every group of tests shares (dlpack_ctypes.py);
# pytest puts it on sys.path for the tests; a child process that imports them is given it
TESTS = pathlib.Path(__file__).resolve().parent
BUILD = pathlib.Path(os.environ.get("DLX_BUILD_DIR", ROOT / "build"))

# One addon cache for the whole session, never the developer's own ~/.cache/dlx: the
# first torch tensor that reaches a kernel builds the addon here (once), later tests reuse it.
_SESSION_CACHE = tempfile.TemporaryDirectory(prefix="dlx-test-cache-")
os.environ["DLX_CACHE_DIR"] = _SESSION_CACHE.name
for var in ("DLX_BACKEND", "DLX_DISABLE_TORCH_ADDON", "DLX_TORCH_TABLE", "CXX", "DLX_CXXFLAGS",
            "DLX_LDFLAGS"):
    os.environ.pop(var, None)

# The dlx under test: the build's (BUILD/python on PYTHONPATH, Debian's python3) or the one
# installed into the interpreter (the venv: pip install of the tree). Child processes get
# the same one, and the fixtures from the build.
import dlx  # noqa: E402

_DLX_HOME = pathlib.Path(dlx.__file__).resolve().parents[1]
_FROM_BUILD = _DLX_HOME == (BUILD / "python").resolve()
PYPATH = os.pathsep.join(([str(BUILD / "python")] if _FROM_BUILD else []) + [str(BUILD / "fixtures")])


def run_python(code, env=None, check=True, timeout=600):
    """Run `code` in a fresh process of this interpreter (dlx and fixtures importable);
    returns the CompletedProcess with text stdout/stderr."""
    full_env = dict(os.environ, PYTHONPATH=PYPATH, DLX_BUILD_DIR=str(BUILD))
    full_env.update(env or {})
    r = subprocess.run([sys.executable, "-c", code], env=full_env, capture_output=True,
                       text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"subprocess failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r


@pytest.fixture(scope="session")
def build_dir():
    return BUILD


@pytest.fixture(scope="session")
def kernels():
    import dlx

    return dlx.load(BUILD / "kernels" / "test_kernels.so")


@pytest.fixture(scope="session")
def examples():
    import dlx

    class Examples:
        saxpy = dlx.load(BUILD / "examples" / "saxpy.so")
        report = dlx.load(BUILD / "examples" / "stream_report.so")

    return Examples


@pytest.fixture()
def fx():
    """The stand-in framework (tests/fixtures/dlx_fixture.c), with its counters and this
    thread's current streams reset (no test sees another's streams, whatever the order),
    and a check that every export it made was released exactly once."""
    import dlx_fixture

    dlx_fixture.reset_stats()
    dlx_fixture.reset_streams()
    live = dlx_fixture.stats()["live"]
    yield dlx_fixture
    import gc

    gc.collect()
    stats = dlx_fixture.stats()
    assert stats["live"] == live, f"unbalanced exports/deleters: {stats}"
