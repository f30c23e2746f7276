"""Calls that a tracer reaches (interface.md, "Kernels inside jax.jit"): when the C call path
cannot convert an argument, it asks `dispatch` before raising. Framework glue (dlx.jax,
dlx.torch) registers a predicate recognising its tracers and a handler that stages the call.

Only the failure path comes here, and calls of kernels declared `; effects`, which ask
`effects` whether a framework traces (a staged call then, even without traced arguments):
an ordinary call of a pure kernel never imports this module."""

import importlib
import sys
import threading

_handlers = []  # [(predicate(obj) -> bool, handler(kernel, args, kwargs) -> result)]
# Framework glue that registers itself on import, imported here once its framework is (a
# tracer can only exist then); importing dlx imports no framework.
_glue = {"jax": "dlx.jax"}
# Held while glue is imported: a thread that finds an entry waits until its handler is
# registered (the entry goes only after the import), never sees neither. Reentrant: the
# glue's own import may stage a call.
_glue_lock = threading.RLock()
_active = []  # [(active() -> bool, handler)]: frameworks that stage effectful kernels


def _import_glue():
    # no lock unless some framework's glue is due (effectful kernels come here every call)
    for framework in tuple(_glue):
        if framework in sys.modules:
            break
    else:
        return
    with _glue_lock:
        for framework, module in tuple(_glue.items()):
            if framework in sys.modules:
                importlib.import_module(module)  # registers its handler
                _glue.pop(framework, None)


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


def dispatch(kernel, args, kwargs, error=None):
    """The result of the first handler whose predicate holds for an argument, or
    NotImplemented (the call path then raises its own error unchanged). A declared kernel's
    arguments arrive bound (declared order, defaults filled, kwargs empty); an undeclared
    kernel's as given. `error` is the call path's: a dlx._core.OperatorPath (a torch call
    that only the operator's path keeps exact) goes to dlx.torch_ops."""
    if error is not None and type(error).__name__ == "OperatorPath":
        from . import _core

        if isinstance(error, _core.OperatorPath):
            from . import torch_ops

            return torch_ops.operator_path(kernel, args, kwargs)
    _import_glue()
    for predicate, handler in tuple(_handlers):
        if any(predicate(v) for v in _values(args, kwargs)):
            return handler(kernel, args, kwargs)
    return NotImplemented


def register_active(active, handler):
    """Stage calls of kernels declared `; effects` while active() is true (a trace of the
    framework's is running), even when no argument is traced (once per pair)."""
    entry = (active, handler)
    if entry not in _active:
        _active.append(entry)


def effects(kernel, args):
    """A call of a kernel declared `; effects` (args bound in declared order): the first
    active framework's staged call, or NotImplemented (the call then runs now). The C call
    path asks this before converting anything, for such kernels only."""
    _import_glue()
    for active, handler in tuple(_active):
        if active():
            return handler(kernel, args, {})
    return NotImplemented
