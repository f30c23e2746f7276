"""The themes of JAX's own FFI tests, asked of dlx kernels (issue 30): effects, errors as
exceptions, zero-size arrays, several results, aliasing and donation through `mut`. Written
for dlx's declarations: a kernel staged by jax.jit must behave as a hand-written FFI call
with the same contract would."""
import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="JAX is installed in the venv only (make venv)")
import jax.numpy as jnp  # noqa: E402

import dlx  # noqa: E402
from conftest import BUILD  # noqa: E402

# effect_kernels.c's counter slots used here (test_jax_parity.py uses 1-9)
SLOT = {"cond": 30, "while": 31, "dropped_mut": 32, "error": 33, "order": 34}


@pytest.fixture(scope="module")
def ck():
    return dlx.load(BUILD / "kernels" / "compile_kernels.so")


@pytest.fixture(scope="module")
def ek():
    return dlx.load(BUILD / "kernels" / "effect_kernels.so")


def f32(*shape):
    return np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) - 1.5


# ---- effects ----------------------------------------------------------------------------

def test_effect_runs_only_in_the_branch_taken(ek):
    slot = SLOT["cond"]
    start = int(ek.peek(slot))

    def f(p):
        return jax.lax.cond(p, lambda: ek.counter(slot).astype(jnp.int32),
                            lambda: jnp.int32(-1))

    f = jax.jit(f)
    assert [int(f(p)) for p in (True, False, True, False)] == [start, -1, start + 1, -1]
    assert int(ek.peek(slot)) == start + 2


def test_effect_in_a_loop_runs_each_iteration(ek):
    slot = SLOT["while"]
    start = int(ek.peek(slot))

    def body(c):
        i, last = c
        return i + 1, ek.counter(slot).astype(jnp.int32)

    i, last = jax.jit(lambda: jax.lax.while_loop(lambda c: c[0] < 5, body,
                                                 (0, jnp.int32(-1))))()
    assert int(i) == 5 and int(last) == start + 4
    assert int(ek.peek(slot)) == start + 5


def test_effectful_write_kept_when_its_output_is_dropped(ek):
    slot = SLOT["dropped_mut"]
    start = int(ek.peek(slot))
    f = jax.jit(lambda x: (ek.tick_into(x, slot), x + 1)[1])  # the new x is never used
    for _ in range(2):
        np.testing.assert_array_equal(f(f32(3)), f32(3) + 1)
    assert int(ek.peek(slot)) == start + 2


def test_effects_keep_program_order(ek):
    slot = SLOT["order"]
    start = int(ek.peek(slot))
    f = jax.jit(lambda: [ek.counter(slot) for _ in range(4)])
    assert [int(v) - start for v in f()] == [0, 1, 2, 3]


# ---- errors are exceptions ---------------------------------------------------------------

def test_run_time_error_is_an_exception_every_run_and_later_runs_recover(ck):
    bad = jax.jit(lambda x: ck.kinds(x, s="bad"))
    good = jax.jit(lambda x: ck.kinds(x, s="twice"))
    for _ in range(2):
        with pytest.raises(jax.errors.JaxRuntimeError,
                           match=r"ValueError: kinds\(\): s must be 'once' or 'twice'"):
            jax.block_until_ready(bad(f32(3)))
        np.testing.assert_allclose(good(f32(3)), ck.kinds(f32(3), s="twice"))


def test_effect_kernel_error_at_run_time(ek):
    f = jax.jit(lambda: ek.counter(99))  # staged: the kernel's own check runs in XLA
    with pytest.raises(jax.errors.JaxRuntimeError, match=r"ValueError: counter\(\): slot out"):
        jax.block_until_ready(f())
    with pytest.raises(ValueError, match=r"counter\(\): slot out of range"):
        ek.counter(99)  # eagerly, the exception itself


def test_trace_time_errors_are_python_exceptions(ck, ek):
    with pytest.raises(OverflowError, match=r"kinds\(\): 'li': element 0 does not fit"):
        jax.jit(lambda x: ck.kinds(x, li=(2**64,)))(f32(2))
    with pytest.raises(TypeError, match=r"counter\(\): 'slot' must be int, got float"):
        jax.jit(lambda: ek.counter(1.0))()
    with pytest.raises(TypeError, match=r"counter\(\) got an unexpected keyword argument"):
        jax.jit(lambda: ek.counter(slot=1, extra=2))()


