"""A dlx call across devices under jax.jit (docs/jax.md, "Many devices"; issue 32).

The declaration says which dimensions the kernel computes slice by slice (dlx._shard, from
C): those may stay split, each device's call then gets its slice; every other dimension is
replicated before the call. The call becomes a `custom_partitioning` function whose Shardy
rule names one factor per dimension: an independent size symbol (or batch dimension) is
one factor shared by every tensor that has it; any other dimension gets a factor of its
own that needs replication. `partition` then settles the shardings itself: an independent
factor keeps the mesh axes of its first sharded operand dimension when they divide every
dimension it stands for, and everything else is replicated; so an uneven split is
gathered, never padded into the kernel."""
import jax
from jax.experimental.custom_partitioning import custom_partitioning
from jax.sharding import NamedSharding, PartitionSpec

from . import _shard

try:
    from jax._src import core as _jcore
    from jax._src.custom_partitioning import custom_partitioning_p as _cp_p
    from jax._src.interpreters import mlir as _mlir
except ImportError:  # pragma: no cover - a jax that moved them: no export fallback
    _cp_p = None

try:
    from jax._src.interpreters.batching import BatchTracer as _BatchTracer
except ImportError:  # pragma: no cover - a jax that moved it
    _BatchTracer = ()

try:
    from jax._src.interpreters import batching as _batching
    _batching.fancy_primitive_batchers  # noqa: B018 - the table the rule goes in
except (ImportError, AttributeError):  # pragma: no cover - a jax that moved it
    _batching = None


def _factors(rule, tensor_labels, shapes, result_labels, result_shapes):
    """Per operand and per result, one factor name per dimension, and the factors that may
    be split."""
    counter = [0]

    def fresh():
        counter[0] += 1
        return f"r{counter[0]}"

    # the batch is split only where every "..." matched the same dims (the results' "..."
    # is the first parameter's; another parameter's may broadcast against it); "..." need
    # not lead ("x: f32[n, ...]"): its dims start where it stands
    batches = {tuple(s[l.index("..."):len(s) - (len(l) - 1 - l.index("..."))])
               for l, s in zip(tensor_labels, shapes) if l is not None and "..." in l}
    batch_ok = "..." in rule.independent and len(batches) == 1
    names = {}  # an independent symbol -> its factor (a symbol need not be a factor name)
    split = set()

    def dims(labels, ndim):
        if labels is None:  # no brackets: any rank, replicated
            return [fresh() for _ in range(ndim)]
        out = []
        for lab in labels:
            if lab == "...":
                nb = ndim - (len(labels) - 1)
                fs = [f"b{j}" if batch_ok else fresh() for j in range(nb)]
                split.update(fs if batch_ok else ())
                out += fs
            elif lab is not None and lab in rule.independent:
                f = names.setdefault(lab, f"s{len(names)}")
                split.add(f)
                out.append(f)
            else:
                out.append(fresh())
        return out

    ins = [dims(l, len(s)) for l, s in zip(tensor_labels, shapes)]
    outs = [dims(l, len(s)) for l, s in zip(result_labels, result_shapes)]
    return ins, outs, split


def _usable():
    """Only the Shardy form is derived here; inside a shard_map the user already split the
    arrays (the plain call on the local block). Under vmap the call is partitioned too:
    _vmap_rule batches it."""
    if not jax.config.jax_use_shardy_partitioner:
        return False
    return not getattr(jax.sharding.get_abstract_mesh(), "manual_axes", ())


def _export_plain():
    """jax.export cannot serialize custom_partitioning (its partition callback is Python):
    a dlx call lowered for export is the plain FFI call (XLA gathers its inputs), as before
    issue 32. Other custom_partitioning calls lower as JAX lowers them."""
    if _cp_p is None or _mlir._lowerings.get(_cp_p) is None:
        return
    entry = _mlir._lowerings[_cp_p]
    jax_rule = getattr(entry, "rule", entry)
    if getattr(jax_rule, "_dlx", False):
        return

    def rule(ctx, *values, **params):
        if (getattr(params.get("partition"), "_dlx", False) and
                ctx.module_context.lowering_parameters.for_export):
            return _mlir.lower_fun(_jcore.jaxpr_as_fun(params["call"]),
                                   multiple_results=True)(ctx, *values)
        return jax_rule(ctx, *values, **params)

    rule._dlx = True
    _mlir.register_lowering(_cp_p, rule, inline=getattr(entry, "inline", True))


_export_plain()


def _vmap_rule():
    """custom_partitioning has no batching rule: `jax.vmap(jax.jit(f))` batches the jaxpr
    jit traced, where the dlx call already is a custom_partitioning, and would fail
    ("Batching rule for 'custom_partitioning' not implemented"); `jax.jit(jax.vmap(f))`
    binds it with batch tracers. For dlx's own calls the batched call is the one the plain
    call's batching gives: a kernel whose tensors and results all start with "..." gets the
    whole batch in one call (partitioned again, on the batched shapes: the vmapped axis is
    one more batch dimension, split if its input is), any other kernel runs once per batch
    element (the plain FFI call's "sequential" rule). Other custom_partitioning calls keep
    JAX's answer."""
    if _cp_p is None or _batching is None:
        return
    table = _batching.fancy_primitive_batchers
    previous = table.get(_cp_p)
    if getattr(previous, "_dlx", False):
        return

    def rule(axis_data, args, dims, **params):
        part = params.get("partition")
        if not getattr(part, "_dlx", False):
            if previous is None:
                raise NotImplementedError("Batching rule for 'custom_partitioning' not "
                                          "implemented")
            return previous(axis_data, args, dims, **params)
        if all(d is None for d in dims):
            outs = _cp_p.bind(*args, **params)
            return outs, [None] * len(outs)
        size = axis_data.size
        whole = getattr(part, "_dlx_batched", None)
        if whole is not None:  # broadcast_all, as the plain call's rule: batch first
            xs = [jax.numpy.broadcast_to(x, (size, *x.shape)) if d is None
                  else jax.numpy.moveaxis(x, d, 0) for x, d in zip(args, dims)]
            outs = whole(xs)
        else:
            args = [x if d is None else _unsplit(x, d) for x, d in zip(args, dims)]
            outs = jax.vmap(_jcore.jaxpr_as_fun(params["call"]),
                            in_axes=list(dims), axis_size=size)(*args)
        return list(outs), [0] * len(outs)

    rule._dlx = True
    table[_cp_p] = rule


