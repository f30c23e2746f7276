"""dlx calls across devices under jax.jit (docs/jax.md, "Many devices"; issue 32): a call is
partitioned along the dimensions its declaration marks independent (`b*`, and `...`), every
device's kernel call sees only its slice and the compiled program gathers nothing on that
dimension; any other split is gathered first, and the result is right.

Four CPU devices need XLA_FLAGS before JAX starts its backend, so the scenarios run in one
child process (run_python) and report as JSON; this process keeps its one device."""
import json

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="JAX is installed in the venv only (make venv)")

import dlx  # noqa: E402
from conftest import BUILD, run_python  # noqa: E402

SCENARIOS = r'''
import json, os, traceback
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
import jax, jax.numpy as jnp, numpy as np, dlx
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

build = os.environ["DLX_BUILD_DIR"]
jk = dlx.load(os.path.join(build, "kernels", "jax_kernels.so"))
ck = dlx.load(os.path.join(build, "kernels", "compile_kernels.so"))
mesh = jax.make_mesh((4,), ("d",))
mesh22 = jax.make_mesh((2, 2), ("a", "b"))
out = {"devices": jax.device_count()}

def put(a, m, spec):
    return jax.device_put(jnp.asarray(a), NamedSharding(m, spec))

def spec(y):
    s = list(y.sharding.spec)
    while s and s[-1] is None:
        s.pop()
    return s

def hlo(f, *args):
    return jax.jit(f).lower(*args).compile().as_text()

def scenario(fn):
    try:
        out[fn.__name__] = fn()
    except Exception as e:
        out[fn.__name__] = {"error": type(e).__name__ + ": " + str(e)}
    return fn

X = np.arange(32, dtype=np.float32).reshape(8, 4) - 7.5
W = np.arange(4, dtype=np.float32) + 0.5
ROWS = X * W
BATCH = X + X.sum(-1, keepdims=True)

def rows(x, w):
    return jk.shard_rows(x, w)

@scenario
def rows_split():
    x = put(X, mesh, P("d"))
    y, seen = jax.jit(rows)(x, W)
    return {"ok": bool(np.allclose(y, ROWS)), "seen": np.asarray(seen).tolist(),
            "spec": spec(y), "gather": "all-gather" in hlo(rows, x, W),
            "jaxpr": str(jax.make_jaxpr(rows)(x, W))}

@scenario
def rows_split_on_n():
    x = put(X, mesh, P(None, "d"))
    y, seen = jax.jit(rows)(x, W)
    return {"ok": bool(np.allclose(y, ROWS)), "seen": np.asarray(seen).tolist()}

@scenario
def batch_split():
    x = put(X, mesh, P("d"))
    f = lambda x: jk.shard_batch(x)
    y, seen = jax.jit(f)(x)
    return {"ok": bool(np.allclose(y, BATCH)), "seen": np.asarray(seen).tolist(),
            "spec": spec(y), "gather": "all-gather" in hlo(f, x)}

@scenario
def batch_split_on_n():
    y, seen = jax.jit(lambda x: jk.shard_batch(x))(put(X, mesh, P(None, "d")))
    return {"ok": bool(np.allclose(y, BATCH)), "seen": np.asarray(seen).tolist()}

@scenario
def mesh_2x2():
    x3 = np.arange(64, dtype=np.float32).reshape(2, 8, 4)
    y, seen = jax.jit(lambda x: jk.shard_batch(x))(put(x3, mesh22, P("a", "b")))
    r, rseen = jax.jit(rows)(put(X, mesh22, P("a", "b")), W)
    return {"ok": bool(np.allclose(y, x3 + x3.sum(-1, keepdims=True))),
            "seen": np.asarray(seen).ravel().tolist(), "spec": spec(y),
            "rows_ok": bool(np.allclose(r, ROWS)), "rows_seen": np.asarray(rseen).tolist()}

@scenario
def uneven():
    auto = Mesh(np.array(jax.devices()), ("d",))
    x6 = X[:6]
    f = lambda x: jk.shard_rows(jax.lax.with_sharding_constraint(x, NamedSharding(auto, P("d"))), W)
    y, seen = jax.jit(f)(x6)
    return {"ok": bool(np.allclose(y, x6 * W)), "seen": np.asarray(seen).tolist()}

@scenario
def mut():
    acc = put(np.ones(8, np.float32), mesh, P("d"))
    f = lambda a, b: jk.shard_accumulate(a, b)
    y = jax.jit(f)(acc, jnp.arange(8.0, dtype=jnp.float32))
    return {"ok": bool(np.allclose(y, 1 + np.arange(8))), "spec": spec(y),
            "gather": "all-gather" in hlo(f, acc, jnp.arange(8.0, dtype=jnp.float32))}

@scenario
def jit_of_vmap():
    # a per-element ("sequential") vmap is a lax.map, which JAX refuses over an Explicit
    # mesh's split batch: dlx's batching rule makes the mapped axis whole first
    auto = put(X, Mesh(np.array(jax.devices()), ("d",)), P("d"))
    f = jax.jit(jax.vmap(lambda r: jk.shard_rows(r[None], W)[0][0]))
    y = f(auto)
    explicit = f(put(X, mesh, P("d")))
    z, seen = jax.jit(jax.vmap(lambda r: jk.shard_batch(r)))(put(X, mesh, P("d")))
    return {"ok": bool(np.allclose(y, ROWS)) and bool(np.allclose(z, BATCH)) and
            bool(np.allclose(explicit, ROWS)), "seen": np.asarray(seen).tolist()}

X3 = np.arange(64, dtype=np.float32).reshape(2, 8, 4) - 31.5  # 2 arrays like X, for vmap

def per_row(f, xs):
    """f on each array of xs, eagerly and whole: what a vmap must give."""
    return [np.stack([np.asarray(f(np.asarray(x))[k]) for x in xs]) for k in range(2)]

def rows_w(x):
    return jk.shard_rows(x, W)

@scenario
def vmap_of_jit():
    # jit traces a custom_partitioning call, then vmap batches that jaxpr: custom_partitioning
    # has no batching rule of its own
    res = {}
    for name, f, a, sp, m in [
            ("batch_split", jk.shard_batch, X3, P(None, "d"), mesh),      # x's rows split
            ("batch_vsplit", jk.shard_batch, np.concatenate([X3, X3]), P("d"), mesh),  # mapped axis
            ("batch_2x2", jk.shard_batch, X3, P("a", "b"), mesh22),
            ("rows_split", rows_w, X3, P(None, "d"), mesh),                # per element (lax.map)
            ("rows_vsplit", rows_w, np.concatenate([X3, X3]), P("d"), mesh)]:
        x = put(a, m, sp)
        want = per_row(f, a)
        for how, g in [("vmap_jit", jax.vmap(jax.jit(f))), ("jit_vmap", jax.jit(jax.vmap(f))),
                       ("jit_vmap_jit", jax.jit(jax.vmap(jax.jit(f)))), ("vmap", jax.vmap(f))]:
            y, seen = g(x)
            res[f"{name}/{how}"] = {
                "ok": bool(np.allclose(y, want[0])) and seen.shape == want[1].shape,
                "seen": sorted(set(np.asarray(seen).ravel().tolist())), "spec": spec(y)}
    # one argument mapped, the other not: broadcast to the batch, as the plain call's rule
    x = put(X3, mesh, P(None, "d"))
    y, seen = jax.vmap(jax.jit(jk.shard_add), in_axes=(0, None))(x, X)
    res["unmapped"] = {"ok": bool(np.allclose(y, X3 + X)),
                       "seen": sorted(set(np.asarray(seen).ravel().tolist()))}
    y, seen = jax.vmap(jax.jit(jk.shard_add), in_axes=(1, 0))(
        put(np.swapaxes(X3, 0, 1), mesh, P("d")), X3)
    res["axis1"] = {"ok": bool(np.allclose(y, X3 + X3)), "spec": spec(y)}
    return res

@scenario
def broadcast():
    # two "..." parameters: x's batch is the results'; y's may differ (the kernel broadcasts
    # one row): the batch stays split only where every "..." tensor has the same batch
    res = {}
    xs = put(X, mesh, P("d"))
    for name, y in [("same_split", put(X * 2, mesh, P("d"))), ("same_whole", X * 2),
                    ("same_other_axis", put(X * 2, mesh, P(None, "d"))),
                    ("one_row", X[:1] * 2), ("no_batch", X[0] * 2),
                    ("one_row_3d", (X[:1] * 2)[None])]:
        f = jax.jit(jk.shard_add)
        z, seen = f(xs, y)
        want, want_seen = jk.shard_add(np.asarray(X), np.asarray(y))
        res[name] = {"ok": bool(np.allclose(z, want)) and z.shape == want.shape,
                     "seen": sorted(set(np.asarray(seen).ravel().tolist())),
                     "want_seen": sorted(set(np.asarray(want_seen).ravel().tolist())),
                     "spec": spec(z), "gather": "all-gather" in hlo(jk.shard_add, xs, y)}
    return res

@scenario
def lead():
    # "..." after a dimension: y's batch (2) is not x's (8) though both have n = 4 rows first
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    y = np.arange(8, dtype=np.float32).reshape(4, 2) * 100
    want = np.asarray(jk.shard_lead(x, y))
    f = jax.jit(jk.shard_lead)
    res = {}
    for name, m, sp in [("d", mesh, P(None, "d")), ("a", mesh22, P(None, "a")),
                        ("ab", mesh22, P("a", "b"))]:
        res[name] = bool(np.allclose(f(put(x, m, sp), y), want))
    xs = put(x, mesh, P(None, "d"))  # the same batch: stays split
    z = f(xs, x)
    res["same"] = {"ok": bool(np.allclose(z, np.asarray(jk.shard_lead(x, x)))), "spec": spec(z),
                   "gather": "all-gather" in hlo(jk.shard_lead, xs, x)}
    return res

@scenario
def custom_vjp():
    @jax.custom_vjp
    def f(x):
        return jk.shard_rows(x, W)[0]
    f.defvjp(lambda x: (f(x), None), lambda _, g: (jk.shard_rows(g, W)[0],))
    g = jax.jit(jax.grad(lambda x: (f(x) * 2).sum()))(put(X, mesh, P("d")))
    return {"ok": bool(np.allclose(g, np.broadcast_to(2 * W, X.shape)))}

@scenario
def export():
    from jax import export
    x = put(X, mesh, P("d"))
    exp = export.export(jax.jit(rows), disabled_checks=[
        export.DisabledSafetyCheck.custom_call("dlx_kernel")])(x, W)
    y, seen = exp.call(x, W)
    text = exp.mlir_module()
    return {"ok": bool(np.allclose(y, ROWS)), "plain": "dlx_kernel" in text and
            "CustomSPMDPartitioning" not in text}

@scenario
def unmarked():
    x = put(X, mesh, P("d"))
    f = lambda x: ck.outer(x[:, 0], W)
    y = jax.jit(f)(x)
    return {"ok": bool(np.allclose(y, np.outer(X[:, 0], W))),
            "jaxpr": str(jax.make_jaxpr(f)(x))}

@scenario
def in_shard_map():
    x = put(X, mesh22, P("a"))
    f = jax.shard_map(lambda x: jk.shard_rows(x, W), mesh=mesh22, in_specs=P("a"),
                      out_specs=(P("a"), P("a")), axis_names={"a"})
    y, seen = jax.jit(f)(x)
    return {"ok": bool(np.allclose(y, ROWS)), "seen": np.asarray(seen).tolist(),
            "jaxpr": str(jax.make_jaxpr(f)(x))}

@scenario
def gspmd():
    jax.config.update("jax_use_shardy_partitioner", False)
    try:
        x = put(X, mesh, P("d"))
        f = lambda x: jk.shard_rows(x, W)
        y, seen = jax.jit(f)(x)
        return {"ok": bool(np.allclose(y, ROWS)), "jaxpr": str(jax.make_jaxpr(f)(x))}
    finally:
        jax.config.update("jax_use_shardy_partitioner", True)

@scenario
def whole_result():
    try:
        jax.block_until_ready(jax.jit(lambda x: jk.shard_whole_result(x))(
            put(np.ones(8, np.float32), mesh, P("d"))))
        return {"raised": None}
    except Exception as e:
        return {"raised": type(e).__name__, "msg": str(e)}

print("RESULT" + json.dumps(out))
'''


