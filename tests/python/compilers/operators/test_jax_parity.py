"""A dlx kernel under jax.jit keeps the eager call's contract (issue 30): scalars are checked
by the eager call's own code, a kernel declared `; effects` runs each time the program runs,
the first staged calls of eight threads at once all stage, a hand-built call cannot read
uninitialised memory through a `mut` parameter, and every refusal names the kernel."""
import os
import subprocess
import sys

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="JAX is installed in the venv only (make venv)")
import jax.numpy as jnp  # noqa: E402

import dlx  # noqa: E402
from conftest import BUILD, PYPATH, run_python  # noqa: E402

# Counter slots of effect_kernels.c, one per test (the counters are the process's).
SLOT = {"jit": 1, "merge": 2, "pure": 3, "unused": 4, "mut": 5, "vmap": 6, "scan": 7,
        "eager": 8, "hlo": 9}


@pytest.fixture(scope="module")
def ek():
    return dlx.load(BUILD / "kernels" / "effect_kernels.so")


@pytest.fixture(scope="module")
def ck():
    return dlx.load(BUILD / "kernels" / "compile_kernels.so")


def f32(n):
    return np.arange(n, dtype=np.float32)


def outcome(fn):
    """(exception type, message) or ("ok", value as a list)."""
    try:
        return "ok", np.asarray(fn()).tolist()
    except Exception as e:  # noqa: BLE001 - compared, not hidden
        return type(e), str(e)


# ---- item 8: eight threads' first staged calls, in fresh processes -----------------------

RACE = r"""
import os, threading
import numpy as np
import jax
import dlx
build = os.environ["DLX_BUILD_DIR"]
lib = dlx.load(os.path.join(build, "kernels", "compile_kernels.so"))
ek = dlx.load(os.path.join(build, "kernels", "effect_kernels.so"))
barrier = threading.Barrier(8)
errors = []

def first_call(i):
    # even threads: a traced argument (dlx._trace.dispatch); odd: an effectful kernel without
    # one (dlx._trace.effects), staged only if the handler is registered in time
    f = jax.jit(lambda a: lib.scale(a, 2.0))
    g = jax.jit(lambda: ek.counter(40 + i))
    x = np.ones(4, np.float32)
    barrier.wait()  # all eight make their first staged call at once
    try:
        if i % 2 == 0:
            assert np.asarray(f(x)).tolist() == [2.0] * 4
        else:
            assert [int(g()) for _ in range(2)] == [0, 1], "counter folded into a constant"
    except BaseException as e:
        errors.append(f"{type(e).__name__}: {e}"[:300])

threads = [threading.Thread(target=first_call, args=(i,)) for i in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(len(errors), errors[:1])
"""


