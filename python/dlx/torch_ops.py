"""dlx.torch.register(lib, namespace): each declared kernel of a dlx.Library becomes the torch
operator torch.ops.<namespace>.<name>, so that torch.compile, torch.export and autograd can
hold it (interface.md, "Kernels inside torch.compile"; user guide docs/torch.md).

- schema: derived in C from the declaration (kernel._schema, src/core/signatures/dlx_derive.c);
- fake implementation: dlx._infer over the declaration (size symbols bound from the fake
  inputs' shapes, symbolic under dynamic shapes; a symbol only in results is a
  data-dependent size);
- implementations: dlx's torch addon (src/addons/torch/dlx_torch_ops.cc, OpKernel:
  at::Tensors to DLTensors, dlx_invoke on torch's current stream, results from at::empty)
  when it can be built, else a Python one that calls the kernel;
- tracing: inside torch.compile, dynamo sees `lib.NAME` as a stand-in that calls the
  operator (the substitute_in_graph mechanism, keyed by the kernel object); under
  non-strict torch.export / make_fx, the kernel's C call path hands a call with fake or
  functional tensors to the operator (dlx._trace). Outside tracing `lib.NAME` is untouched.

Importing this module does not import torch. It does not import dlx.torch either (which
imports it): dlx.torch.register passes in how to load the addon.
"""
import keyword
import threading

from . import _infer, _pickle, torch_shard
from ._core import Kernel, Library

MIN_TORCH = (2, 5)  # torch.library.register_fake / custom ops' fake context, dynamo polyfills

_lock = threading.Lock()
_registrations = {}  # namespace -> Registration
_ops_of = {}  # kernel -> its operator (OpOverloadPacket), for the traced-call hook
_by_file = {}  # a registered file's identity as loaded (_pickle.loaded_key) -> its first
#               Registration (a file changed since is another library: none)

_NAMES = {  # torch dtype attribute -> the grammar's name
    "float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64", "int8": "i8",
    "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "u8", "uint16": "u16",
    "uint32": "u32", "uint64": "u64", "bool": "bool", "complex64": "c64", "complex128": "c128"}


class Registration:
    """What dlx.torch.register made: `.ops` (name -> torch.ops.<namespace>.<name>) and
    `.skipped` (name -> why it is not an operator)."""

    def __init__(self, lib, namespace, ops, skipped, keep, file_key):
        self.lib = lib
        self.namespace = namespace
        self.ops = ops
        self.skipped = skipped
        self.implementation = keep.get("implementation", "python")
        self.file_key = file_key  # lib's file as loaded (None: no file, or changed since)
        self._keep = keep  # the torch.library.Library and the C++ registrations' owners

    def __repr__(self):
        return (f"<dlx.torch.Registration {self.namespace!r} of {self.lib.path!r}: "
                f"{len(self.ops)} operators, {len(self.skipped)} skipped>")


