"""What the ranks of tests/python/processes/test_dtensor_sharding.py run (importable by
spawned children): dlx operators called with DTensors, each scenario checked against the
same kernel called on whole tensors in the same process.

Run as a script, it measures one call of shard_scale on a DTensor sharded over 1 and 4
gloo ranks (issue 32's performance rows):
    PYTHONPATH=build-venv/fixtures:tests/python/processes .venv/bin/python \\
        tests/python/processes/dtensor_tasks.py bench
"""
import json
import os
import sys
import time

import numpy as np

# Kernels with distinctive names (shard_*): they read their tensors by strides-free loops,
# so they declare contig; each says what its result is.
SHARD_KERNELS = r"""
#include <dlx/dlx.h>
static int64_t numel(const DLTensor *t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; ++i) n *= t->shape[i];
  return n;
}
static float *at(const DLTensor *t) { return (float *)((char *)t->data + t->byte_offset); }
static int64_t last(const DLTensor *t) { return t->ndim ? t->shape[t->ndim - 1] : 1; }

/* x * w along the last dimension */
DLX_KERNEL(shard_scale, "x: f32[..., n] contig cpu, w: f32[n] contig cpu -> f32[..., n]") {
  DLTensor *x, *w, *out;
  if (dlx_arg_tensor(call, 0, &x) || dlx_arg_tensor(call, 1, &w) ||
      dlx_return_new_tensor(call, x->device, x->ndim, x->shape, x->dtype, &out))
    return -1;
  int64_t n = last(x);
  for (int64_t i = 0, m = numel(x); i < m; ++i) at(out)[i] = at(x)[i] * at(w)[i % n];
  return 0;
}

/* each element: how many elements of x this call received */
DLX_KERNEL(shard_seen, "x: f32[..., n] contig cpu -> f32[..., n]") {
  DLTensor *x, *out;
  if (dlx_arg_tensor(call, 0, &x) ||
      dlx_return_new_tensor(call, x->device, x->ndim, x->shape, x->dtype, &out))
    return -1;
  for (int64_t i = 0, m = numel(x); i < m; ++i) at(out)[i] = (float)m;
  return 0;
}

/* the sum over the last dimension: wrong if that dimension were split */
DLX_KERNEL(shard_rowsum, "x: f32[..., n] contig cpu -> f32[...]") {
  DLTensor *x, *out;
  if (dlx_arg_tensor(call, 0, &x) ||
      dlx_return_new_tensor(call, x->device, x->ndim - 1, x->shape, x->dtype, &out))
    return -1;
  int64_t n = last(x), rows = numel(x) / (n ? n : 1);
  for (int64_t r = 0; r < rows; ++r) {
    float s = 0;
    for (int64_t j = 0; j < n; ++j) s += at(x)[r * n + j];
    at(out)[r] = s;
  }
  return 0;
}

/* acc += x * a, in place; no result */
DLX_KERNEL(shard_accum, "x: f32[...] contig cpu, acc: f32[...] contig cpu mut, a: float = 1.0") {
  DLTensor *x, *acc;
  double a;
  if (dlx_arg_tensor(call, 0, &x) || dlx_arg_tensor(call, 1, &acc) || dlx_arg_float(call, 2, &a))
    return -1;
  if (numel(x) != numel(acc)) return dlx_error(call, "ValueError", "x and acc differ in size");
  for (int64_t i = 0, m = numel(x); i < m; ++i) at(acc)[i] += at(x)[i] * (float)a;
  return 0;
}

/* two results: 2 * x, and the sum over the last dimension */
DLX_KERNEL(shard_split, "x: f32[..., n] contig cpu -> (f32[..., n], f32[...])") {
  DLTensor *x, *twice, *sums;
  if (dlx_arg_tensor(call, 0, &x) ||
      dlx_return_new_tensor(call, x->device, x->ndim, x->shape, x->dtype, &twice) ||
      dlx_return_new_tensor(call, x->device, x->ndim - 1, x->shape, x->dtype, &sums))
    return -1;
  int64_t n = last(x), rows = numel(x) / (n ? n : 1);
  for (int64_t r = 0; r < rows; ++r) {
    float s = 0;
    for (int64_t j = 0; j < n; ++j) {
      at(twice)[r * n + j] = 2 * at(x)[r * n + j];
      s += at(x)[r * n + j];
    }
    at(sums)[r] = s;
  }
  return 0;
}

/* x + y with y's rows broadcast when it has one (f32[n] or f32[1, n]), else y must have as
 * many rows as x; and per row, the elements of x this call received * 1000 + y's */
DLX_KERNEL(shard_add, "x: f32[..., n] contig cpu, y: f32[..., n] contig cpu -> "
                      "(f32[..., n], f32[...])") {
  DLTensor *x, *y, *z, *seen;
  if (dlx_arg_tensor(call, 0, &x) || dlx_arg_tensor(call, 1, &y) ||
      dlx_return_new_tensor(call, x->device, x->ndim, x->shape, x->dtype, &z) ||
      dlx_return_new_tensor(call, x->device, x->ndim - 1, x->shape, x->dtype, &seen))
    return -1;
  int64_t n = last(x), rows = numel(x) / (n ? n : 1), yrows = numel(y) / (n ? n : 1);
  if (yrows != 1 && yrows != rows)
    return dlx_error(call, "ValueError", "y has %lld rows, x %lld", (long long)yrows,
                     (long long)rows);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < n; ++j)
      at(z)[r * n + j] = at(x)[r * n + j] + at(y)[(yrows == 1 ? 0 : r) * n + j];
    at(seen)[r] = (float)(numel(x) * 1000 + numel(y));
  }
  return 0;
}

/* declares f32[..., n] and makes one row more than it received: a broken kernel */
DLX_KERNEL(shard_overrun, "x: f32[..., n] contig cpu -> f32[..., n]") {
  DLTensor *x, *out;
  if (dlx_arg_tensor(call, 0, &x) || x->ndim != 2) return -1;
  int64_t shape[2] = {x->shape[0] + 1, x->shape[1]};
  return dlx_return_new_tensor(call, x->device, 2, shape, x->dtype, &out);
}
"""

