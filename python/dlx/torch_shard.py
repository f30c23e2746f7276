"""DTensor sharding strategies for the operators dlx.torch.register makes (docs/torch.md,
"Many devices"), derived from each kernel's shard rule (dlx._shard.rule).

For a call with DTensor arguments, DTensor asks an operator's strategy which placements
its inputs may have and what its results' placements then are; it redistributes the inputs
to the cheapest acceptable ones and calls the operator on each rank's local tensors. The
strategy offered here, per mesh dimension:
- all tensors Replicate (always right, for any kernel);
- for each dimension the rule calls independent ("..." expanded to the call's batch
  dimensions, one choice per batch dimension; named independent dimensions), Shard on that
  dimension for every tensor that has it, Replicate for the others, and Shard on it for
  every result. Offered only where every result has the dimension exactly once and every
  tensor that has it is a DTensor; for the batch, only where all the "..." inputs have the
  same batch shape (the declaration does not say how the kernel combines unequal ones).
So a Shard(d) on an independent dimension stays, each rank's kernel gets its local slice;
any other placement (Shard on another dimension, Partial) is redistributed to Replicate.
A `mut` parameter is written in place: its placement cannot change (a redistributed copy
would take the writes), so only strategies that keep it are offered, and when none does the
call is a RuntimeError that names the kernel and the parameter.

Importing this module does not import torch. register() is skipped quietly on a torch
without DTensor (torch.distributed unavailable, or a torch older than its strategy API).
"""
import functools

from . import _shard


def _dtensor_api(torch):
    """What the strategies use from torch.distributed.tensor, or None without it."""
    try:
        if not torch.distributed.is_available():
            return None
        from torch.distributed.tensor import DTensor
        from torch.distributed.tensor._op_schema import OpStrategy, RuntimeSchemaInfo
        from torch.distributed.tensor._ops.utils import expand_to_full_mesh_op_strategy
        from torch.distributed.tensor.placement_types import Replicate, Shard

        propagator = DTensor._op_dispatcher.sharding_propagator
        register = propagator.register_op_strategy
    except (ImportError, AttributeError):  # no DTensor, or another strategy API
        return None
    return {"OpStrategy": OpStrategy, "expand": expand_to_full_mesh_op_strategy,
            "Replicate": Replicate, "Shard": Shard, "register": register,
            "schema_info": RuntimeSchemaInfo}


def register(torch, kernels, ops):
    """Give each operator (ops: name -> OpOverloadPacket) of `kernels` (name -> Kernel) a
    DTensor strategy from its kernel's rule. Cheap: the rule is read once per kernel here,
    the strategy runs only on DTensor calls (DTensor caches its answer per placements and
    shapes)."""
    api = _dtensor_api(torch)
    if api is None:
        return
    for name, k in kernels.items():
        rule = _shard.rule(k)
        if rule is None:
            continue
        plan = k._plan
        tensors = [i for i, p in enumerate(plan) if p[1] == "tensor"]
        facts = {
            "name": name,
            "names": [p[0] for p in plan],
            "defaults": [p[3] for p in plan],
            "labels": dict(zip(tensors, rule.inputs)),  # plan position -> its labels
            "mut": {i for i in tensors if "mut" in plan[i][6]},
            "results": rule.results,
            "independent": rule.independent,
        }
        # The strategy reads no scalar argument: none is part of DTensor's cache key.
        api["register"](ops[name].default, functools.partial(_strategy, api, facts),
                        api["schema_info"](static_argnum=len(plan) + 1))


def _expand(labels, ndim):
    """One label per dimension of a tensor of `ndim` dimensions: "..." becomes
    ("...", 0), ("...", 1), ... for the batch dimensions it matched. None when the tensor
    cannot match (the call's own check reports it)."""
    if labels is None:
        return [None] * ndim
    if "..." not in labels:
        return list(labels) if len(labels) == ndim else None
    e = labels.index("...")
    nb = ndim - (len(labels) - 1)
    if nb < 0:
        return None
    return [*labels[:e], *(("...", j) for j in range(nb)), *labels[e + 1:]]


