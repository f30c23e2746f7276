"""Kernels inside jax.jit (interface.md, "Kernels inside jax.jit"): declared kernels staged as
an XLA FFI call of dlx's generic handler, under jit, vmap, lax.scan and custom_vjp; errors at
trace time and at run time; a forged kernel attribute refused."""
import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="JAX is installed in the venv only (make venv)")
import jax.numpy as jnp  # noqa: E402

import dlx  # noqa: E402
from conftest import BUILD  # noqa: E402


@pytest.fixture(scope="module")
def ck():
    return dlx.load(BUILD / "kernels" / "compile_kernels.so")


@pytest.fixture(scope="module")
def jk():
    return dlx.load(BUILD / "kernels" / "jax_kernels.so")


def f32(*shape):
    return (np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) - 2.5) / 2


def eager(kernel, *args, **kwargs):
    """The eager result on numpy copies (what the staged call must equal)."""
    conv = [np.array(a) if isinstance(a, (np.ndarray, jax.Array)) else a for a in args]
    return kernel(*conv, **kwargs), conv


def close(a, b):
    if isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b)
        for x, y in zip(a, b):
            close(x, y)
        return
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6)


# ---- every kernel shape under jit -------------------------------------------------------

def test_allocating_with_symbols(ck):
    x, y = f32(4), f32(3)
    got = jax.jit(lambda x, y: ck.outer(x, y) + 1)(x, y)
    assert got.shape == (4, 3)
    close(got, ck.outer(x, y) + 1)


def test_several_results(ck):
    x = f32(3, 5)
    lo, hi, count = jax.jit(ck.minmax)(x)  # jax.jit(lib.k) itself (weakly referenced)
    elo, ehi, ecount = ck.minmax(x)
    close((lo, hi), (elo, ehi))
    assert int(count) == int(ecount) == 3


def test_mutating_kernel_returns_the_new_value(ck):
    x = f32(5)
    got = jax.jit(lambda x: ck.scale(x, 3.0))(x)
    close(got, x * 3)
    np.testing.assert_array_equal(x, f32(5))  # JAX arrays are immutable: the input stays


def test_mut_after_results_and_donation(ck):
    x, y = f32(4), f32(4)
    out = jnp.zeros(4, jnp.float32)
    got = jax.jit(lambda x, y, out: ck.add3(x, y, out))(x, y, out)
    close(got, x + y)
    # with donation the aliased output is the donated buffer: no copy
    buf = jnp.asarray(f32(4))
    before = buf.unsafe_buffer_pointer()
    got = jax.jit(lambda b: ck.scale(b, 2.0), donate_argnums=0)(buf)
    assert got.unsafe_buffer_pointer() == before
    close(got, f32(4) * 2)


@pytest.mark.parametrize("kw", [
    {},
    dict(i=3, f=1.5, b=True, s="twice", li=(4, 5, 6), lf=(0.5, 2)),
    dict(i=-2, b=False, li=[], lf=[1, 2]),  # an empty ints, floats given as ints
])
def test_every_scalar_kind_and_optional_tensor(ck, kw):
    x, o = f32(6), f32(6) + 10
    close(jax.jit(lambda x: ck.kinds(x, **kw))(x), ck.kinds(x, **kw))
    close(jax.jit(lambda x, o: ck.kinds(x, o=o, **kw))(x, o), ck.kinds(x, o=o, **kw))


@pytest.mark.parametrize("kw", [
    {},
    dict(i=3, f=1.5, b=True, s="twice", li=(4, 5, 6), lf=(0.5, 2)),
    dict(li=tuple(range(600))),  # more ints than a call site keeps: the full path each run
])
def test_later_runs_of_a_call_site_take_new_data(ck, kw):
    # a call site's first run proves its arguments; later runs reuse the proof (str, ints,
    # optional tensors and mut buffers from the instance) with this run's buffers
    f = jax.jit(lambda x, o: ck.kinds(x, o=o, **kw))
    g = jax.jit(lambda x, y, out: ck.add3(x, y, out))
    h = jax.jit(lambda x: ck.kinds(x, **kw))  # the optional tensor None, kept as bound
    for k in range(3):
        x, o = f32(6) + k, f32(6) + 10 * k
        close(f(x, o), ck.kinds(x, o=o, **kw))
        close(h(x), ck.kinds(x, **kw))
        y, out = f32(4) * k, f32(4) + k
        close(g(x[:4], y, out), x[:4] + y)  # add3 writes out = x + y