def _torch_version(torch):
    parts = []
    for p in torch.__version__.split("+")[0].split(".")[:2]:
        digits = "".join(c for c in p if c.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def register(lib, namespace, load_addon, build_addon=None):
    """Register every declared kernel of `lib` as torch.ops.<namespace>.<name>; see the
    module's doc. The same lib, or a copy loaded from the same unchanged file, under the
    same namespace again returns the same Registration, and its kernels are that
    namespace's operators from then on; another library under a taken namespace is a
    RuntimeError.
    load_addon(): loads dlx's torch addon for the operators' C++ implementations, raising
    when it cannot be built (dlx.torch's, which also decides the exchange table);
    build_addon(): builds it only, run before the lock (None: load_addon builds)."""
    if not isinstance(lib, Library):
        what = (f"the kernel {lib.__name__!r}; register its library" if isinstance(lib, Kernel)
                else type(lib).__name__)
        raise TypeError(f"dlx.torch.register: expected a dlx.Library (dlx.load, dlx.build), "
                        f"got {what}")
    if not isinstance(namespace, str):
        raise TypeError(f"dlx.torch.register: namespace must be a str, got "
                        f"{type(namespace).__name__}")
    import torch

    if _torch_version(torch) < MIN_TORCH or not hasattr(torch.library, "register_fake"):
        raise RuntimeError(
            f"dlx.torch.register needs torch {MIN_TORCH[0]}.{MIN_TORCH[1]} or newer "
            f"(torch.library.register_fake and torch.compile's polyfills); this is torch "
            f"{torch.__version__}")
    if not (isinstance(namespace, str) and namespace.isidentifier() and namespace.isascii()
            and not keyword.iskeyword(namespace)):
        raise ValueError(f"dlx.torch.register: namespace {namespace!r} is not an identifier")
    clash = _namespace_clash(torch, namespace)
    if clash:
        raise ValueError(f"dlx.torch.register: namespace {namespace!r} cannot hold operators: "
                         f"{clash}; choose another")
    key = _pickle.loaded_key(lib)
    # the addon built before _lock: its first build can take a minute, and every dlx.load
    # takes _lock (adopt); a namespace taken already needs none. It goes in force (the
    # exchange table) only once the operators are defined.
    unbuilt = None  # why it could not be built
    if build_addon is not None and namespace not in _registrations:
        try:
            build_addon()
        except Exception as e:  # noqa: BLE001 (_native_impls says why the addon is not used)
            unbuilt = e
    with _lock:
        reg = _registrations.get(namespace)
        if reg is not None:
            # the same library, or a copy loaded from the same file (whatever other
            # namespaces that file is registered under too): its kernels are now this
            # namespace's operators again (a register elsewhere since may have moved them)
            if reg.lib is lib or (key is not None and reg.file_key == key):
                _point_at(torch, lib, reg, keep=False)
                return reg
            raise RuntimeError(f"dlx.torch.register: namespace {namespace!r} is taken by "
                               f"{reg.lib.path}; choose another for {lib.path}")
        reg = _build(torch, lib, namespace, load_addon, unbuilt, key)
        _registrations[namespace] = reg
        if reg.file_key is not None:  # the first registration answers dlx.load's adopt
            _by_file.setdefault(reg.file_key, reg)
        return reg


def adopt(lib):
    """dlx.load's hook: a library loaded again from a registered library's file (a second
    dlx.load, an unpickled copy in this process) has the same kernels, so its `lib.NAME`
    is the same operator, inside torch.compile and on the direct call."""
    key = _pickle.loaded_key(lib)
    with _lock:
        reg = _by_file.get(key) if key is not None else None
        if reg is None or reg.lib is lib:
            return
        import torch

        _point_at(torch, lib, reg, keep=True)


def _point_at(torch, lib, reg, keep):
    """Make `lib`'s kernels reg's operators (lib: reg.lib or a copy): traced, under torch's
    modes, with autograd. keep: a kernel that is an operator already stays one (dlx.load's
    adopt); else it becomes reg's (an explicit dlx.torch.register). Code torch.compile
    compiled before keeps the operator it traced (its guard is the kernel's identity).
    Under _lock."""
    for name, op in reg.ops.items():
        k = lib[name]
        if (keep and k in _ops_of) or _ops_of.get(k) is op:
            continue
        _trace_in_dynamo(torch, k, op)  # first: if it raises, a retry still points k
        _ops_of[k] = op
        k._mark_operator()


def _namespace_clash(torch, namespace):
    """Why torch.ops.<namespace> would not be an operator namespace, or None: a dunder name
    (Python's, looked up past torch.ops' __getattr__), or a name torch.ops already holds as
    something else (its methods, loaded_libraries, higher_order, ...). Checked before
    torch.library.Library is made: one for such a name fails later, and again in its
    finalizer (an unraisable exception)."""
    if namespace.startswith("__") and namespace.endswith("__"):
        return "dunder names are Python's"
    op_namespace = getattr(torch._ops, "_OpNamespace", None)
    held = vars(torch.ops).get(namespace)
    if held is None:  # what the instance finds before __getattr__: its classes' attributes
        held = next((vars(c)[namespace] for c in type(torch.ops).__mro__
                     if namespace in vars(c)), None)
        if held is None:
            return None
    elif op_namespace is not None and type(held) is op_namespace:
        return None  # an operator namespace already: torch says whether it is taken
    return f"torch.ops.{namespace} is torch's own ({type(held).__name__})"


def _dtype_name(t):
    name = str(t.dtype).rpartition(".")[2]
    return _NAMES.get(name, name)


def _shape(t):
    return tuple(t.shape)


def _fresh(sym):
    import torch

    return torch.library.get_ctx().new_dynamic_size()


def _build(torch, lib, namespace, load_addon, unbuilt, file_key):
    try:
        library = torch.library.Library(namespace, "DEF")
    except RuntimeError as e:
        raise RuntimeError(f"dlx.torch.register: torch refuses namespace {namespace!r}: {e}") from e
    ops, skipped, kernels = {}, {}, {}
    for name in lib.kernels:
        k = lib[name]
        if k.signature is None:
            skipped[name] = ("no declared signature: declare a signature, "
                             f'DLX_KERNEL({name}, "x: f32[n], ...")')
            continue
        try:
            schema = k._schema
            k._derived  # noqa: B018 (raises ValueError with the reason)
        except ValueError as e:
            skipped[name] = str(e).partition("(): ")[2] or str(e)
            continue
        # pt2_compliant_tag, as torch.library.custom_op gives its operators: torch.compile
        # under only_allow_pt2_compliant_ops takes them (opcheck holds: test_torch_operators)
        library.define(schema, tags=(torch.Tag.pt2_compliant_tag,))
        kernels[name] = k
    keep = {"library": library}
    _mark_effects(library, namespace, kernels)
    for name, k in kernels.items():
        qual = f"{namespace}::{name}"
        torch.library.register_fake(qual, _fake_for(torch, k), lib=library)
        ops[name] = getattr(getattr(torch.ops, namespace), name)
    keep["implementation"] = _native_impls(kernels, namespace, keep, load_addon, unbuilt)
    for name, k in kernels.items():
        if keep["implementation"] != "addon":  # every device through Python, slower but there
            impl = _python_impl_for(k)
            if _may_lack_tensors(k):
                impl = _torch_results(torch, impl)
            library.impl(name, impl, "CompositeExplicitAutograd")
        elif _may_lack_tensors(k):
            library.impl(name, _cpu_without_tensors(torch, k, ops[name]),
                         "CompositeExplicitAutograd")
    torch_shard.register(torch, kernels, ops)  # DTensor strategies, where torch has DTensor
    _claim_traced_calls(torch)
    # last: a step above that raises leaves no kernel pointing at operators now dropped
    for name, k in kernels.items():
        _trace_in_dynamo(torch, k, ops[name])
        _ops_of[k] = ops[name]
        k._mark_operator()  # under a torch mode or the profiler, lib.NAME is the operator
    return Registration(lib, namespace, ops, skipped, keep, file_key)


def _mark_effects(library, namespace, kernels):
    """Kernels declared `; effects` are effectful operators: torch.compile threads an effect
    token through their calls (torch's with_effects), so it neither removes a call whose
    result is unused nor merges or reorders calls. The registration lives as long as the
    library. A torch without the registry (before 2.6) is left as it is."""
    register = getattr(library, "_register_effectful_op", None)
    effectful = [name for name, k in kernels.items() if k._effects]
    if register is None or not effectful:
        return
    from torch._library.effects import EffectType

    for name in effectful:
        register(f"{namespace}::{name}", EffectType.ORDERED)


def _native_impls(kernels, namespace, keep, load_addon, unbuilt):
    """Implement the operators for CPU, CUDA/ROCm and PrivateUse1 in C++ (the torch addon,
    built once per torch through dlx's build cache), so a call never enters Python. Where
    the addon cannot be built (unbuilt: why, when register tried first) the Python
    implementation serves; says which, and why."""
    from . import _core

    try:
        if unbuilt is not None:
            raise unbuilt
        load_addon()
    except Exception as e:  # no compiler, no torch headers: the Python implementation
        return f"python (torch addon unavailable: {type(e).__name__}: {e})"
    _quiet_formula_override(namespace)
    handles = keep.setdefault("handles", [])
    for name, k in kernels.items():
        handle = k._handle()  # keeps the kernel (its function, plan, name) alive
        _core.addon_register_op(namespace, name, handle, len(k._derived[0]))
        handles.append(handle)
    return "addon"


def _quiet_formula_override(namespace):
    """The operators carry torch's "no formula" autograd kernel until the user registers one
    (torch.library.register_autograd replaces it): that replacement is the design, not the
    accident torch's override warning is about, so the warning is silenced for exactly
    these operators' Autograd key."""
    import re
    import warnings

    warnings.filterwarnings(
        "ignore", category=UserWarning,
        message=rf"(?s).*Overriding a previously registered kernel.*operator: "
                rf"{re.escape(namespace)}::.*dispatch key: Autograd\n")


def _first_tensor(bound, plan):
    for v, p in zip(bound, plan):
        if p[1] == "tensor" and v is not None:
            return v
    return None


def _fake_for(torch, k):
    plan = k._plan
    nres = len(k._derived[0])

    def fake(*args, **kwargs):
        bound = _infer.bind(k, args, kwargs)
        shapes = _infer.results(k, bound, shape=_shape, dtype=_dtype_name, fresh=_fresh)
        if not shapes:
            return None
        like = _first_tensor(bound, plan)
        outs = []
        for shape, dt in shapes:
            dtype = getattr(torch, _dtype_attr(dt))
            outs.append(like.new_empty(shape, dtype=dtype) if like is not None
                        else torch.empty(shape, dtype=dtype))
        return outs[0] if nres == 1 else tuple(outs)

    fake.__name__ = f"{k.__name__}_fake"
    return fake


def _dtype_attr(name):
    for attr, n in _NAMES.items():
        if n == name:
            return attr
    raise TypeError(f"no torch dtype for {name!r}")


def _python_impl_for(k):
    nres = len(k._derived[0])
    name = k.__name__

    def impl(*args, **kwargs):
        import torch

        # The operator's own body: autograd and the modes have seen the call already.
        with torch.no_grad():
            out = k._call_direct(*_infer.bind(k, args, kwargs))
        if nres == 0:
            return None
        got = 0 if out is None else 1 if nres == 1 or not isinstance(out, tuple) else len(out)
        if got != nres:
            raise RuntimeError(f"{name}(): the kernel returned {got} result"
                               f"{'' if got == 1 else 's'}; its declaration, and so the "
                               f"operator, has {nres}")
        return out

    impl.__name__ = f"{name}_impl"
    return impl


def _may_lack_tensors(k):
    """True when a call can carry no tensor (no tensor parameter, or only optional ones).
    torch's dispatcher picks a kernel by its tensors' devices; a call without any reaches
    only a CompositeExplicitAutograd kernel, as torch's own factory functions do (a CPU,
    CUDA or PrivateUse1 kernel alone: NotImplementedError, "There were no tensor
    arguments to this function")."""
    return all(p[1] != "tensor" or p[2] for p in k._plan)


def _cpu_without_tensors(torch, k, op):
    """The addon operator's implementation for calls without tensors: the CPU kernel
    (OpKernel), whose call's device is then the CPU, as torch's factory functions default
    to it; the kernel allocates its results through that call, on the device it asks for.
    One Python step more than a call with tensors, on these calls only. Reached with a
    tensor only on a device the addon has no kernel for: refused as torch refuses one."""
    cpu = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)
    overload = op.default
    name = k.__name__

    def impl(*args, **kwargs):
        for v in (*args, *kwargs.values()):
            if isinstance(v, torch.Tensor):
                raise NotImplementedError(f"{name}(): the operator has no implementation for "
                                          f"tensors on {v.device} (CPU, CUDA/ROCm, PrivateUse1)")
        return overload.redispatch(cpu, *args, **kwargs)

    impl.__name__ = f"{name}_without_tensors"
    return impl


