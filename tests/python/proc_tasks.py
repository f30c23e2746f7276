"""Tasks that test_processes.py sends to other processes (pickled by reference, so this
module imports nothing of the test session's: no conftest, no fixtures)."""
import numpy as np

POLY = r"""
#include <dlx/dlx.h>
/* poly(x, out, a): out = x * x + a, float32, contiguous */
DLX_KERNEL(poly) {
  DLTensor *x, *out;
  double a;
  if (dlx_arg_tensor(call, 0, &x) || dlx_arg_tensor(call, 1, &out) || dlx_arg_float(call, 2, &a))
    return -1;
  int64_t n = 1;
  for (int i = 0; i < x->ndim; ++i) n *= x->shape[i];
  const float *xs = (const float *)((const char *)x->data + x->byte_offset);
  float *os = (float *)((char *)out->data + out->byte_offset);
  for (int64_t i = 0; i < n; ++i) os[i] = xs[i] * xs[i] + (float)a;
  return 0;
}
"""


def apply(kernel, x, a=1.0):
    """kernel(x, out, a) into a new array: out = x * x + a for poly."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    out = np.empty_like(x)
    kernel(x, out, a)
    return out


def apply_block(block, kernel, a=1.0):
    """dask.array.map_blocks's order: the block first."""
    return apply(kernel, block, a)


def call(kernel, *args):
    return kernel(*args)


def pid_and_call(kernel, *args):
    import os

    return os.getpid(), kernel(*args)


def torch_spawn_worker(rank, kernel, x, outdir):
    """torch.multiprocessing.spawn: rank r applies the kernel (a torch tensor in, one out) to
    its half of x."""
    import os

    import torch

    part = torch.from_numpy(np.array_split(x, 2)[rank].copy())
    out = torch.empty_like(part)
    kernel(part, out, 3.0)
    np.save(os.path.join(outdir, f"rank{rank}.npy"), out.numpy())


def torch_distributed_worker(rank, kernel, x, world, port, outdir):
    """One rank of `world` (gloo, CPU, 127.0.0.1): the kernel on this rank's shard, placed in
    a full-size zero tensor, then all_reduce(SUM) gives every rank the whole result."""
    import os

    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    try:
        full = torch.from_numpy(x)
        shards = torch.tensor_split(torch.arange(full.numel()), world)
        mine = shards[rank]
        out = torch.zeros_like(full)
        shard_out = torch.empty(mine.numel(), dtype=full.dtype)
        kernel(full[mine].contiguous(), shard_out, 1.0)
        out[mine] = shard_out
        dist.all_reduce(out, op=dist.ReduceOp.SUM)
        if rank == 0:
            np.save(os.path.join(outdir, "all_reduced.npy"), out.numpy())
        dist.barrier()
    finally:
        dist.destroy_process_group()
