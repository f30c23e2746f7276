"""Calls that a tracer reaches (interface.md, "Kernels inside jax.jit"): when the C call path
cannot convert an argument, it asks `dispatch` before raising. Framework glue (dlx.jax,
dlx.torch) registers a predicate recognising its tracers and a handler that stages the call.

Only the failure path comes here: an ordinary call never imports this module."""

_handlers = []  # [(predicate(obj) -> bool, handler(kernel, args, kwargs) -> result)]


def register(predicate, handler):
    """Claim calls with an argument for which predicate(arg) is true (once per pair)."""
    entry = (predicate, handler)
    if entry not in _handlers:
        _handlers.append(entry)


def unregister(predicate, handler):
    try:
        _handlers.remove((predicate, handler))
    except ValueError:
        pass


def _values(args, kwargs):
    for a in args:
        yield a
        if isinstance(a, (tuple, list)):  # a traced element of an ints/floats parameter
            yield from a
    yield from kwargs.values()


def dispatch(kernel, args, kwargs):
    """The result of the first handler whose predicate holds for an argument, or
    NotImplemented (the call path then raises its own error unchanged). A declared kernel's
    arguments arrive bound (declared order, defaults filled, kwargs empty); an undeclared
    kernel's as given."""
    for predicate, handler in tuple(_handlers):
        if any(predicate(v) for v in _values(args, kwargs)):
            return handler(kernel, args, kwargs)
    return NotImplemented
