"""python -m dlx bench, under jax.jit (where JAX is installed: the venv): a jitted function
holding one call of a no-op kernel on 3 small float32 arrays (2 inputs, its result), per
call, on the CPU, side by side in this one process, rounds interleaved:

  1. dlx's generic XLA FFI handler (lib.noop3 staged by dlx.jax),
  2. a hand-written C++ XLA_FFI_DEFINE_HANDLER for the same no-op (the floor, built here),
  3. jax-tvm-ffi's generic handler calling an equivalent tvm-ffi function,
  4. eager lib.noop3 on JAX arrays (dlx's ordinary call path),
  5. the same function saved: dlx.jax.export, serialize, deserialize, jax.jit(exp.call)
     (a saved program names its kernel by content, looked up once per call site).

Goal: row 1 within 1.1x of row 2, ahead of row 3; row 5 within 1.05x of row 1 (medians of
the interleaved rounds)."""
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

import dlx

N, ROUNDS = 20_000, 7

NOOP3 = r"""#include <dlx/dlx.h>
DLX_KERNEL(noop3, "x: f32[n], y: f32[n] -> f32[n]") {
  DLTensor *x, *y, *out;
  return dlx_arg_tensor(call, 0, &x) || dlx_arg_tensor(call, 1, &y) ||
         dlx_return_new_tensor(call, x->device, 1, x->shape, x->dtype, &out);
}
"""

FLOOR = r"""#include "xla/ffi/api/ffi.h"
namespace ffi = xla::ffi;
static ffi::Error Noop3(ffi::Buffer<ffi::F32>, ffi::Buffer<ffi::F32>,
                       ffi::ResultBuffer<ffi::F32>) {
  return ffi::Error::Success();
}
XLA_FFI_DEFINE_HANDLER_SYMBOL(dlx_bench_floor, Noop3,
                              ffi::Ffi::Bind().Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>().Ret<ffi::Buffer<ffi::F32>>());
"""

TVM_NOOP3 = ("#include <tvm/ffi/container/tensor.h>\n"
             "void noop3(tvm::ffi::TensorView, tvm::ffi::TensorView, tvm::ffi::TensorView) {}\n")


def _build(folder, name, text, cmd):
    src, so = os.path.join(folder, name), os.path.join(folder, name.rsplit(".", 1)[0] + ".so")
    with open(src, "w") as f:
        f.write(text)
    subprocess.run(cmd + [src, "-o", so], check=True)
    return so


def rows(folder):
    """[(name, callable, args)] of the rows this interpreter can run."""
    import ctypes

    import jax
    import jax.numpy as jnp

    so = _build(folder, "noop3.c", NOOP3,
                ["cc", "-O2", "-shared", "-fPIC", "-I", dlx.include_dir()])
    lib = dlx.load(so)
    x, y = jnp.ones(16, jnp.float32), jnp.ones(16, jnp.float32)
    out = jax.ShapeDtypeStruct((16,), jnp.float32)
    found = [("dlx generic handler (lib.noop3 under jax.jit)", jax.jit(lib.noop3))]
    floor = _build(folder, "floor.cc", FLOOR,
                   ["c++", "-O2", "-w", "-std=c++17", "-shared", "-fPIC", "-I",
                    jax.ffi.include_dir()])  # -w: jaxlib's api.h warns
    fl = ctypes.CDLL(floor)
    jax.ffi.register_ffi_target("dlx_bench_floor", jax.ffi.pycapsule(fl.dlx_bench_floor),
                                platform="cpu")
    found.append(("hand-written C++ XLA_FFI_DEFINE_HANDLER (floor)",
                  jax.jit(jax.ffi.ffi_call("dlx_bench_floor", out))))
    try:
        import jax_tvm_ffi
        import tvm_ffi.cpp
    except ImportError as e:
        found.append((f"jax-tvm-ffi: not importable ({e.name})", None))
    else:
        fn = tvm_ffi.cpp.load_inline("dlx_bench_jax_noop3", cpp_sources=TVM_NOOP3,
                                     functions=["noop3"]).noop3
        jax_tvm_ffi.register_ffi_target("dlx_bench_tvm", fn, ["args", "rets"], platform="cpu")
        found.append(("jax-tvm-ffi generic handler (tvm-ffi function)",
                      jax.jit(jax.ffi.ffi_call("dlx_bench_tvm", out))))
    found.append(("eager lib.noop3 on JAX arrays", lib.noop3))
    try:
        from jax import export

        from dlx import jax as dlx_jax

        spec = jax.ShapeDtypeStruct((16,), jnp.float32)
        saved = export.deserialize(dlx_jax.export(lib.noop3)(spec, spec).serialize())
        found.append((SAVED, jax.jit(saved.call)))
    except ImportError as e:  # serialization needs flatbuffers
        found.append((f"deserialized jax.export: not importable ({e.name})", None))
    return found, (x, y)


SAVED = "deserialized jax.export program (jax.jit(exp.call))"


def best_us(fns, args, rounds=None):
    """Best round per callable, rounds interleaved; each round waits for its last result.
    `rounds`, a list, gets each callable's round times."""
    import jax

    best = [float("inf")] * len(fns)
    if rounds is not None:
        rounds[:] = [[] for _ in fns]
    for f in fns:
        jax.block_until_ready(f(*args))  # compile, warm
    for _ in range(ROUNDS):
        for i, f in enumerate(fns):
            t = time.perf_counter_ns()
            for _ in range(N):
                r = f(*args)
            jax.block_until_ready(r)
            us = (time.perf_counter_ns() - t) / N / 1e3
            best[i] = min(best[i], us)
            if rounds is not None:
                rounds[i].append(us)
    return best


def main():
    try:
        import jax
    except ImportError:
        print("jax.jit rows: JAX is not importable by this interpreter (the venv has it)")
        return 0
    tmp = tempfile.TemporaryDirectory()
    found, args = rows(tmp.name)
    live = [(n, f) for n, f in found if f is not None]
    rounds = []
    times = dict(zip((n for n, _ in live), best_us([f for _, f in live], args, rounds)))
    medians = dict(zip((n for n, _ in live), (sorted(r)[len(r) // 2] for r in rounds)))
    print(f"jax.jit (jax {jax.__version__}, CPU): a jitted no-op on 3 float32[16] arrays, "
          f"{N} calls x {ROUNDS} rounds, best round")
    floor = times.get(found[1][0])
    for name, f in found:
        if f is None:
            print(f"  {name}")
            continue
        t = times[name]
        print(f"  {name:52s} {t:7.2f} us  {t / floor:5.2f}x floor")
    if SAVED in times:
        jit = found[0][0]
        print(f"  saved program / jax.jit, per call: {times[SAVED] / times[jit]:.3f}x best round, "
              f"{medians[SAVED] / medians[jit]:.3f}x median (goal <= 1.05x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
