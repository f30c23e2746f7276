"""Real-GPU check of dlx under jax.jit (not in CI): run by tests/gpu/run.sh where JAX has a
CUDA backend. A declared CUDA kernel staged by jax.jit must run on XLA's stream: it spins
before writing, and the jitted function reads its result right after, on XLA's stream,
without any synchronisation. Exits non-zero when the result is wrong."""
import sys

import jax
import jax.numpy as jnp

import dlx

lib = dlx.load(sys.argv[1])
gpu = jax.devices("gpu")[0]
print(f"jax {jax.__version__} on {gpu.device_kind}")
x = jax.device_put(jnp.arange(1 << 20, dtype=jnp.float32), gpu)
f = jax.jit(lambda x: lib.slow_twice(x) + 1)  # + 1 runs on XLA's stream after the kernel
ok = True
for _ in range(3):
    got = f(x)
    right = bool(jnp.all(got == 2 * x + 1))
    ok &= right
print(f"jitted kernel ordered on XLA's stream: {right}")
print("staged:", "ffi_call" in str(jax.make_jaxpr(lambda x: lib.slow_twice(x))(x)))
sys.exit(0 if ok else 1)