NAMESPACE = "dlx_shard_test"


def _init(rank, world, port):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)


def sharding_worker(rank, lib, world, port, outdir):
    """Every scenario of test_dtensor_sharding, on `world` gloo ranks; asserts here (a failed
    one fails the spawn, with its traceback), and rank 0 writes what the test checks."""
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor

    import faulthandler

    import dlx.torch

    faulthandler.enable()  # a crash in a rank says where
    _init(rank, world, port)
    report = {}
    try:
        reg = dlx.torch.register(lib, NAMESPACE)
        ops = getattr(torch.ops, NAMESPACE)
        mesh = init_device_mesh("cpu", (world,))
        g = torch.Generator().manual_seed(7)  # the same tensors on every rank
        x = torch.randn(8, 6, generator=g)
        w = torch.randn(6, generator=g)

        def dt(t, placements, on=mesh):
            return distribute_tensor(t, on, placements)

        def same(got, want):
            assert isinstance(got, DTensor), type(got)
            torch.testing.assert_close(got.full_tensor(), want, rtol=0, atol=0)

        # 1. Shard on the batch stays Shard; each rank's kernel sees its quarter
        print(rank, "step 1", file=sys.stderr, flush=True)
        y = ops.shard_scale(dt(x, [Shard(0)]), dt(w, [Replicate()]))
        assert y.placements == (Shard(0),), y.placements
        same(y, lib.shard_scale(x, w))
        seen = ops.shard_seen(dt(x, [Shard(0)]))
        assert seen.placements == (Shard(0),)
        report["seen_batch"] = float(seen.to_local().flatten()[0])
        assert torch.all(seen.to_local() == x.numel() / world)

        # 2. Shard on a dimension the kernel reads whole: replicated first, still right
        print(rank, "step 2", file=sys.stderr, flush=True)
        s = ops.shard_rowsum(dt(x, [Shard(1)]))
        same(s, lib.shard_rowsum(x))
        seen = ops.shard_seen(dt(x, [Shard(1)]))
        report["seen_other"] = float(seen.to_local().flatten()[0])
        assert torch.all(seen.to_local() == x.numel())
        same(ops.shard_scale(dt(x, [Shard(1)]), dt(w, [Shard(0)])), lib.shard_scale(x, w))
        # Partial: reduced to Replicate first
        part = DTensor.from_local(x / world, mesh, [Partial()], run_check=False)
        same(ops.shard_rowsum(part), lib.shard_rowsum(x))

        # 3. uneven: 10 rows over 4 ranks (3, 3, 3, 1), 3-d with a batch of (10, 2)
        print(rank, "step 3", file=sys.stderr, flush=True)
        xu = torch.randn(10, 2, 3, generator=g)
        wu = torch.randn(3, generator=g)
        yu = ops.shard_scale(dt(xu, [Shard(0)]), dt(wu, [Replicate()]))
        assert yu.placements == (Shard(0),)
        same(yu, lib.shard_scale(xu, wu))
        seen = ops.shard_seen(dt(xu, [Shard(1)]))  # the second batch dimension: 2 < 4 ranks
        same(ops.shard_rowsum(dt(xu, [Shard(1)])), lib.shard_rowsum(xu))
        seen = ops.shard_seen(dt(xu, [Shard(0)]))
        local = seen.to_local()
        assert torch.all(local == local.numel()), (local.shape, local.flatten()[:1])
        counts = [torch.zeros(1) for _ in range(world)]
        dist.all_gather(counts, torch.tensor([float(local.numel())]))
        report["seen_uneven"] = [float(c) for c in counts]

        # 4. mut: acc sharded like x is written in place on each rank
        print(rank, "step 4", file=sys.stderr, flush=True)
        acc_whole = torch.ones(8, 6)
        lib.shard_accum(x, acc_whole, 2.0)
        acc = dt(torch.ones(8, 6), [Shard(0)])
        before = acc.to_local()
        assert ops.shard_accum(dt(x, [Shard(0)]), acc, 2.0) is None
        assert acc.placements == (Shard(0),)
        assert acc.to_local().data_ptr() == before.data_ptr()  # written where it lies
        same(acc, acc_whole)
        acc = dt(torch.ones(8, 6), [Replicate()])  # x gathered, acc written whole
        ops.shard_accum(dt(x, [Shard(0)]), acc, a=2.0)
        assert acc.placements == (Replicate(),)
        same(acc, acc_whole)
        acc = dt(torch.ones(8, 6), [Shard(0)])  # x replicated: its shard is taken, free
        ops.shard_accum(dt(x, [Replicate()]), acc, 2.0)
        same(acc, acc_whole)
        acc = dt(torch.ones(8, 6), [Shard(1)])  # acc keeps its placement: x follows it
        ops.shard_accum(dt(x, [Shard(0)]), acc, 2.0)
        assert acc.placements == (Shard(1),)
        same(acc, acc_whole)
        acc = DTensor.from_local(torch.ones(8, 6), mesh, [Partial()], run_check=False)
        try:
            ops.shard_accum(dt(x, [Shard(0)]), acc, 2.0)
        except RuntimeError as e:
            report["mut_partial"] = str(e)
        else:
            raise AssertionError("a Partial mut parameter was accepted")

        # 5. several results: both sharded as x
        print(rank, "step 5", file=sys.stderr, flush=True)
        twice, sums = ops.shard_split(dt(x, [Shard(0)]))
        assert twice.placements == (Shard(0),) and sums.placements == (Shard(0),)
        want_twice, want_sums = lib.shard_split(x)
        same(twice, want_twice)
        same(sums, want_sums)
        twice, sums = ops.shard_split(dt(x, [Shard(1)]))
        same(twice, want_twice)
        same(sums, want_sums)

        # a kernel making more than its slice: refused on the rank's own call
        try:
            ops.shard_overrun(dt(x, [Shard(0)]))
        except Exception as e:
            report["overrun"] = f"{type(e).__name__}: {e}"
        else:
            raise AssertionError("a result larger than declared was accepted")

        # 6. a 2 x 2 mesh: rows over one axis, the last dimension over the other
        print(rank, "step 6", file=sys.stderr, flush=True)
        if world == 4:
            mesh2 = init_device_mesh("cpu", (2, 2), mesh_dim_names=("a", "b"))
            y2 = ops.shard_scale(dt(x, [Shard(0), Shard(1)], mesh2),
                                 dt(w, [Replicate(), Shard(0)], mesh2))
            assert y2.placements == (Shard(0), Replicate()), y2.placements
            same(y2, lib.shard_scale(x, w))
            seen = ops.shard_seen(dt(x, [Shard(0), Shard(0)], mesh2))
            assert torch.all(seen.to_local() == x.numel() / 4)

        # 8. two "..." parameters: y's batch equal to x's is sharded alike; a broadcasting
        # one (one row, or none) is not, the declaration being silent on how the kernel pairs
        # the rows: x is replicated and the call sees both whole, as the plain call does
        # (8 columns: an uneven Shard(1) -> Shard(0) leaves a local shard that is not
        # contiguous, which this contig kernel refuses; see docs/torch.md)
        print(rank, "step 8", file=sys.stderr, flush=True)
        seen_add = {}
        x8 = torch.randn(8, 8, generator=g)
        for name, yt, py in [("same_shard", x8 * 2, Shard(0)),
                             ("same_replicated", x8 * 2, Replicate()),
                             ("same_other_dim", x8 * 2, Shard(1)),
                             ("one_row", x8[:1] * 2, Replicate()),
                             ("no_batch", x8[0] * 2, Replicate())]:
            z, seen = ops.shard_add(dt(x8, [Shard(0)]), dt(yt, [py]))
            want_z, want_seen = lib.shard_add(x8, yt)
            same(z, want_z)
            assert z.placements == seen.placements, (z.placements, seen.placements)
            seen_add[name] = {"placements": [repr(p) for p in z.placements],
                              "seen": sorted(set(seen.to_local().flatten().tolist())),
                              "want_seen": float(want_seen.flatten()[0])}
        report["seen_add"] = seen_add

        # 7. inside torch.compile
        print(rank, "step 7", file=sys.stderr, flush=True)
        def f(a, b):
            return lib.shard_scale(a, b) + 1

        compiled = torch.compile(f, fullgraph=True)  # inductor
        try:
            yc = compiled(dt(x, [Shard(0)]), dt(w, [Replicate()]))
            assert yc.placements == (Shard(0),), yc.placements
            same(yc, lib.shard_scale(x, w) + 1)
            seen_c = torch.compile(lambda a: ops.shard_seen(a), backend="aot_eager",
                                   fullgraph=True)(dt(x, [Shard(0)]))
            assert torch.all(seen_c.to_local() == x.numel() / world)
            report["compile"] = "ok"
        except Exception as e:  # recorded: the test says what torch did
            report["compile"] = f"{type(e).__name__}: {e}"[:2000]
        report["implementation"] = reg.implementation
        if rank == 0:
            with open(os.path.join(outdir, "report.json"), "w") as f_:
                json.dump(report, f_)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def bench_worker(rank, lib, world, port, outdir, numel, rounds):
    """Wall-clock of one shard_scale call on a DTensor of `numel` float32 sharded on its
    batch over `world` ranks (the median of `rounds`, barriers around each call)."""
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    import dlx.torch

    _init(rank, world, port)
    try:
        dlx.torch.register(lib, NAMESPACE)
        op = getattr(torch.ops, NAMESPACE)
        mesh = init_device_mesh("cpu", (world,))
        x = distribute_tensor(torch.ones(numel // 64, 64), mesh, [Shard(0)])
        w = distribute_tensor(torch.ones(64), mesh, [Replicate()])
        seen = op.shard_seen(x).to_local().flatten()[0].item()
        times = []
        for _ in range(rounds):
            dist.barrier()
            t = time.perf_counter()
            op.shard_scale(x, w)
            dist.barrier()
            times.append(time.perf_counter() - t)
        whole = torch.ones(numel // 64, 64)
        plain = []
        for _ in range(rounds):
            t = time.perf_counter()
            lib.shard_scale(whole, torch.ones(64))
            plain.append(time.perf_counter() - t)
        if rank == 0:
            with open(os.path.join(outdir, f"bench{world}.json"), "w") as f:
                json.dump({"world": world, "seen": seen, "numel": numel,
                           "median_s": sorted(times)[len(times) // 2],
                           "plain_median_s": sorted(plain)[len(plain) // 2]}, f)
    finally:
        dist.destroy_process_group()


def _bench():
    import socket
    import tempfile

    import torch.multiprocessing as tmp

    import dlx
    import dlx.torch

    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    lib = dlx.load_inline(SHARD_KERNELS, name="shard_kernels")
    dlx.torch.ensure_addon(dlx.torch.backend())
    numel, rounds = 1 << 22, 21
    with tempfile.TemporaryDirectory() as out:
        for world in (1, 4):
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            tmp.spawn(bench_worker, args=(lib, world, port, out, numel, rounds), nprocs=world)
            with open(os.path.join(out, f"bench{world}.json")) as f:
                r = json.load(f)
            print(f"{world} rank(s): each kernel call received {r['seen']:.0f} of {numel} "
                  f"elements ({r['seen'] / numel:.3f}); DTensor call {r['median_s'] * 1e3:.2f} "
                  f"ms; the kernel on the whole tensor, no DTensor "
                  f"{r['plain_median_s'] * 1e3:.2f} ms (medians of {rounds})")


if __name__ == "__main__" and sys.argv[1:] == ["bench"]:
    _bench()
