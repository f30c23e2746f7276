"""dlx kernels as Ray tasks (issue 24). Ray is pinned in .venv (ray 2.60.0, ~260 MB with its
dependencies; scripts/venv-requirements.txt) and a local instance starts on 2 cores in a few
seconds; the other interpreters have no Ray and skip. One local instance, 2 CPUs, 127.0.0.1, no dashboard; the workers get a
cache folder of their own, so the load_inline library is built there from its source."""
import os
import shutil
import tempfile

import numpy as np
import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed in this interpreter (it is "
                          "pinned in .venv only)")

import dlx  # noqa: E402
import proc_tasks  # noqa: E402
from conftest import PYPATH  # noqa: E402


def test_ray_tasks_run_kernels(tmp_path):
    workers_cache = tmp_path / "workers-cache"
    here = os.path.dirname(os.path.abspath(__file__))
    # Ray's session folder holds unix sockets: a short path
    temp = tempfile.mkdtemp(prefix="ray-", dir="/tmp")
    env = {"DLX_CACHE_DIR": str(workers_cache),
           "PYTHONPATH": os.pathsep.join([here, PYPATH, os.environ.get("PYTHONPATH", "")])}
    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1",
             _temp_dir=temp, runtime_env={"env_vars": env})
    try:
        lib = dlx.load_inline(proc_tasks.POLY, name="poly")
        apply = ray.remote(proc_tasks.apply)
        chunks = np.split(np.arange(64, dtype=np.float32), 4)
        got = ray.get([apply.remote(lib.poly, c, 0.5) for c in chunks], timeout=180)
        for c, g in zip(chunks, got):
            np.testing.assert_array_equal(g, c * c + np.float32(0.5))
        assert any(n.startswith("libpoly-") for n in os.listdir(workers_cache / "kernels"))
    finally:
        ray.shutdown()
        shutil.rmtree(temp, ignore_errors=True)