def test_run_time_errors_on_every_run(ck, jk):
    f = jax.jit(lambda x: ck.kinds(x, s="bad"))
    for _ in range(3):
        with pytest.raises(jax.errors.JaxRuntimeError, match=r"kinds\(\): s must be"):
            jax.block_until_ready(f(f32(2)))
    g = jax.jit(jk.short_results)
    for _ in range(3):
        with pytest.raises(jax.errors.JaxRuntimeError, match=r"returned 1 of the 2 result"):
            jax.block_until_ready(g(f32(3)))


def test_concrete_arrays_and_numpy_beside_tracers(ck):
    x, y = f32(4), f32(2)
    close(jax.jit(lambda x: ck.outer(x, y))(x), ck.outer(x, y))  # y: numpy, captured


def test_make_jaxpr_shows_the_ffi_call(ck):
    text = str(jax.make_jaxpr(lambda x, o: ck.add3(x, x, o))(f32(3), f32(3)))
    assert "ffi_call" in text and "target_name=dlx_kernel" in text
    assert "'dlx_name', 'add3'" in text
    assert "input_output_aliases=((2, 0),)" in text


def test_register(ck):
    import dlx.jax

    names = dlx.jax.register(ck)
    assert names["outer"] == dlx.jax.TARGET
    assert "raw" not in names  # undeclared
    assert dlx.jax.register(ck) == names


# ---- vmap, scan, custom_vjp ---------------------------------------------------------------

def test_vmap_batch_whole_for_ellipsis_kernels(ck):
    x = f32(3, 4)
    text = str(jax.make_jaxpr(jax.vmap(ck.square))(x))
    assert "vmap_method=broadcast_all" in text
    assert text.count("ffi_call[") == 1  # one call for the batch
    close(jax.vmap(ck.square)(x), ck.square(x))
    close(jax.jit(jax.vmap(ck.square_grad))(x, x + 1), ck.square_grad(x, x + 1))
    # an unbatched argument is broadcast to the batch
    close(jax.vmap(ck.square_grad, in_axes=(0, None))(x, x[0]),
          ck.square_grad(x, np.broadcast_to(x[0], x.shape).copy()))


def test_vmap_per_element_for_other_kernels(ck):
    x, y = f32(3, 4), f32(3, 2)
    got = jax.jit(jax.vmap(ck.outer))(x, y)
    close(got, np.stack([ck.outer(a, b) for a, b in zip(x, y)]))
    got = jax.vmap(lambda r: ck.kinds(r, i=2, s="twice"))(x)
    close(got, np.stack([ck.kinds(r, i=2, s="twice") for r in x]))
    got = jax.vmap(lambda r: ck.scale(r, 0.5))(x)
    close(got, x * 0.5)


def test_scan(ck):
    xs = f32(4, 3)

    def body(carry, row):
        y = ck.square(row)
        return carry + ck.outer(row, row[:2]).sum(), y

    total, ys = jax.jit(lambda xs: jax.lax.scan(body, jnp.float32(0), xs))(xs)
    close(ys, ck.square(xs))
    close(total, sum(ck.outer(r, r[:2]).sum() for r in xs))


def test_custom_vjp_backward_is_another_kernel(ck):
    @jax.custom_vjp
    def square(x):
        return ck.square(x)

    def fwd(x):
        return ck.square(x), x

    def bwd(x, g):
        return (ck.square_grad(x, g),)

    square.defvjp(fwd, bwd)

    def loss(x):
        return jnp.sum(jnp.sin(square(x)))

    x = np.array([0.3, -1.2, 0.7, 2.0], np.float64) / 2
    x32 = x.astype(np.float32)
    g = jax.jit(jax.grad(loss))(x32)
    eps = 1e-3
    fd = [(np.sin((x + eps * e) ** 2).sum() - np.sin((x - eps * e) ** 2).sum()) / (2 * eps)
          for e in np.eye(4)]
    np.testing.assert_allclose(np.asarray(g), fd, rtol=1e-3, atol=1e-4)
    close(jax.jit(jax.vmap(jax.grad(loss)))(x32[None].repeat(2, 0))[1], g)


# ---- errors ------------------------------------------------------------------------------

def test_grad_without_rule(ck):
    with pytest.raises(TypeError, match=r"square\(\): dlx kernels have no differentiation rule"):
        jax.grad(lambda x: ck.square(x).sum())(f32(3))


def test_undeclared_kernel(ck):
    with pytest.raises(TypeError, match=r"raw\(\): a declaration is needed"):
        jax.jit(lambda x: ck.raw(x))(f32(2))