# ---- zero-size arrays --------------------------------------------------------------------

def test_zero_size_inputs_and_results(ck):
    empty = np.zeros((0,), np.float32)
    got = jax.jit(ck.outer)(empty, f32(3))
    assert got.shape == (0, 3)
    got = jax.jit(ck.outer)(f32(3), empty)
    assert got.shape == (3, 0)
    lo, hi, count = jax.jit(ck.minmax)(np.zeros((0, 4), np.float32))
    assert lo.shape == hi.shape == (0,) and int(count) == 0
    assert jax.jit(ck.square)(np.zeros((2, 0, 3), np.float32)).shape == (2, 0, 3)


def test_zero_size_mut(ck):
    empty = np.zeros((0,), np.float32)
    assert jax.jit(lambda x: ck.scale(x, 3.0))(empty).shape == (0,)
    assert jax.jit(ck.add3)(empty, empty, empty).shape == (0,)
    buf = jnp.zeros((0,), jnp.float32)
    assert jax.jit(lambda b: ck.scale(b), donate_argnums=0)(buf).shape == (0,)


def test_zero_size_batch(ck):
    assert jax.vmap(ck.square)(np.zeros((0, 3), np.float32)).shape == (0, 3)


# ---- several results ---------------------------------------------------------------------

def test_several_results_in_declared_order_under_jit_and_vmap(ck):
    x = f32(3, 4)
    lo, hi, count = jax.jit(ck.minmax)(x)
    np.testing.assert_array_equal(lo, x.min(1))
    np.testing.assert_array_equal(hi, x.max(1))
    assert int(count) == 3 and count.dtype == np.int64
    blo, bhi, bcount = jax.jit(jax.vmap(ck.minmax))(np.stack([x, -x]))
    np.testing.assert_array_equal(bhi[1], (-x).max(1))
    assert bcount.tolist() == [3, 3]


def test_results_feed_other_kernels(ck):
    x = f32(4)
    f = jax.jit(lambda x: ck.outer(*jax.jit(ck.minmax)(x[None])[:2]))
    np.testing.assert_array_equal(f(x), np.full((1, 1), x.min() * x.max(), np.float32))


# ---- aliasing and donation through `mut` -------------------------------------------------

def test_mut_without_donation_leaves_the_input(ck):
    x = jnp.asarray(f32(4))
    got = jax.jit(lambda x: ck.scale(x, 2.0))(x)
    np.testing.assert_array_equal(got, f32(4) * 2)
    np.testing.assert_array_equal(x, f32(4))  # XLA copied it before the kernel wrote


def test_mut_with_donation_writes_in_place(ck):
    buf = jnp.asarray(f32(4))
    before = buf.unsafe_buffer_pointer()
    got = jax.jit(lambda b: ck.scale(b, 2.0), donate_argnums=0)(buf)
    assert got.unsafe_buffer_pointer() == before and buf.is_deleted()
    np.testing.assert_array_equal(got, f32(4) * 2)


def test_two_writes_of_one_value_compose(ck):
    f = jax.jit(lambda x: ck.scale(ck.scale(x, 2.0), 3.0))
    np.testing.assert_array_equal(f(f32(4)), f32(4) * 6)
    # the value before the write stays usable beside the written one
    g = jax.jit(lambda x: (x, ck.scale(x, 2.0)))
    a, b = g(f32(4))
    np.testing.assert_array_equal(a, f32(4))
    np.testing.assert_array_equal(b, f32(4) * 2)


def test_mut_only_kernel_returns_the_new_value(ek):
    x = f32(3)
    start = int(ek.peek(SLOT["order"]))
    new = jax.jit(lambda x: ek.tick_into(x, SLOT["order"]))(x)  # no results: the new x alone
    np.testing.assert_array_equal(new, f32(3) + start)
    np.testing.assert_array_equal(x, f32(3))
