"""`python -m dlx check` and dlx.check.run under bad input: a target whose import hangs is
one FAIL after --import-timeout (exit 2), one that raises is one line (exit 2), devices
DLPack cannot hold or malformed device tuples are refused by name."""
import os
import subprocess
import sys

import pytest

from conftest import PYPATH
from dlx import check


@pytest.fixture()
def mods(tmp_path):
    (tmp_path / "badpkg").mkdir()
    (tmp_path / "badpkg" / "__init__.py").write_text('raise RuntimeError("boom at import")\n')
    (tmp_path / "badmod.py").write_text('raise RuntimeError("boom\\nsecond line")\n')
    (tmp_path / "hangmod.py").write_text("import time\ntime.sleep(1000)\n")
    (tmp_path / "hangpkg").mkdir()
    (tmp_path / "hangpkg" / "__init__.py").write_text("import time\ntime.sleep(1000)\n")
    return tmp_path


def cli(folder, *args, timeout=120):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([PYPATH, str(folder)]))
    return subprocess.run([sys.executable, "-m", "dlx", "check", *args], env=env, cwd=folder,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("target", ["hangmod:T", "hangpkg.sub:T"])
def test_a_hanging_import_is_a_fail_after_the_import_timeout(mods, target):
    r = cli(mods, target, "--import-timeout", "1.5")  # was: 600 s (a package: forever)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert f"FAIL  target.import  importing {target} did not finish within 1.5 s" in r.stdout
    assert "Traceback" not in r.stderr


def test_a_hanging_import_from_python(mods, monkeypatch):
    monkeypatch.syspath_prepend(str(mods))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([PYPATH, str(mods)]))
    report = check.run("hangmod:T", import_timeout=1)
    assert [(c.name, c.status) for c in report] == [("target.import", "FAIL")]
    assert report.exit_code == 2 and not report.ok


@pytest.mark.parametrize("target,message", [
    ("badpkg.sub:T", "cannot load target badpkg.sub:T: RuntimeError: boom at import"),
    ("badmod:T", "cannot load target badmod:T: RuntimeError: boom"),
])
def test_an_import_error_is_one_line(mods, target, message):
    r = cli(mods, target)  # was: a traceback from the parent's find_spec (a package)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [f"python -m dlx check: error: {message}"]


@pytest.mark.parametrize("device", ["2:2147483648", f"{2**31}:0", "2:1099511627776",
                                    f"{2**40}:0", "cuda:-1", "0:0"])
def test_devices_dlpack_cannot_hold_are_usage_errors(mods, device):
    r = cli(mods, "numpy:ndarray", "--device", device)  # was: accepted and ignored
    assert r.returncode == 2
    assert f"bad device {device!r}" in r.stderr and "usage:" in r.stderr


@pytest.mark.parametrize("value", ["0", "-1", "x", "nan"])
def test_bad_timeouts_are_usage_errors(mods, value):
    r = cli(mods, "numpy:ndarray", "--import-timeout", value)
    assert r.returncode == 2 and "import_timeout must be a" in r.stderr


@pytest.mark.parametrize("devices,kind", [
    ([(2, "a")], TypeError), ([(1.5, 0)], TypeError), ([(2, 0, 0)], TypeError),
    ([None], TypeError), ([(True, 0)], TypeError), (5, TypeError),
    ([(2**31, 0)], ValueError), ([(2, 2**40)], ValueError), ([(2, -1)], ValueError),
])
def test_run_refuses_malformed_devices(devices, kind):
    with pytest.raises(kind, match="device"):  # was: ValueError from int()
        check.run("numpy:ndarray", devices=devices)


def test_devices_parse():
    assert check.parse_device("cuda:3") == (2, 3)
    assert check.parse_device((12, 1)) == (12, 1)
    assert check.parse_device([2, 2**31 - 1]) == (2, 2**31 - 1)
