"""dlx kernels as Ray tasks (issue 24). Ray is pinned in .venv (ray 2.60.0, ~260 MB with its
dependencies; scripts/venv-requirements.txt) and a local instance starts on 2 cores in a few
seconds; the other interpreters have no Ray and skip.

Ray 2.60's servers (GCS, raylet, workers) listen on every interface whatever node address
they are given, so the instance runs in a child process inside a network namespace of its
own (`unshare --net`) whose only interface is loopback: nothing it opens is reachable from
outside the machine. One local instance, 2 CPUs, no dashboard; the workers get a cache folder
of their own, so the load_inline library is built there from its source."""
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

pytest.importorskip("ray", reason="Ray is not installed in this interpreter (it is pinned in "
                    ".venv only)")

from conftest import BUILD, PYPATH  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

RAY_TASKS = r"""
import os, socket, subprocess, sys
import numpy as np
subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
assert [n for _, n in socket.if_nameindex()] == ["lo"], socket.if_nameindex()
import ray
import dlx, proc_tasks
workers_cache, temp = sys.argv[1], sys.argv[2]
env = {"DLX_CACHE_DIR": workers_cache, "PYTHONPATH": os.environ["PYTHONPATH"]}
ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", _temp_dir=temp,
         runtime_env={"env_vars": env})
try:
    lib = dlx.load_inline(proc_tasks.POLY, name="poly")
    apply = ray.remote(proc_tasks.apply)
    chunks = np.split(np.arange(64, dtype=np.float32), 4)
    got = ray.get([apply.remote(lib.poly, c, 0.5) for c in chunks], timeout=180)
    for c, g in zip(chunks, got):
        np.testing.assert_array_equal(g, c * c + np.float32(0.5))
finally:
    ray.shutdown()
print("ok", len(got))
"""


def loopback_namespace():
    """The command prefix that runs a child in a network namespace of its own, or None."""
    unshare, ip = shutil.which("unshare"), shutil.which("ip")
    if not unshare or not ip:
        return None
    probe = subprocess.run([unshare, "--net", "--", ip, "link", "set", "lo", "up"],
                           capture_output=True, text=True, timeout=30)
    return [unshare, "--net", "--"] if probe.returncode == 0 else None


def test_ray_tasks_run_kernels(tmp_path):
    prefix = loopback_namespace()
    if prefix is None:
        pytest.skip("no private network namespace here (unshare --net needs CAP_SYS_ADMIN): "
                    "Ray would listen on every interface")
    workers_cache = tmp_path / "workers-cache"
    # Ray's session folder holds unix sockets: a short path
    temp = tempfile.mkdtemp(prefix="ray-", dir="/tmp")
    env = dict(os.environ, DLX_CACHE_DIR=str(tmp_path / "driver-cache"), DLX_BUILD_DIR=str(BUILD),
               PYTHONPATH=os.pathsep.join([HERE, PYPATH, os.environ.get("PYTHONPATH", "")]))
    try:
        r = subprocess.run(prefix + [sys.executable, "-c", RAY_TASKS, str(workers_cache), temp],
                           env=env, capture_output=True, text=True, timeout=300)
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    assert r.returncode == 0, f"{r.stdout}\n{r.stderr[-4000:]}"
    assert r.stdout.split()[-2:] == ["ok", "4"], r.stdout
    assert any(n.startswith("libpoly-") for n in os.listdir(workers_cache / "kernels"))
