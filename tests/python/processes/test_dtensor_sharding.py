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