@pytest.fixture(scope="module")
def sc():
    r = run_python(SCENARIOS)
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT")][-1]
    out = json.loads(line[len("RESULT"):])
    assert out["devices"] == 4
    return out


def get(sc, name):
    v = sc[name]
    assert "error" not in v, v["error"]
    return v


def test_split_on_an_independent_dim_stays_split_and_each_call_sees_its_slice(sc):
    v = get(sc, "rows_split")
    assert v["ok"]
    assert v["seen"] == [8] * 8          # 2 of the 8 rows (x 4) per call: 1/4 of 32
    assert not v["gather"]               # no all-gather in the compiled program
    assert v["spec"] == ["d"]
    assert "custom_partitioning" in v["jaxpr"]


def test_split_on_another_dim_is_gathered_and_right(sc):
    v = get(sc, "rows_split_on_n")
    assert v["ok"] and v["seen"] == [32] * 8


def test_batch_dims_are_independent(sc):
    v = get(sc, "batch_split")
    assert v["ok"] and v["seen"] == [8] * 8 and not v["gather"]
    assert v["spec"] == ["d"]
    v = get(sc, "batch_split_on_n")   # the kernel sums over n: a split n would be wrong
    assert v["ok"] and v["seen"] == [32] * 8


def test_a_2x2_mesh(sc):
    v = get(sc, "mesh_2x2")
    assert v["ok"] and v["seen"] == [16] * 16 and v["spec"] == ["a", "b"]
    # rows split over "a" only; n (over "b") gathered
    assert v["rows_ok"] and v["rows_seen"] == [16] * 8


