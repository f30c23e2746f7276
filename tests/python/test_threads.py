"""dlx from many threads at once (issue 23): under a free-threaded CPython with no GIL at
all, and under the GIL interpreters (where the GIL is released by nogil kernels and
between bytecodes). Everything that touches dlx's shared state runs in 8 threads at once in
a child process (tests/python/threads_stress.py): a crash or a hang fails this test."""
import os
import pathlib
import sys

import pytest

from conftest import BUILD, run_python

pytest.importorskip("numpy")

HERE = pathlib.Path(__file__).resolve().parent


def test_eight_threads_at_once():
    r = run_python(
        f"import runpy, sys; sys.argv = ['threads_stress.py', {str(BUILD)!r}, '40']; "
        f"runpy.run_path({str(HERE / 'threads_stress.py')!r}, run_name='__main__')",
        check=False, timeout=300)
    assert r.returncode == 0, f"stress run failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
    out = r.stdout.split()
    assert out[:2] == ["ok", str(8 * 40 * 16)], r.stdout


def test_import_keeps_the_gil_disabled():
    """A free-threaded interpreter stays free-threaded after `import dlx` and a call (an
    extension that does not declare itself safe turns the GIL back on, with a warning)."""
    if not hasattr(sys, "_is_gil_enabled"):
        pytest.skip("CPython before 3.13: no free-threaded build")
    import sysconfig

    if not sysconfig.get_config_var("Py_GIL_DISABLED"):
        pytest.skip("a GIL build of CPython")
    if os.environ.get("PYTHON_GIL"):
        pytest.skip("PYTHON_GIL is set: the GIL is what it says")
    r = run_python(
        "import sys, warnings; warnings.simplefilter('error')\n"
        "import numpy, dlx, dlx_fixture\n"
        f"k = dlx.load({str(BUILD / 'kernels' / 'test_kernels.so')!r})\n"
        "assert k.sum(numpy.ones(3)) == 3.0\n"
        "print(sys._is_gil_enabled())")
    assert r.stdout.split()[-1] == "False", r.stderr


def test_doctor_reports_the_gil():
    from dlx.__main__ import gil_state

    gil = getattr(sys, "_is_gil_enabled", lambda: True)()
    assert gil_state() == "disabled (free-threaded)" if not gil else gil_state().startswith("enabled")
