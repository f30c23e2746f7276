"""Builds that hang (issue 7, item 20): DLX_BUILD_TIMEOUT bounds the compiler run (its
process group is killed) and the wait for another process's build of the same file."""
import fcntl
import os
import subprocess
import sys
import time

import pytest

from conftest import PYPATH

torch = pytest.importorskip("torch")
import dlx.torch as dt  # noqa: E402


def build_addon(out_dir, **env):
    full = dict(os.environ, PYTHONPATH=PYPATH, **env)
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "dlx", "build-addon", "--output-dir", str(out_dir)],
                       env=full, capture_output=True, text=True, timeout=300)
    return r, time.monotonic() - t0


def running(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


def test_hanging_compiler_is_killed_with_its_group(tmp_path):
    pids = tmp_path / "pids"
    fake = tmp_path / "fake-c++"
    fake.write_text("#!/bin/sh\n"
                    f"echo $$ > {pids}\n"
                    "sleep 300 &\n"
                    f"echo $! >> {pids}\n"
                    "echo fake compiler is thinking\n"
                    "wait\n")
    fake.chmod(0o755)
    r, took = build_addon(tmp_path / "out", CXX=str(fake), DLX_BUILD_TIMEOUT="2")
    assert r.returncode != 0
    assert took < 120
    err = r.stderr
    assert "timed out" in err and "DLX_BUILD_TIMEOUT" in err and "process group" in err, err
    assert "fake compiler is thinking" in err  # its output so far is shown
    shell, sleeper = (int(p) for p in pids.read_text().split())
    deadline = time.monotonic() + 5
    while (running(shell) or running(sleeper)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not running(shell) and not running(sleeper)
    assert not [p for p in os.listdir(tmp_path / "out") if ".tmp." in p]  # no temp file left


def test_waiting_builder_says_so_once_and_gives_up(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    _, name = dt.identity(dt.build_spec("cpu"))
    with open(out / (name + ".lock"), "w") as held:  # another "build" in progress
        fcntl.flock(held, fcntl.LOCK_EX)
        r, took = build_addon(out, DLX_BUILD_TIMEOUT="2")
    assert r.returncode != 0 and 1.5 < took < 120
    assert r.stderr.count("waiting for another build of") == 1, r.stderr
    assert name in r.stderr and "gave up after 2 s" in r.stderr
    assert "dlx: building" not in r.stderr  # it never compiled
    assert not (out / name).exists()


@pytest.mark.parametrize("value", ["0", "-1", "soon"])
def test_bad_timeout_is_a_clear_error(tmp_path, value):
    r, _ = build_addon(tmp_path / "out", DLX_BUILD_TIMEOUT=value)
    assert r.returncode != 0
    assert "DLX_BUILD_TIMEOUT" in r.stderr and value in r.stderr
    assert "dlx: building" not in r.stderr