def test_a_mesh_axis_that_does_not_divide_is_gathered(sc):
    v = get(sc, "uneven")
    assert v["ok"] and v["seen"] == [24] * 6


def test_mut_parameter_stays_split(sc):
    v = get(sc, "mut")
    assert v["ok"] and not v["gather"]
    assert v["spec"] == ["d"]


def test_jit_of_vmap_custom_vjp_and_export_keep_working(sc):
    v = get(sc, "jit_of_vmap")
    assert v["ok"] and v["seen"] == [8] * 8  # the vmapped rows stay split: 2 x 4 per call
    assert get(sc, "custom_vjp")["ok"]
    v = get(sc, "export")
    assert v["ok"] and v["plain"]  # exported as the plain FFI call (no Python callback)


def test_vmap_of_a_jitted_sharded_call(sc):
    """vmap(jit(f)) batches the jaxpr jit traced, a custom_partitioning call (which has no
    batching rule of its own), jit(vmap(f)) binds it with batch tracers: values equal f on
    each array; a kernel whose tensors all
    start with "..." gets the whole batch in one call, still split (the vmapped axis is one
    more batch dimension); any other runs once per element, as the plain call does."""
    v = get(sc, "vmap_of_jit")
    assert all(r["ok"] for r in v.values()), v
    # (an eager vmap, "vmap", runs op by op: right, whole)
    for how in ("vmap_jit", "jit_vmap", "jit_vmap_jit"):
        # (2, 8, 4) split on the rows: each call 2 x 2 x 4 elements, nothing gathered
        assert v[f"batch_split/{how}"]["seen"] == [16], v
        assert v[f"batch_split/{how}"]["spec"] == [None, "d"], v
        # the mapped axis split (4 arrays over 4 devices): each call one whole (8, 4) array
        vs = v[f"batch_vsplit/{how}"]
        assert vs["seen"] == [32] and vs["spec"] == ["d"], vs
        assert v[f"batch_2x2/{how}"]["seen"] == [16] and v[f"batch_2x2/{how}"]["spec"] == ["a", "b"]
        # shard_rows is not "..."-first: once per array, whole (the mapped axis gathered,
        # which an Explicit mesh's lax.map needs)
        assert v[f"rows_split/{how}"]["seen"] == [32] and v[f"rows_vsplit/{how}"]["seen"] == [32]
    # an unmapped argument is broadcast to the batch: each call 2 x 2 x 4 of x and of y
    assert v["unmapped"]["seen"] == [16016]
    assert v["axis1"]["spec"] == [None, "d"]  # mapped on axis 1: the result's batch first


