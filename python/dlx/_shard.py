# provisional: replaced by the C-derived rule at merge
"""Which dimensions of a kernel's tensors may be sharded, read from its declaration: the
rule dlx.torch's DTensor strategies (dlx/torch_shard.py) and dlx.jax's partitioning follow.

rule(kernel) -> ShardRule, or None when the kernel declares no signature.
  inputs:  one entry per declared tensor parameter in declaration order (mut ones too): a
           tuple of labels, one per declared dimension: "..." for the batch dimensions, a
           symbol's name, None for a literal extent or "_"; None for the whole entry when
           the declaration gives no dimensions (`x: tensor`)
  results: the same for each declared result
  independent: the labels whose slices the kernel computes independently ("..." when any
           tensor declares it)

This copy derives the rule in Python from the plan the C parser built; "..." is its only
independent label."""
from collections import namedtuple

ShardRule = namedtuple("ShardRule", "inputs results independent")

_rules = {}  # kernel -> its ShardRule (a declaration never changes)


def _label(dim):
    if dim is Ellipsis:
        return "..."
    return dim if isinstance(dim, str) else None


def rule(kernel):
    known = _rules.get(kernel)
    if known is not None:
        return known
    plan = kernel._plan
    if plan is None:
        return None
    inputs = tuple(None if p[5] is None else tuple(_label(d) for d in p[5])
                   for p in plan if p[1] == "tensor")
    results = []
    for _dtype, dims in kernel._derived[0]:
        labels = []
        for entry in dims:
            how = entry[0]
            labels.append("..." if how == "batch" else entry[4] if how == "dim"
                          else entry[1] if how == "fresh" else None)
        results.append(tuple(labels))
    independent = frozenset(
        "..." for labels in (*inputs, *results) if labels and "..." in labels)
    made = _rules[kernel] = ShardRule(inputs, tuple(results), independent)
    return made
