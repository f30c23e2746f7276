"""dlx operators over torch DTensors (issue 32; docs/torch.md, "Many devices"): each operator
dlx.torch.register makes has a sharding strategy derived from its declaration. 4 gloo ranks
on loopback run every scenario in one spawn (dtensor_tasks.sharding_worker, which checks
each result against the same kernel on whole tensors); this file checks what they report."""
import json

import pytest

import dlx
import dtensor_tasks
from test_processes import child_env, free_port, run_torch_spawn  # noqa: F401 (a fixture)

WORLD = 4


def _dtensor_torch():
    torch = pytest.importorskip("torch", reason="torch is not installed in this interpreter")
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("this torch has no gloo backend")
    try:
        import torch.distributed.tensor  # noqa: F401
    except ImportError:
        pytest.skip(f"torch {torch.__version__} has no DTensor")
    version = tuple(int("".join(c for c in p if c.isdigit()) or 0)
                    for p in torch.__version__.split("+")[0].split(".")[:2])
    if version < (2, 5):
        pytest.skip(f"dlx.torch.register needs torch 2.5 or newer, this is {torch.__version__}")
    return torch


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    _dtensor_torch()
    import dlx.torch

    mp = pytest.MonkeyPatch()
    mp.setenv("GLOO_SOCKET_IFNAME", "lo")  # loopback only
    here = tmp_path_factory.mktemp("dtensor")
    try:
        lib = dlx.load_inline(dtensor_tasks.SHARD_KERNELS, name="shard_kernels")
        dlx.torch.ensure_addon(dlx.torch.backend())  # built once here, not by every rank
        run_torch_spawn(dtensor_tasks.sharding_worker, (lib, WORLD, free_port(), str(here)),
                        WORLD)
    finally:
        mp.undo()
    return json.loads((here / "report.json").read_text())


def test_batch_shard_stays_and_each_rank_sees_its_quarter(report):
    # (8, 6) float32 over 4 ranks on the batch: every kernel call got 12 of 48 elements
    assert report["seen_batch"] == 48 / WORLD


def test_other_dimensions_are_replicated_first(report):
    assert report["seen_other"] == 48  # Shard(1) of f32[..., n]: n is read whole


def test_uneven_batch(report):
    # (10, 2, 3) over 4 ranks on dim 0: torch.chunk's 3, 3, 3, 1 rows of 6
    assert report["seen_uneven"] == [18, 18, 18, 6]


def test_two_batches_shard_only_where_they_are_the_same(report):
    """x: f32[..., n], y: f32[..., n], x (8, 8) Shard(0): y (8, 8), whatever its placement,
    is sharded like x (each call 2 rows of each); y of one row, or none, broadcasts: the
    call is replicated (x gathered) and sees what the plain call sees. Values equal the
    plain call's in every case (dtensor_tasks checks them)."""
    v = report["seen_add"]
    for name in ("same_shard", "same_replicated", "same_other_dim"):
        assert v[name]["placements"] == ["Shard(dim=0)"], (name, v[name])
        assert v[name]["seen"] == [16 * 1000 + 16], (name, v[name])
    for name in ("one_row", "no_batch"):
        assert v[name]["placements"] == ["Replicate()"], (name, v[name])
        assert v[name]["seen"] == [v[name]["want_seen"]] == [64 * 1000 + 8], (name, v[name])


def test_mut_parameter_that_cannot_keep_its_placement_is_refused(report):
    msg = report["mut_partial"]
    assert "shard_accum(): 'acc' is mut" in msg and "Partial" in msg, msg


def test_inside_torch_compile(report):
    assert report["compile"] == "ok", report["compile"]


def test_registration_without_dtensor_strategy_api_is_quiet():
    """A torch whose DTensor lacks the strategy API: register() makes the operators and
    skips the strategies (torch_shard._dtensor_api answers None)."""
    torch = _dtensor_torch()
    from dlx import torch_shard

    assert torch_shard._dtensor_api(torch) is not None
    assert torch_shard._dtensor_api(type("NoDistributed", (), {})) is None


def test_kernel_making_more_than_its_slice_is_refused_on_each_rank(report):
    # 2 rows in, 3 out: checked against the rank's local call (n=6, 2 rows)
    msg = report["overrun"]
    assert "shard_overrun(): result 0 must be f32[..., n]" in msg and "[3, 6]" in msg, msg


_EAGER = r"""
import os, sys
import torch, torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import distribute_tensor, Shard
import dlx, dlx.torch
sys.path.insert(0, {here!r})
import dtensor_tasks

os.environ["GLOO_SOCKET_IFNAME"] = "lo"
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:{port}", rank=0, world_size=1)
mesh = init_device_mesh("cpu", (1,))
x = torch.arange(12, dtype=torch.float32).reshape(4, 3)
w = torch.full((3,), 2.0)
dx, dw = distribute_tensor(x, mesh, [Shard(0)]), distribute_tensor(w, mesh, [Shard(0)])
lib = dlx.load_inline(dtensor_tasks.SHARD_KERNELS, name="shard_kernels")
try:
    lib.shard_scale(dx, dw)
except Exception as e:
    print("unregistered:", type(e).__name__, e)
dlx.torch.register(lib, "dlx_eager_dt")
out = lib.shard_scale(dx, dw)
print("registered:", type(out).__name__, torch.equal(out.full_tensor(), lib.shard_scale(x, w)))
dist.destroy_process_group()
"""


@pytest.mark.parametrize("table", ["auto", "native"])
def test_eager_call_on_a_dtensor(table, child_env):
    """lib.NAME(dtensor) outside torch.compile: a DTensor owns no memory a kernel can read
    (this crashed the process); refused by either table's export, the call reaches the
    operator (its sharding strategy), and an unregistered kernel says what to do."""
    _dtensor_torch()
    import os
    import subprocess
    import sys

    env = dict(os.environ)  # child_env: PYTHONPATH as this process's
    env["DLX_TORCH_TABLE"] = table
    code = _EAGER.format(here=os.path.dirname(dtensor_tasks.__file__), port=free_port())
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = dict(line.split(": ", 1) for line in r.stdout.splitlines() if ": " in line)
    assert lines.get("registered") == "DTensor True", r.stdout + r.stderr[-2000:]
    unreg = lines.get("unregistered", "")
    assert "shard_scale()" in unreg and "__torch_dispatch__" in unreg, unreg