def test_two_batches_split_only_where_they_are_the_same(sc):
    """x: f32[..., n], y: f32[..., n] -> f32[..., n], x (8, 4) split on its rows: y's batch
    equal to x's is split alike (each call 2 rows of each); y broadcasting (one row, or
    none) leaves the declaration silent on how the kernel pairs the rows, so x is gathered
    and every call sees both whole, as the unsharded call does. Values equal it always."""
    v = get(sc, "broadcast")
    for name in ("same_split", "same_whole", "same_other_axis"):
        assert v[name]["ok"] and v[name]["seen"] == [8008], (name, v[name])
        assert v[name]["spec"] == ["d"] and not v[name]["gather"], (name, v[name])
    for name in ("one_row", "no_batch", "one_row_3d"):
        assert v[name]["ok"] and v[name]["seen"] == v[name]["want_seen"] == [32004], (name, v)
        assert v[name]["spec"] == [], (name, v[name])


def test_a_batch_after_a_leading_dimension(sc):
    """"x: f32[n, ...], y: f32[n, ...]": the batch is the dimensions after n; y's (2) is
    not x's (8) though their first dimensions agree: gathered and right (it was split on
    x's batch and y's alike, a wrong value, before), the same batch stays split."""
    v = get(sc, "lead")
    assert v["d"] and v["a"] and v["ab"], v
    assert v["same"]["ok"] and v["same"]["spec"] == [None, "d"] and not v["same"]["gather"]