def _torch_results(torch, impl):
    """The Python implementation of an operator a call may reach without tensors: the eager
    call then returns numpy arrays (its results come from the first tensor argument's
    framework, numpy without one); the operator returns them as torch tensors, no copy."""

    def wrapped(*args, **kwargs):
        out = impl(*args, **kwargs)
        if isinstance(out, tuple):
            return tuple(o if isinstance(o, torch.Tensor) else torch.from_dlpack(o) for o in out)
        return out if out is None or isinstance(out, torch.Tensor) else torch.from_dlpack(out)

    wrapped.__name__ = impl.__name__
    return wrapped


# ---- the direct call keeps torch's rules: calls only the operator gets right -------------

def _tensors(torch, args, kwargs):
    for v in (*args, *kwargs.values()):
        if isinstance(v, torch.Tensor):
            yield v
        elif isinstance(v, (tuple, list)):
            yield from (e for e in v if isinstance(e, torch.Tensor))


def _refuse_leaf_writes(torch, kernel, args):
    """torch refuses an in-place write to a leaf that requires grad under grad mode; so
    does a `mut` parameter (declared order: the call path hands arguments bound)."""
    for p, v in zip(kernel._plan or (), args):
        if ("mut" in p[6] and isinstance(v, torch.Tensor) and v.requires_grad and v.is_leaf):
            raise RuntimeError(
                f"{kernel.__name__}(): '{p[0]}' is a leaf tensor that requires grad, and the "
                "kernel writes it in place (mut): torch refuses in-place operations on such "
                f"leaves; write it under torch.no_grad(), or pass {p[0]}.detach()")


