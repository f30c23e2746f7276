"""Which dimensions of a declared kernel may be split across devices (issue 32).

The rule is derived in C from the declaration (dlx_derive_shard, src/core/signatures/dlx_derive.c):
a size symbol marked independent (`b*`) and the batch `...` (when every output keeps it)
may be split, each device's call then computes its slice alone; every other dimension is
replicated before the call. dlx.jax (a custom_partitioning rule) and dlx.torch (DTensor
strategies) both read it here.

    rule(kernel) -> ShardRule | None   None: the kernel has no declaration
    ShardRule.inputs:  per declared tensor parameter (mut ones included), in declared
                       order, a tuple of labels, one per declared dimension: the size
                       symbol's name, "..." for the batch (the consumer expands it to the
                       actual rank), None for a literal extent or "_"; None instead of a
                       tuple for a tensor declared without brackets (any rank: replicated)
    ShardRule.results: the same per declared result (() for a scalar result)
    ShardRule.independent: frozenset of the labels that may be split
"""
import collections
import weakref

ShardRule = collections.namedtuple("ShardRule", "inputs results independent")

_rules = weakref.WeakKeyDictionary()  # kernel -> its ShardRule: computed once per kernel


def rule(kernel):
    """The kernel's ShardRule, or None when it has no declaration."""
    try:
        return _rules[kernel]
    except KeyError:
        pass
    raw = kernel._shard
    r = None if raw is None else ShardRule(*raw)
    _rules[kernel] = r
    return r
