"""JAX (CPU) arrays as kernel arguments: in through JAX's __dlpack__, read-only (JAX
arrays are immutable), and a kernel's new result comes back as a jax.Array."""
import gc
import sys

import pytest

jax = pytest.importorskip("jax", reason="JAX is installed in the venv only (make venv)")
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import dlx  # noqa: E402
from conftest import run_python  # noqa: E402


def test_jax_arrays_reach_kernels(kernels):
    x = jnp.arange(12, dtype=jnp.float32).reshape(3, 4)
    assert kernels.sum(x) == 66.0
    assert kernels.info(x, 0) == 2 and [kernels.info(x, 10 + d) for d in range(2)] == [3, 4]
    assert [kernels.info(x, 20 + d) for d in range(2)] == [4, 1]
    assert kernels.info(x, 4) == 1  # kDLCPU
    assert kernels.sum(x[1:, ::2]) == float(x[1:, ::2].sum())  # a sliced (new) jax array
    assert kernels.sum(jnp.array(2.5, dtype=jnp.float32)) == 2.5  # 0-d


def test_dlx_uses_its_jax_provider():
    x = jnp.ones(3)
    cap = dlx.exchange_api(type(x))
    assert cap is not None and dlx.exchange_api(x) is not None
    assert isinstance(x, jax.Array)


def test_jax_inputs_are_read_only(kernels):
    x = jnp.arange(4, dtype=jnp.float32)
    assert kernels.is_readonly(x) == 1
    with pytest.raises(ValueError, match="read-only"):
        kernels.fill(x, 9.0)  # a kernel that writes refuses
    assert x.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert kernels.is_readonly(np.zeros(2)) == 0  # numpy beside it stays writable


def test_new_result_is_a_jax_array(kernels):
    like = jnp.ones(2, dtype=jnp.float32)
    r = kernels.arange(5, like)
    assert isinstance(r, jax.Array) and r.dtype == jnp.float32
    assert r.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    r2 = kernels.new_tensor(0, 64, 2, 3, like)
    assert isinstance(r2, jax.Array) and r2.shape == (2, 3)
    assert r2.dtype == (jnp.int64 if jax.config.jax_enable_x64 else jnp.int32)  # JAX's import
    # the first tensor argument decides: numpy first gives numpy
    assert isinstance(kernels.arange(3, np.ones(1), like), np.ndarray)
    assert (r + 1).tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]  # a usable array, not a view of freed memory


def test_exports_are_released(kernels):
    x = jnp.arange(1000, dtype=jnp.float32)
    before = sys.getrefcount(x)
    for _ in range(200):
        kernels.sum(x)
    gc.collect()
    assert sys.getrefcount(x) == before


def test_jax_is_not_imported_by_dlx(build_dir):
    out = run_python("import sys, dlx, numpy\n"
                     "k = dlx.load(%r)\n"
                     "k.sum(numpy.ones(3))\n"
                     "print('jax' in sys.modules)\n" % str(build_dir / "kernels" /
                                                           "test_kernels.so"))
    assert out.stdout.strip() == "False"


def test_jax_array_without_dlpack_protocol_errors_clearly(kernels):
    """A tracer given to an undeclared kernel: a TypeError saying that a declaration is
    needed (test_jax_jit.py stages declared ones), the conversion's error as its cause."""
    with pytest.raises(TypeError, match="a declaration is needed") as e:
        jax.jit(lambda v: kernels.sum(v))(jnp.ones(2))
    assert isinstance(e.value.__cause__, jax.errors.ConcretizationTypeError)



def test_cpu_arrays_keep_the_table_path_when_streams_are_decided(kernels):
    """A host JAX array goes through dlx's JAX table also in a call whose stream is being
    decided (an override in force): read-only, and the new result is a jax.Array. On a
    device a JAX array is exported with the call's stream instead (no GPU here:
    test_producer_streams.py, test_jax_device_array_*)."""
    x = jnp.ones(2, dtype=jnp.float32)
    assert int(x.__dlpack_device__()[0]) == 1  # kDLCPU
    with dlx.stream(0x4000):
        assert kernels.is_readonly(x) == 1
        r = kernels.arange(3, x)
    assert isinstance(r, jax.Array) and r.tolist() == [0.0, 1.0, 2.0]
    assert dlx._core._stats()["stream_pending"] == 0