def _no_formula(kernel, args):
    names = [p[0] for p in kernel._plan or ()]
    import torch

    needy = [names[i] if i < len(names) else f"argument {i}" for i, v in enumerate(args)
             if isinstance(v, torch.Tensor) and v.requires_grad]
    which = ", ".join(f"'{n}'" for n in needy) or "a tensor argument"
    return RuntimeError(
        f"{kernel.__name__}(): {which} requires grad, and a direct call of a dlx kernel would "
        "drop the gradient: register the kernel as an operator with "
        "dlx.torch.register(lib, namespace) and give it a formula with "
        "torch.library.register_autograd, or call it under torch.no_grad() (or pass "
        ".detach()ed tensors) when no gradient should flow through it")


def operator_path(kernel, args, kwargs):
    """dlx._trace's handler for dlx._core.OperatorPath: a torch call that the direct path
    would get wrong. A tensor requires grad under grad mode, or a torch mode / the profiler
    watches a kernel registered as an operator: the operator serves the call, so autograd
    (the registered formula, or torch's "not implemented" node) and the modes see it exactly
    as a call of torch.ops.<namespace>.<name>. Without an operator a gradient would be lost
    silently: an error that says how to keep it."""
    import torch

    op = _ops_of.get(kernel)
    with torch._C.DisableTorchFunction():  # a TorchFunctionMode sees the operator, not this
        grad = torch.is_grad_enabled() and any(t.requires_grad
                                               for t in _tensors(torch, args, kwargs))
    if grad:
        _refuse_leaf_writes(torch, kernel, args)
        if op is None:
            raise _no_formula(kernel, args)
    if op is not None:
        return op(*args, **kwargs)
    return kernel._call_direct(*args, **kwargs)  # nothing changed since the call path asked


