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


# square(x) = x * x and its backward, declared: dlx.torch.register makes them operators.
SQUARE = r"""
#include <dlx/dlx.h>
static int64_t numel(const DLTensor *t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; ++i) n *= t->shape[i];
  return n;
}
static const double *in(const DLTensor *t) {
  return (const double *)((const char *)t->data + t->byte_offset);
}
DLX_KERNEL(square, "x: f64[...] contig cpu -> f64[...]") {
  DLTensor *x, *out;
  if (dlx_arg_tensor(call, 0, &x) ||
      dlx_return_new_tensor(call, x->device, x->ndim, x->shape, x->dtype, &out))
    return -1;
  double *o = (double *)out->data;
  for (int64_t i = 0, n = numel(x); i < n; ++i) o[i] = in(x)[i] * in(x)[i];
  return 0;
}
DLX_KERNEL(square_grad, "x: f64[...] contig cpu, g: f64[...] contig cpu -> f64[...]") {
  DLTensor *x, *g, *out;
  if (dlx_arg_tensor(call, 0, &x) || dlx_arg_tensor(call, 1, &g)) return -1;
  if (numel(x) != numel(g)) return dlx_error(call, "ValueError", "x and g differ in size");
  if (dlx_return_new_tensor(call, x->device, x->ndim, x->shape, x->dtype, &out)) return -1;
  double *o = (double *)out->data;
  for (int64_t i = 0, n = numel(x); i < n; ++i) o[i] = 2.0 * in(x)[i] * in(g)[i];
  return 0;
}
"""
DDP_NS = "dlx_ddp"
DDP_STEPS = 4


def register_square(lib):
    """lib's square as torch.ops.dlx_ddp.square, trainable: its backward is square_grad."""
    import torch

    import dlx.torch

    reg = dlx.torch.register(lib, DDP_NS)

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return lib.square_grad(x, grad.contiguous())

    torch.library.register_autograd(f"{DDP_NS}::square", backward, setup_context=setup_context)
    return reg


def square_model(torch_square=False):
    """Linear -> the dlx operator (or torch's own x * x) -> Linear, float64, the same initial
    weights every call."""
    import torch

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(6, 5)
            self.b = torch.nn.Linear(5, 1)

        def forward(self, x):
            h = self.a(x)
            return self.b(h * h if torch_square else getattr(torch.ops, DDP_NS).square(h))

    torch.manual_seed(7)
    return Net().double()


def train_square(model, x, y):
    """DDP_STEPS of SGD on the mean squared error: a rank's mean over its equal shard, which
    DDP's gradient average makes the full batch's mean."""
    import torch

    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for _ in range(DDP_STEPS):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()


def square_params(model):
    return {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}


def ddp_worker(rank, lib, x, y, world, port, outdir):
    """One rank of `world` (gloo, CPU, 127.0.0.1): DistributedDataParallel over square_model on
    this rank's shard of (x, y); rank 0 saves the trained parameters and how the operator
    was implemented."""
    import os

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    try:
        reg = register_square(lib)
        model = DistributedDataParallel(square_model())
        train_square(model, torch.from_numpy(np.array_split(x, world)[rank].copy()),
                     torch.from_numpy(np.array_split(y, world)[rank].copy()))
        if rank == 0:
            np.savez(os.path.join(outdir, "ddp.npz"), implementation=reg.implementation,
                     **square_params(model.module))
        dist.barrier()
    finally:
        dist.destroy_process_group()


def single_worker(rank, lib, x, y, outdir):
    """The same training in one process on the whole batch, without DDP; and once more with
    torch's own x * x in place of the operator."""
    import os

    import torch

    register_square(lib)
    for torch_square, name in ((False, "single.npz"), (True, "torch_only.npz")):
        model = square_model(torch_square)
        train_square(model, torch.from_numpy(x), torch.from_numpy(y))
        np.savez(os.path.join(outdir, name), **square_params(model))
