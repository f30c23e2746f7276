"""dlx kernels as Dask tasks (issue 24): one distributed.LocalCluster for the module (2
worker processes, 127.0.0.1, no dashboard) whose workers have a cache folder of their own,
empty at the start: a load_inline library reaches them as its source and is built there.
Results equal the same kernels run here."""
import os
import uuid

import numpy as np
import pytest

from conftest import BUILD, PYPATH

distributed = pytest.importorskip("distributed", reason="Dask's distributed is not installed "
                                  "in this interpreter (pinned in scripts/venv-requirements.txt)")
da = pytest.importorskip("dask.array", reason="dask.array is not installed in this interpreter")

import dlx  # noqa: E402
import proc_tasks  # noqa: E402

WAIT = 180

ADD = r"""
#include <dlx/dlx.h>
/* NONCE */
DLX_KERNEL(add) {
  int64_t a, b;
  if (dlx_arg_int(call, 0, &a) || dlx_arg_int(call, 1, &b)) return -1;
  return dlx_return_int(call, a + b);
}
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    workers_cache = tmp_path_factory.mktemp("dask-workers") / "cache"
    here = os.path.dirname(os.path.abspath(__file__))
    env = {"DLX_CACHE_DIR": str(workers_cache), "DLX_BUILD_DIR": str(BUILD),
           "PYTHONPATH": os.pathsep.join([here, PYPATH])}
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=None, env=env,
                                  silence_logs=40) as c, distributed.Client(c) as client:
        client.wait_for_workers(2, timeout=WAIT)
        yield client, workers_cache


def built_on_workers(workers_cache, name):
    kernels = workers_cache / "kernels"
    return sorted(n for n in os.listdir(kernels) if n.startswith(f"lib{name}-") and n.endswith(".so")) \
        if kernels.exists() else []


def test_map_blocks_with_a_load_inline_kernel_built_on_the_workers(cluster):
    client, workers_cache = cluster
    assert built_on_workers(workers_cache, "poly") == []
    lib = dlx.load_inline(proc_tasks.POLY, name="poly")
    x = np.random.default_rng(1).standard_normal(64 * 500).astype(np.float32)
    arr = da.from_array(x, chunks=500)
    y = arr.map_blocks(proc_tasks.apply_block, lib.poly, 0.25, dtype=np.float32)
    got = client.compute(y).result(timeout=WAIT)
    np.testing.assert_array_equal(got, proc_tasks.apply(lib.poly, x, 0.25))
    assert len(built_on_workers(workers_cache, "poly")) == 1  # built there, from the source
    pids = set(client.run(os.getpid).values())
    assert len(pids) == 2 and os.getpid() not in pids


def test_submit_kernels_themselves(cluster):
    client, workers_cache = cluster
    # source never built anywhere before: the workers build it from what the pickle carries
    nonce = uuid.uuid4().hex
    lib = dlx.load_inline(ADD.replace("NONCE", nonce), name="adder")
    futures = [client.submit(lib.add, i, 100, pure=False) for i in range(8)]
    assert client.gather(futures, errors="raise") == [i + 100 for i in range(8)]
    assert len(built_on_workers(workers_cache, "adder")) == 1
    files = dlx.load(BUILD / "kernels" / "test_kernels.so")
    x = np.arange(10, dtype=np.float32)
    assert client.submit(files.sum, x).result(timeout=WAIT) == float(x.sum())
    assert client.submit(files.echo_int, 7).result(timeout=WAIT) == 7


def test_kernel_errors_come_back_as_themselves(cluster):
    client, _ = cluster
    files = dlx.load(BUILD / "kernels" / "test_kernels.so")
    with pytest.raises(ValueError, match=r"fail_value\(\): bad value 42"):
        client.submit(files.fail_value).result(timeout=WAIT)
