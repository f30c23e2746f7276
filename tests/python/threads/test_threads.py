"""dlx from many threads at once (issue 23): under a free-threaded CPython with no GIL at
all, and under the GIL interpreters (where the GIL is released by nogil kernels and
between bytecodes). Everything that touches dlx's shared state runs in 8 threads at once in
a child process (tests/python/threads/threads_stress.py): a crash or a hang fails this test."""
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


GIL_HANDOFF = r"""
import sys, threading
import numpy as np
import dlx
sk = dlx.load(sys.argv[1])
stats = dlx._core._stats

def counts():
    s = stats()
    return s["gil_handoffs"], s["gil_spin_timeouts"]

# A stale hint: thread B took the GIL back after a nogil kernel, then waits in Python (GIL
# released, not through dlx). This thread's next nogil call spins once, to the bound; the
# calls after it spin no more.
ready, done = threading.Event(), threading.Event()
def stale():
    sk.busy_nogil(0)
    ready.set()
    done.wait()
t = threading.Thread(target=stale)
t.start()
ready.wait()
c0 = counts()
sk.busy_nogil(0)
c1 = counts()
for _ in range(200):
    sk.busy_nogil(0)
c2 = counts()
done.set()
t.join()
print("stale", c1[0] - c0[0], c1[1] - c0[1], c2[0] - c1[0], c2[1] - c1[1])

# A hand-over: this thread's kernel ends while B holds the GIL between two nogil calls;
# B's next call releases it, and this thread takes it without waiting as CPython would.
# B releases once this thread is spinning; a long bound, so that a busy machine preempting
# B cannot outlast it.
flags, then = np.zeros(2, np.int64), np.zeros(2, np.int64)
b_ready = threading.Event()
def holder():
    sk.busy_nogil(0)                     # B's hint: it holds the GIL from here
    b_ready.set()
    while flags[0] != 1:                 # Python, holding the GIL: until A's kernel runs
        pass
    flags[1] = 1                         # A's kernel ends now, finds B holding the GIL
    while stats()["gil_spinning"] == 0:  # and spins
        pass
    sk.await_flag_nogil(then, 10000)     # B hands the GIL over here; its kernel ends once
b = threading.Thread(target=holder)      # A has it (or B could take it back first)
b.start()
b_ready.wait()
bound = dlx._core._gil_spin_ns(10 * 10**9)
h0 = counts()
sk.await_flag_nogil(flags, 10000)
then[1] = 1
h1 = counts()
dlx._core._gil_spin_ns(bound)          # B's own next spin (this thread holds the GIL) ends
b.join()
assert flags[0] == 2
print("handed", h1[0] - h0[0], h1[1] - h0[1])
"""


@pytest.mark.skipif(not getattr(sys, "_is_gil_enabled", lambda: True)(),
                    reason="no GIL to hand over (free-threaded)")
def test_nogil_calls_hand_the_gil_over():
    """dlx_gil.h: a thread whose nogil kernel ends while another dlx caller holds the GIL
    between its calls spins until that caller's next release instead of sleeping in
    CPython's wait; a hint left by a thread that went on to other work costs one bounded
    spin, then none."""
    so = BUILD / "kernels" / "sig_kernels.so"
    r = run_python(f"import sys; sys.argv[1:] = [{str(so)!r}]\n" + GIL_HANDOFF, timeout=120)
    lines = dict((ln.split()[0], ln.split()[1:]) for ln in r.stdout.splitlines())
    assert lines["stale"] == ["0", "1", "0", "0"], r.stdout
    assert lines["handed"] == ["1", "0"], r.stdout