def test_first_staged_calls_of_eight_threads_all_stage():
    # dlx.jax, which registers the handler, is imported lazily by the first staged call;
    # the race needs a fresh process each time (12 processes, 4 at a time)
    env = dict(os.environ, PYTHONPATH=PYPATH, DLX_BUILD_DIR=str(BUILD))
    failures = []
    for batch in range(3):
        procs = [subprocess.Popen([sys.executable, "-c", RACE], env=env, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                 for _ in range(4)]
        for p in procs:
            out, err = p.communicate(timeout=300)
            if p.returncode != 0 or not out.startswith("0 "):
                failures.append((p.returncode, out.strip(), err.strip()[-500:]))
    assert not failures, f"{len(failures)} of 12 processes: {failures[0]}"


# ---- item 7: scalars under jit are the eager call's scalars ------------------------------

BAD_SCALARS = [
    dict(i=1.5), dict(i="3"), dict(i=None), dict(i=2**63), dict(i=-2**63 - 1), dict(i=10**400),
    dict(i=np.float64(2.0)), dict(i=np.ones(2, np.int64)),
    dict(f="1.5"), dict(f=1 + 2j), dict(f=10**400), dict(f=None),
    dict(b=1), dict(b=np.bool_(True)), dict(b=None),
    dict(s=b"abc"), dict(s="\ud800"), dict(s=3),
    dict(ints=[1.5]), dict(ints=(2**63,)), dict(ints=5), dict(ints=np.array([1, 2])),
    dict(ints="12"), dict(floats=["1.5"]), dict(floats=[1j]), dict(floats=[10**400]),
]


@pytest.mark.parametrize("kw", BAD_SCALARS, ids=repr)
def test_bad_scalars_raise_what_the_eager_call_raises(ek, kw):
    x = f32(3)
    eager = outcome(lambda: ek.scalars(x, **kw))
    staged = outcome(lambda: jax.jit(lambda a: ek.scalars(a, **kw))(x))
    assert eager[0] != "ok", eager  # the eager call refuses it
    assert staged == eager
    assert "scalars(): '" + next(iter(kw)) + "'" in staged[1]  # kernel and parameter named


GOOD_SCALARS = [
    {}, dict(i=np.int32(-3), f=2, b=True, s="é", ints=[np.int64(4), 5], floats=(1, 2.5)),
    dict(i=True, f=np.float32(0.5), ints=(), floats=[]), dict(i=2**63 - 1, f=float("inf")),
    dict(f=1e300, floats=[-0.0, 1e-300]),
]


@pytest.mark.parametrize("kw", GOOD_SCALARS, ids=repr)
def test_good_scalars_reach_the_kernel_as_eager_ones_do(ek, kw):
    x = f32(3)
    eager = outcome(lambda: ek.scalars(x, **kw))
    assert eager[0] == "ok"
    assert outcome(lambda: jax.jit(lambda a: ek.scalars(a, **kw))(x)) == eager


def test_scalar_conversion_is_the_eager_calls(ek):
    # kernel._scalar is what both use: the declared parameter's value, or its error
    assert ek.scalars._scalar(1, np.int16(7)) == 7 and type(ek.scalars._scalar(1, 7)) is int
    assert ek.scalars._scalar(6, [1, 2.5]) == (1.0, 2.5)
    assert ek.scalars._scalar(3, True) is True
    with pytest.raises(ValueError, match=r"scalars\(\): parameter 0 is no declared scalar"):
        ek.scalars._scalar(0, 1)
    with pytest.raises(ValueError, match="no declared scalar"):
        ek.scalars._scalar(99, 1)


# ---- item 5: kernels declared `; effects` ------------------------------------------------

def test_declaration_says_effects(ek):
    assert ek.counter._effects and not ek.pure_counter._effects
    assert ek.counter.signature == "slot: int -> i64[]; effects"
    assert "Has effects" in ek.counter.__doc__ and "Has effects" not in ek.peek.__doc__


def test_effectful_kernel_without_traced_arguments_runs_each_time(ek):
    slot = SLOT["jit"]
    start = int(ek.peek(slot))
    f = jax.jit(lambda x: (x, ek.counter(slot)))
    assert [int(f(1.0)[1]) - start for _ in range(3)] == [0, 1, 2]
    assert int(ek.peek(slot)) == start + 3  # the trace itself ran nothing


def test_two_effectful_calls_are_not_merged(ek):
    slot = SLOT["merge"]
    start = int(ek.peek(slot))
    f = jax.jit(lambda: (ek.counter(slot), ek.counter(slot)))
    got = [int(v) - start for v in f() + f()]
    assert got == [0, 1, 2, 3]


def test_compiled_program_keeps_the_side_effect(ek):
    hlo = jax.jit(lambda x: (x, ek.counter(SLOT["hlo"]))).lower(1.0).compile().as_text()
    calls = [line for line in hlo.splitlines() if 'custom_call_target="dlx_kernel"' in line]
    assert len(calls) == 1 and "custom_call_has_side_effect=true" in calls[0]


def test_pure_kernel_is_still_folded(ek):
    # declared pure: run once while tracing, its value a constant of the program
    slot = SLOT["pure"]
    start = int(ek.peek(slot))
    f = jax.jit(lambda x: (x, ek.pure_counter(slot)))
    assert [int(f(1.0)[1]) - start for _ in range(3)] == [0, 0, 0]
    assert int(ek.peek(slot)) == start + 1
    assert "dlx_kernel" not in f.lower(1.0).compile().as_text()


def test_unused_effectful_result_still_runs(ek):
    slot = SLOT["unused"]
    start = int(ek.peek(slot))
    f = jax.jit(lambda x: (ek.tick(x, slot), x * 2)[1])
    for _ in range(3):
        np.testing.assert_array_equal(f(f32(2)), f32(2) * 2)
    assert int(ek.peek(slot)) == start + 3


def test_effectful_mut_kernel(ek):
    slot = SLOT["mut"]
    start = int(ek.peek(slot))
    f = jax.jit(lambda x: ek.tick_into(x, slot))
    assert [np.asarray(f(f32(2))).tolist() for _ in range(2)] == [
        [0.0 + start, 1.0 + start], [1.0 + start, 2.0 + start]]


def test_effects_under_vmap_and_scan(ek):
    slot = SLOT["vmap"]
    start = int(ek.peek(slot))
    # no batched argument: one call per program run, its value broadcast
    got = jax.vmap(lambda x: x + ek.counter(slot))(jnp.zeros(3))
    assert np.asarray(got).tolist() == [start] * 3 and int(ek.peek(slot)) == start + 1
    slot = SLOT["scan"]
    start = int(ek.peek(slot))
    _, ys = jax.jit(lambda: jax.lax.scan(lambda c, _: (c, ek.counter(slot)), 0, length=4))()
    assert (np.asarray(ys) - start).tolist() == [0, 1, 2, 3]


def test_effectful_kernel_eager_outside_traces(ek):
    slot = SLOT["eager"]
    start = int(ek.peek(slot))
    assert int(ek.counter(slot)) == start  # JAX imported, nothing tracing: runs now
    assert int(ek.counter(slot=slot)) == start + 1
    with pytest.raises(TypeError, match=r"counter\(\) missing 1 required positional"):
        ek.counter()
    with pytest.raises(ValueError, match="slot out of range"):
        ek.counter(99)


def test_effectful_kernel_without_jax_imports_no_framework():
    out = run_python(
        "import sys, dlx\n"
        f"lib = dlx.load({str(BUILD / 'kernels' / 'effect_kernels.so')!r})\n"
        "print(int(lib.counter(0)), int(lib.counter(0)), 'jax' in sys.modules)\n").stdout
    assert out.split() == ["0", "1", "False"]


# ---- catalogue: hand-built calls and messages that name the kernel -----------------------

def test_hand_built_mut_output_must_alias_its_input(ck):
    import dlx.jax

    dlx.jax.register(ck)
    attrs = dict(dlx.jax._kernel_ref(ck.scale), dlx_none=np.int64(0), p_a=np.float64(3.0))
    out = jax.ShapeDtypeStruct((4,), jnp.float32)
    x = f32(4)
    unaliased = jax.ffi.ffi_call(dlx.jax.TARGET, out)
    for _ in range(2):  # refused each time, never uninitialised memory
        with pytest.raises(jax.errors.JaxRuntimeError,
                           match=r"scale\(\): 'x' is mut: output 0 must be input 0's buffer "
                                 r"\(ffi_call's input_output_aliases=\{0: 0\}\)"):
            jax.block_until_ready(jax.jit(lambda x: unaliased(x, **attrs))(x))
    aliased = jax.ffi.ffi_call(dlx.jax.TARGET, out, input_output_aliases={0: 0})
    np.testing.assert_array_equal(jax.jit(lambda x: aliased(x, **attrs))(x), x * 3)
    # a mut output of another shape than its input: refused too
    short = jax.ffi.ffi_call(dlx.jax.TARGET, jax.ShapeDtypeStruct((3,), jnp.float32))
    with pytest.raises(jax.errors.JaxRuntimeError, match=r"scale\(\): 'x' is mut.*another type"):
        jax.block_until_ready(jax.jit(lambda x: short(x, **attrs))(x))


def test_refused_staged_call_names_the_kernel(ck):
    import dlx.jax

    dlx.jax.register(ck)
    ref = dlx.jax._kernel_ref(ck.square)
    call = jax.ffi.ffi_call(dlx.jax.TARGET, jax.ShapeDtypeStruct((3,), jnp.float32))
    for attrs, words in (({k: v for k, v in ref.items() if k != "dlx_name"},
                          "dlx: the call's kernel name (attribute dlx_name) is missing"),
                         (dict(ref, dlx_lib="0" * 64), "square(): the program runs kernel "
                                                       "'square' of library sha256 " + "0" * 64),
                         (dict(ref, dlx_name="squ\x01are"),  # printable only
                          "kernel name (attribute dlx_name) is 'squ?are'")):
        with pytest.raises(jax.errors.JaxRuntimeError) as e:
            jax.block_until_ready(jax.jit(lambda x: call(x, dlx_none=np.int64(0), **attrs))(
                f32(3)))
        assert words in str(e.value)


@pytest.mark.parametrize("dtype", ["int4", "uint4", "float8_e4m3fn", "float8_e5m2"])
def test_dtypes_dlpack_cannot_express_name_kernel_and_parameter(ck, dtype):
    dt = getattr(jnp, dtype)
    with pytest.raises(TypeError, match=rf"square\(\): 'x' must be f32\|f64\[\.\.\.\]: dtype "
                                        rf"{dtype} has no DLPack equivalent"):
        jax.jit(ck.square)(jnp.zeros(3, dt))