_vmap_rule()


def _unsplit(x, d):
    """x with dimension d whole on every device: the per-element loop (lax.map) refuses a
    mapped axis that an Explicit mesh splits; an Auto one is gathered by XLA anyway."""
    sharding = getattr(jax.typeof(x), "sharding", None)
    spec = tuple(getattr(sharding, "spec", ()))
    if d >= len(spec) or spec[d] is None:
        return x
    spec = spec[:d] + (None,) + spec[d + 1:]
    return jax.sharding.reshard(x, NamedSharding(sharding.mesh, PartitionSpec(*spec)))


def partitioned(kernel, plan, tensor_params, tensors, out_types, stage, attrs):
    """A function of the call's tensors (ins, then muts) that runs the kernel partitioned
    along its independent dimensions, or None where there is nothing to split (no
    independent dimension in this call)."""
    rule = _shard.rule(kernel)
    if rule is None or not rule.independent or not _usable():
        return None
    tpos = {}  # parameter index -> index among the declared tensor parameters
    for i, p in enumerate(plan):
        if p[1] == "tensor":
            tpos[i] = len(tpos)
    labels = [rule.inputs[tpos[i]] for i in tensor_params]
    nmut = len(out_types) - len(rule.results)
    res_labels = list(rule.results) + labels[len(labels) - nmut:]
    shapes = [tuple(x.shape) for x in tensors]
    ins, outs, split = _factors(rule, labels, shapes, res_labels,
                                [tuple(t.shape) for t in out_types])
    whole = "..." in rule.independent and _whole_batch(rule, labels)
    if not any(f in split for fs in ins for f in fs) and not (
            whole and any(isinstance(x, _BatchTracer) for x in tensors)):
        return None  # (under vmap the batched call may have the batch to split: kept)
    everything = {f for fs in ins + outs for f in fs}
    text = (", ".join(" ".join(fs) for fs in ins) + " -> " +
            ", ".join(" ".join(fs) for fs in outs))

    def body(*xs):
        return tuple(_call(stage, xs, attrs))

    def partition(mesh, arg_shapes, result_shape):
        axes = _settle(mesh, ins, arg_shapes, split)

        def spec(fs):
            return NamedSharding(mesh, PartitionSpec(*[axes.get(f) for f in fs]))

        return (mesh, body, tuple(spec(fs) for fs in outs), tuple(spec(fs) for fs in ins))

    partition._dlx = True  # _export_plain's and _vmap_rule's mark
    if whole:
        partition._dlx_batched = lambda xs: _batched(kernel, plan, tensor_params, xs, stage,
                                                     attrs)
    f = custom_partitioning(body)
    f.def_partition(partition, sharding_rule=text,
                    need_replication_factors=tuple(sorted(everything - split)))
    f.__name__ = f"dlx_{kernel.__name__}"

    return lambda *xs: list(f(*xs))


def _whole_batch(rule, labels):
    """Every given tensor and every result starts with "...": under vmap the plain call
    hands the kernel the whole batch at once (jax.py's _batched_whole, from the rule)."""
    return (all(lab is not None and lab[:1] == ("...",) for lab in labels) and
            all(r[:1] == ("...",) for r in rule.results))


def _batched(kernel, plan, tensor_params, xs, stage, attrs):
    """The call on batched tensors (the vmapped axis first), partitioned where it can be."""
    out_types, call = stage(list(xs))
    f = partitioned(kernel, plan, tensor_params, xs, out_types, stage, attrs)
    return f(*xs) if f is not None else call(*xs, **attrs)


def _call(stage, xs, attrs):
    _types, call = stage(list(xs))
    return call(*xs, **attrs)


def _settle(mesh, ins, arg_shapes, split):
    """factor -> mesh axes (a tuple) for each split factor that can stay split."""
    chosen, used = {}, set()
    for fs, a in zip(ins, arg_shapes):
        spec = tuple(a.sharding.spec) if isinstance(a.sharding, NamedSharding) else ()
        for d, f in enumerate(fs):
            if f not in split or f in chosen or d >= len(spec) or spec[d] is None:
                continue
            ax = (spec[d],) if isinstance(spec[d], str) else tuple(spec[d])
            if ax and not used.intersection(ax):
                chosen[f] = ax
                used.update(ax)
    out = {}
    for f, ax in chosen.items():
        n = 1
        for x in ax:
            n *= mesh.shape[x]
        if all(a.shape[d] % n == 0 for fs, a in zip(ins, arg_shapes)
               for d, g in enumerate(fs) if g == f):
            out[f] = ax if len(ax) > 1 else ax[0]
    return out