def test_a_kernel_without_independent_dims_is_not_partitioned(sc):
    v = get(sc, "unmarked")
    assert v["ok"] and "custom_partitioning" not in v["jaxpr"]


def test_inside_a_hand_written_shard_map_the_call_is_the_plain_one(sc):
    v = get(sc, "in_shard_map")
    assert v["ok"] and v["seen"] == [16] * 8 and "custom_partitioning" not in v["jaxpr"]


def test_without_shardy_the_call_is_the_plain_one(sc):
    v = get(sc, "gspmd")
    assert v["ok"] and "custom_partitioning" not in v["jaxpr"]


def test_a_result_the_size_of_the_whole_array_is_an_error_not_a_wrong_gather(sc):
    v = get(sc, "whole_result")
    assert v["raised"] and "shard_whole_result" in v["msg"], v
    assert "b=2" in v["msg"], v["msg"]


def test_one_device_keeps_the_plain_call():
    """This process has one device: the staged call is the plain FFI call, as before."""
    if jax.device_count() != 1:
        pytest.skip("this process was started with several devices")
    jk = dlx.load(BUILD / "kernels" / "jax_kernels.so")
    x = np.ones((8, 4), np.float32)
    text = str(jax.make_jaxpr(lambda x: jk.shard_rows(x, x[0]))(x))
    assert "ffi_call" in text and "custom_partitioning" not in text
    y, seen = jax.jit(lambda x: jk.shard_rows(x, x[0]))(x)
    assert np.asarray(seen).tolist() == [32] * 8