def test_traced_scalar(ck):
    with pytest.raises(TypeError, match=r"kinds\(\): 'i' is a traced value") as e:
        jax.jit(lambda x, i: ck.kinds(x, i))(f32(2), 3)
    assert e.value.__cause__ is not None  # the conversion's own error
    with pytest.raises(TypeError, match=r"kinds\(\): 'li' is a traced value"):
        jax.jit(lambda x, i: ck.kinds(x, li=(1, i)))(f32(2), 3)
    # static_argnums: the documented way
    close(jax.jit(lambda x, i: ck.kinds(x, i), static_argnums=1)(f32(2), 3), ck.kinds(f32(2), 3))


def test_trace_time_errors_in_eager_words(ck):
    with pytest.raises(ValueError, match=r"add3\(\): 'out' has n=3 where 'x' has n=4"):
        jax.jit(lambda x: ck.add3(x, x, x[:3]))(f32(4))
    with pytest.raises(TypeError, match=r"add3\(\): 'out' must be f32\[n\] mut, got dtype i32"):
        jax.jit(lambda x: ck.add3(x, x, jnp.zeros(4, jnp.int32)))(f32(4))
    with pytest.raises(TypeError, match=r"missing 1 required positional argument: 'y'"):
        jax.jit(lambda x: ck.outer(x))(f32(4))
    with pytest.raises(ValueError, match=r"positives\(\): a result size the data decides"):
        jax.jit(ck.positives)(f32(4))
    with pytest.raises(ValueError, match=r"count\(\)"):  # a scalar result
        jax.jit(ck.count)(f32(4))


def test_run_time_kernel_error(ck):
    with pytest.raises(jax.errors.JaxRuntimeError,
                       match=r"ValueError: kinds\(\): s must be 'once' or 'twice', got 'bad'"):
        jax.block_until_ready(jax.jit(lambda x: ck.kinds(x, s="bad"))(f32(2)))


@pytest.mark.parametrize("name, words", [
    ("short_results", r"short_results\(\): returned 1 of the 2 result\(s\) its signature declares"),
    ("extra_results", r"extra_results\(\): returned more than the 1 result\(s\)"),
    ("wrong_shape", r"ValueError: wrong_shape\(\): result 0 must be f32\[n\] with n=3 "
                    r"\(from 'x'\), got f32\[1\]"),
])
def test_results_not_as_declared(jk, name, words):
    with pytest.raises(jax.errors.JaxRuntimeError, match=words):
        jax.block_until_ready(jax.jit(getattr(jk, name))(f32(3)))


def test_forged_kernel_attribute_refused(ck):
    import dlx.jax

    dlx.jax.register(ck)
    ref = dlx.jax._kernel_ref(ck.square)
    call = jax.ffi.ffi_call(dlx.jax.TARGET, jax.ShapeDtypeStruct((3,), jnp.float32))
    x = f32(3)
    for attrs, words in ((dict(ref, dlx_lib="f" * 64, dlx_from="/elsewhere.so"),
                          "which this process has not loaded"),
                         (dict(ref, dlx_lib="f" * 64), "is loaded here with other content"),
                         (dict(ref, dlx_name="outer"), r"outer\(\): the program was staged with "
                                                       "the declaration"),  # another kernel
                         (dict(ref, dlx_name="nosuch"), "has no declared kernel of that name"),
                         (dict(ref, dlx_lib=np.int64(1)), r"attribute dlx_lib\) is not a sha256"),
                         (dict(dlx_name="square"), r"attribute dlx_lib\) is missing")):
        with pytest.raises(jax.errors.JaxRuntimeError, match=words):
            jax.block_until_ready(jax.jit(lambda x: call(x, dlx_none=np.int64(0), **attrs))(x))
    # the right kernel with arguments it does not take: refused by the binding
    with pytest.raises(jax.errors.JaxRuntimeError, match=r"square\(\): the call has 2 input"):
        jax.block_until_ready(jax.jit(lambda x: call(x, x, **ref))(x))
    with pytest.raises(jax.errors.JaxRuntimeError, match=r"kinds\(\): 'i': attribute p_i must"):
        call2 = jax.ffi.ffi_call(dlx.jax.TARGET, jax.ShapeDtypeStruct((3,), jnp.float32))
        ref2 = dlx.jax._kernel_ref(ck.kinds)
        jax.block_until_ready(jax.jit(lambda x: call2(
            x, **ref2, p_i=np.float64(1), p_f=np.float64(1),
            p_b=np.int64(0), p_s="once", p_li=np.zeros(1, np.int64),
            p_lf=np.zeros(1, np.float64), dlx_none=np.int64(1 << 7)))(x))


def test_eager_calls_unchanged(ck):
    x = jnp.asarray(f32(4))
    got = ck.outer(x, x)  # eager JAX arrays: the ordinary call path
    assert isinstance(got, jax.Array)
    close(got, ck.outer(f32(4), f32(4)))
