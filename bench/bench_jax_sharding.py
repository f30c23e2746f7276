"""dlx calls across devices under jax.jit (issue 32; docs/jax.md, "Many devices").

For N = 1, 2, 4 CPU devices (XLA_FLAGS=--xla_force_host_platform_device_count=N, one child
process each), a jitted call of a kernel whose batch "..." is independent
(jax_kernels.so's shard_batch: y = x + the row's sum, and the elements its call saw), the
input split over the devices on its batch dimension:
  - the elements each kernel call received (the kernel counts them): the goal is 1/N;
  - the collectives in the compiled program (all-gather, all-reduce, ...): the goal is none;
  - the wall-clock per run, beside the same kernel under a hand-written jax.shard_map (the
    floor): the goal is <= 1.1x of it.
On a machine with few cores the wall-clock of N devices says little about scaling (the
fake devices share the cores); the counts do not depend on it.

    PYTHONPATH=build-venv/fixtures DLX_BUILD_DIR=$PWD/build-venv .venv/bin/python bench/bench_jax_sharding.py
"""
import json
import os
import subprocess
import sys

CHILD = r'''
import json, os, statistics, sys, time
n = int(sys.argv[1])
os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={n}"
import jax, jax.numpy as jnp, numpy as np, dlx
from jax.sharding import NamedSharding, PartitionSpec as P

jk = dlx.load(os.path.join(os.environ["DLX_BUILD_DIR"], "kernels", "jax_kernels.so"))
rows, cols = int(sys.argv[2]), int(sys.argv[3])
mesh = jax.make_mesh((n,), ("d",))
x = jax.device_put(jnp.ones((rows, cols), jnp.float32), NamedSharding(mesh, P("d")))
auto = jax.jit(lambda x: jk.shard_batch(x))
hand = jax.jit(jax.shard_map(lambda x: jk.shard_batch(x), mesh=mesh, in_specs=P("d"),
                             out_specs=(P("d"), P("d"))))
hlo = auto.lower(x).compile().as_text()
coll = sum(hlo.count(c) for c in ("all-gather", "all-reduce", "all-to-all",
                                  "collective-permute", "reduce-scatter"))
y, seen = auto(x)
y2, _ = hand(x)
assert np.allclose(y, y2)

def timeit(f):
    for _ in range(3):
        jax.block_until_ready(f(x))
    ts = []
    for _ in range(int(sys.argv[4])):
        t = time.perf_counter()
        jax.block_until_ready(f(x))
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)

# interleaved, so that a busy machine slows both alike
a, h = [], []
for _ in range(3):
    a.append(timeit(auto))
    h.append(timeit(hand))
print(json.dumps({"n": n, "per_call": sorted(set(np.asarray(seen).tolist())),
                  "total": rows * cols, "collectives": coll,
                  "auto_ms": 1e3 * min(a), "hand_ms": 1e3 * min(h)}))
'''


def main():
    rows, cols, reps = 4096, 1024, 20
    print(f"dlx under jax.jit over N CPU devices: shard_batch on f32[{rows}, {cols}] split "
          "P('d') on its batch (independent) dimension")
    print(f"{'N':>2} {'elements/call':>14} {'of all':>7} {'collectives':>11} "
          f"{'dlx ms':>8} {'shard_map ms':>12} {'ratio':>6}")
    env = dict(os.environ)
    for n in (1, 2, 4):
        r = subprocess.run([sys.executable, "-c", CHILD, str(n), str(rows), str(cols), str(reps)],
                           env=env, capture_output=True, text=True, timeout=600)
        if r.returncode:
            print(f"{n:>2} failed: {r.stderr.strip().splitlines()[-1:]}")
            continue
        v = json.loads(r.stdout.strip().splitlines()[-1])
        per = v["per_call"]
        share = f"1/{v['total'] // per[0]}" if len(per) == 1 else str(per)
        print(f"{n:>2} {per[0] if len(per) == 1 else per!s:>14} {share:>7} {v['collectives']:>11} "
              f"{v['auto_ms']:>8.2f} {v['hand_ms']:>12.2f} {v['auto_ms'] / v['hand_ms']:>6.2f}")


if __name__ == "__main__":
    main()