# ---- tracing: dynamo, and tracers that reach the C call path ---------------------------

def _trace_in_dynamo(torch, kernel, op):
    """Make dynamo trace a call of `kernel` as a call of `op`: a polyfill keyed by the kernel
    object, as torch.compiler.substitute_in_graph registers one for a builtin function (it
    refuses objects that are not functions, hence the same steps here)."""
    from torch._dynamo.guards import GuardBuilder
    from torch._dynamo.trace_rules import _polyfilled_function_ids, get_torch_obj_rule_map
    from torch._dynamo.variables import PolyfilledFunctionVariable
    from torch._dynamo.variables.builder import VariableBuilder

    def traced(*args, **kwargs):
        return op(*args, **kwargs)

    def stand_in(*args, **kwargs):
        return kernel(*args, **kwargs)

    stand_in.__name__ = traced.__name__ = kernel.__name__
    stand_in.__torch_dynamo_original__ = kernel
    stand_in.__torch_dynamo_polyfill__ = traced

    def dispatch(builder, value):
        return PolyfilledFunctionVariable(
            value, source=builder.source, **builder.install_guards(GuardBuilder.ID_MATCH))

    VariableBuilder._id_dispatch()[id(kernel)] = dispatch
    _polyfilled_function_ids.add(id(kernel))
    get_torch_obj_rule_map()[kernel] = PolyfilledFunctionVariable
    PolyfilledFunctionVariable._get_polyfill_handlers()[kernel] = stand_in


_claimed = []


def _is_traced(obj):
    """A tensor whose operations a torch mode, subclass or transform intercepts (FakeTensor,
    FunctionalTensor, torch.func's wrappers...): dlx cannot read its memory, the operator
    can take it."""
    import torch

    if not isinstance(obj, torch.Tensor):
        return False
    tp = type(obj)
    if tp is not torch.Tensor:
        return getattr(tp, "__torch_dispatch__", None) is not torch.Tensor.__torch_dispatch__
    # torch.func's transforms (grad, vmap) wrap plain tensors: no memory of their own
    functorch = getattr(torch._C, "_functorch", None)
    return functorch is not None and functorch.is_functorch_wrapped_tensor(obj)


def _traced_call(kernel, args, kwargs):
    op = _ops_of.get(kernel)
    if op is None:
        return NotImplemented
    return op(*args, **kwargs)


def _claim_traced_calls(torch):
    if _claimed:
        return
    try:
        from . import _trace
    except ImportError:  # a dlx without the traced-call hook: dynamo's path still works
        return
    _trace.register(_is_traced, _traced_call)
    _claimed.append(True)