def _strategy(api, facts, op_schema):
    OpStrategy, Replicate, Shard = api["OpStrategy"], api["Replicate"], api["Shard"]
    names = facts["names"]
    # the arguments by declared position; DTensor keeps keyword ones in kwargs_schema
    args = list(op_schema.args_schema)
    for i in range(len(args), len(names)):
        d = facts["defaults"][i]
        args.append(op_schema.kwargs_schema.get(names[i], None if d is Ellipsis else d))
    # each given tensor: (position, its per-dimension labels, whether a DTensor)
    given = []
    for i, labels in facts["labels"].items():
        v = args[i] if i < len(args) else None
        if v is None:
            continue
        dt = isinstance(v, OpStrategy)
        shape = tuple(v.shape) if dt else tuple(getattr(v, "shape", ()))
        given.append((i, _expand(labels, len(shape)), dt, shape, labels))
    axes = _axes(facts, given)
    nres = len(facts["results"])
    # one result's labels, its "..." as the first "..." input's batch (dlx_derive.c)
    pos = next((i for i, labels in facts["labels"].items()
                if labels is not None and "..." in labels), None)
    first = next((g for g in given if g[0] == pos), None)  # None: not given, sizes unknown
    res_labels = []
    for labels in facts["results"]:
        if "..." in labels:
            nb = len(first[1]) - (len(first[4]) - 1) if first and first[1] is not None else None
            res_labels.append(None if nb is None else _expand(labels, len(labels) - 1 + nb))
        else:
            res_labels.append(list(labels))
    # The inputs in the order DTensor lists their strategies: positional, then keyword.
    order = [g for g in given if g[2]]
    npos = len(op_schema.args_schema)
    order.sort(key=lambda g: (g[0] >= npos, _kw_index(op_schema, names, g[0])))
    candidates = [[Replicate()] * nres + [Replicate()] * len(order)]
    for axis in axes:
        row = []
        for labels in res_labels:
            if labels is None or labels.count(axis) != 1:
                break
            row.append(Shard(labels.index(axis)))
        else:
            ins, ok, any_in = [], True, False
            for i, exp, dt, _shape, _l in given:
                c = exp.count(axis) if exp is not None else 0
                if c > 1 or (c == 1 and not dt):
                    ok = False  # twice in one tensor; or a plain tensor every rank has whole
                    break
                any_in |= c == 1
            if ok and any_in:
                for i, exp, dt, _shape, _l in order:
                    ins.append(Shard(exp.index(axis)) if exp is not None and axis in exp
                               else Replicate())
                candidates.append(row + ins)
    mesh = op_schema.get_mesh_from_args()
    strategy = api["expand"](mesh, op_schema, candidates, input_index=nres)
    mut = [(k, g) for k, g in enumerate(order) if g[0] in facts["mut"]]
    if mut:
        now = op_schema.args_strategy + op_schema.kwargs_strategy
        keep = [s for s in strategy.strategies
                if all(s.input_specs[k].placements == now[k].strategies[0].output_spec.placements
                       for k, _g in mut)]
        if not keep:
            k, g = mut[0]
            placements = tuple(now[k].strategies[0].output_spec.placements)
            raise RuntimeError(
                f"{facts['name']}(): '{names[g[0]]}' is mut (written in place) and placed "
                f"{placements}, which this call cannot keep: only Shard on a dimension the "
                f"declaration makes independent {sorted(map(str, facts['independent']))}, "
                f"shared by the other tensors, or Replicate can be written in place; "
                f"redistribute '{names[g[0]]}' first (DTensor.redistribute)")
        strategy = OpStrategy(keep)
    return strategy


def _kw_index(op_schema, names, i):
    if i < len(op_schema.args_schema):
        return i
    keys = list(op_schema.kwargs_schema)
    return keys.index(names[i]) if names[i] in keys else len(keys)


def _axes(facts, given):
    """The dimensions this call may be sharded on: ("...", j) for each batch dimension j
    when every given "..." tensor has the same batch shape, and each named independent
    label some given tensor has."""
    axes = []
    if "..." in facts["independent"]:
        batches = []
        for _i, exp, _dt, shape, labels in given:
            if labels is None or "..." not in labels or exp is None:
                continue
            e = labels.index("...")
            batches.append(shape[e:e + len(exp) - (len(labels) - 1)])
        if batches and all(b == batches[0] for b in batches):
            axes += [("...", j) for j in range(len(batches[0]))]
    for label in sorted(lab for lab in facts["independent"] if lab != "..."):
        if any(exp is not None and label in exp for _i, exp, *_ in given):
            axes.append(label)
    return axes
