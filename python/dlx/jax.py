"""Kernels inside jax.jit (interface.md, "Kernels inside jax.jit").

`lib.NAME(...)` given JAX tracers reaches the C call path, which cannot convert them and
asks dlx._trace; the handler here stages the call as an XLA FFI call of dlx's one generic
handler (src/addons/jax/dlx_xla_handler.c, built at first use against jaxlib's headers into
dlx's cache). Result shapes and dtypes come from the declaration (dlx._infer), `mut`
parameters are outputs aliased to their inputs, scalars travel as attributes. The kernel is
named in the program by what it is: its library's sha256 (dlx_lib), its name and its
declaration, matched by the handler against the kernels dlx registered (a program, saved or
not, cannot make dlx call anything else). A library the process has not registered is
looked for among the libraries it loaded, then in dlx's cache by digest (`_find`): never at
a path the program carries (docs/jax.md, "Saved programs").

Eager calls on JAX arrays never come here."""
import atexit
import ctypes
import os
import threading

import jax
import numpy as np

from . import _core, _infer, _pickle, _trace

TARGET = "dlx_kernel"  # the one FFI target every kernel runs through

_lock = threading.RLock()
_handler = None  # the handler library (ctypes), once built and registered
_refs = {}  # kernel -> the attributes its staged calls name it by
_keep = []  # the kernels' handle capsules: the handler's registry points into them
# (digest, name, declaration, path) -> the attributes: one registry entry per kernel of one
# file, however often it is loaded (each dlx.load of a path, each _find, is a new Library
# with new Kernel objects; the registry is never freed and holds MAX_KERNELS)
_registered = {}
_hashed = {}  # a cache file's path -> (stat key, sha256), for _find

_DLX_TO_NP = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "i8": np.int8,
              "i16": np.int16, "i32": np.int32, "i64": np.int64, "u8": np.uint8,
              "u16": np.uint16, "u32": np.uint32, "u64": np.uint64, "bool": np.bool_,
              "c64": np.complex64, "c128": np.complex128}
_NP_TO_DLX = {np.dtype(v): k for k, v in _DLX_TO_NP.items()}
try:
    import ml_dtypes  # jax's bfloat16

    _DLX_TO_NP["bf16"] = ml_dtypes.bfloat16
    _NP_TO_DLX[np.dtype(ml_dtypes.bfloat16)] = "bf16"
except ImportError:  # pragma: no cover - jax depends on it
    pass


def _capsule_pointer(capsule, name):
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    return get(capsule, name)


def _build_handler():
    from . import _build

    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "addon")
    path = _build.build([os.path.join(here, "dlx_xla_handler.c"),
                         os.path.join(here, "dlx_kernel_ref.c")], name="dlx_xla_handler",
                        include_dirs=[jax.ffi.include_dir(), here], cflags=["-std=c11", "-g"])
    lib = ctypes.CDLL(path)
    lib.dlx_xla_init.argtypes = [ctypes.c_void_p]
    lib.dlx_xla_register.argtypes = [ctypes.c_void_p] + [ctypes.c_char_p] * 3
    lib.dlx_xla_set_finder.argtypes = [_FINDER]
    if lib.dlx_xla_init(_capsule_pointer(_core._invoke_api(), b"dlx.invoke_api")) != 0:
        raise RuntimeError("dlx.jax: the XLA handler does not match this dlx")
    lib.dlx_xla_set_finder(_finder)
    # no callback into a finalizing interpreter (the handler then reports "not loaded")
    atexit.register(lib.dlx_xla_set_finder, _FINDER())
    # instantiate: an empty state per call site, which its first run fills with what it
    # proved (kernel id, arguments, shapes): later runs pass only buffers and the stream
    def bundle(sym):
        return {"instantiate": jax.ffi.pycapsule(lib.dlx_xla_instantiate),
                "execute": jax.ffi.pycapsule(getattr(lib, sym))}

    jax.ffi.register_ffi_target(TARGET, bundle("dlx_xla_handler_cpu"), platform="cpu")
    for platform, sym in (("CUDA", "dlx_xla_handler_cuda"), ("ROCM", "dlx_xla_handler_rocm")):
        try:  # registered where jaxlib has the platform (a plugin may come later: kept)
            jax.ffi.register_ffi_target(TARGET, bundle(sym), platform=platform)
        except Exception:  # noqa: BLE001 - a jaxlib without that platform
            pass
    return lib


def _handler_lib():
    global _handler
    with _lock:
        if _handler is None:
            _handler = _build_handler()
        return _handler


def _kernel_ref(kernel):
    """The attributes naming `kernel` in its staged calls (its library's sha256, its name
    and declaration, the library's path for messages); the kernel is registered with the
    handler the first time (its library hashed once)."""
    ref = _refs.get(kernel)
    if ref is not None:
        return ref
    with _lock:
        if kernel in _refs:
            return _refs[kernel]
        handler = _handler_lib()
        path = kernel._path
        try:
            digest = _pickle.content_digest(path)
        except (OSError, ValueError) as e:
            raise ValueError(f"{kernel.__name__}(): cannot stage it: {e}") from e
        # the path as UTF-8 text (a name's other bytes as \xNN): an attribute is a str, which
        # MLIR encodes as UTF-8; the handler compares it as these bytes too
        shown = os.fsencode(path).decode("utf-8", "backslashreplace")
        key = (digest, kernel.__name__, kernel.signature, shown)
        ref = _registered.get(key)
        if ref is None:
            cap = kernel._handle()
            if handler.dlx_xla_register(_capsule_pointer(cap, b"dlx.kernel_handle"),
                                        digest.encode(), kernel.signature.encode(),
                                        shown.encode()) < 0:
                raise RuntimeError(f"{kernel.__name__}(): dlx's XLA registry is full")
            _keep.append(cap)
            ref = _registered[key] = {"dlx_lib": digest, "dlx_name": kernel.__name__,
                                      "dlx_decl": kernel.signature, "dlx_from": shown}
        _refs[kernel] = ref
        return ref


def _register_digest(lib, digest):
    """Register lib's declared kernels; True when its content is `digest`."""
    register(lib)
    return any(_refs.get(lib[n], {}).get("dlx_lib") == digest for n in lib.kernels)


def _cached_digest(path):
    st = os.stat(path)
    key = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)
    hit = _hashed.get(path)
    if hit is None or hit[0] != key:
        hit = _hashed[path] = (key, _pickle._sha256(path))
    return hit[1]


def _find(digest):
    """The handler asks for a library no registered kernel comes from (a saved program's,
    on its call site's first run): 1 when it is now registered. Looked for among the
    libraries this process loaded, then among dlx's cache's built libraries (the user's
    own builds) by content; the cache's checks apply to loading it (dlx.load). A path the
    program names is never opened: it is data, and loading it must not run code it names."""
    import glob

    from . import _build, load

    with _lock:
        for path in list(_pickle._origins):
            try:
                if _pickle.content_digest(path) == digest:
                    return int(_register_digest(load(path), digest))
            except Exception:  # noqa: BLE001 - changed or gone since: not that library
                continue
        try:
            folder = _build.kernels_dir()
        except OSError:
            return 0
        for path in sorted(glob.glob(os.path.join(glob.escape(folder), "lib*.so"))):
            if os.path.basename(path).startswith("libdlx_xla_handler-"):
                continue
            try:
                if _cached_digest(path) == digest:
                    # checked again while loading (digest, unchanged while loaded)
                    return int(_register_digest(_pickle._load_file(path, digest), digest))
            except Exception:  # noqa: BLE001 - unreadable, or not a library dlx loads
                continue
        return 0


_FINDER = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_char_p)


@_FINDER
def _finder(digest):
    try:
        return _find(digest.decode("ascii"))
    except BaseException:  # noqa: BLE001 - never raise into XLA's thread: "not found"
        return 0


def register(lib):
    """Register every declared kernel of `lib` with the XLA handler now (else on first
    use); name -> FFI target name. Calling it again returns the same mapping."""
    out = {}
    for name in lib.kernels:
        k = lib[name]
        if k._plan is None:
            continue
        _kernel_ref(k)
        out[name] = TARGET
    return out


# ---- staging a call ------------------------------------------------------------------

def _is_tracer(obj):
    return isinstance(obj, jax.core.Tracer)


def _dtype_name(x):
    dt = np.dtype(x.dtype)
    name = _NP_TO_DLX.get(dt)
    if name is None:
        raise TypeError(f"dtype {dt} has no DLPack equivalent dlx handles")
    return name


def _fresh(name):
    def fresh(sym):
        raise ValueError(f"{name}(): a result size the data decides" +
                         (f" ('{sym}')" if sym else "") + " cannot be staged: XLA needs static "
                         "shapes (call it outside jax.jit)")
    return fresh


def _static(kernel, i, pname, kind, value):
    """A scalar parameter's attribute value, checked and converted by the eager call's own
    code (kernel._scalar: the same TypeError, OverflowError or ValueError, worded alike)."""
    if _is_tracer(value) or (isinstance(value, (tuple, list)) and any(map(_is_tracer, value))):
        raise TypeError(f"{kernel.__name__}(): '{pname}' is a traced value; {kind} parameters "
                        "must be static (a Python value, e.g. through static_argnums)")
    v = kernel._scalar(i, value)
    if kind in ("int", "bool"):
        return np.int64(v)
    if kind == "float":
        return np.float64(v)
    if kind == "str":
        return v
    return np.asarray(v, dtype=np.int64 if kind == "ints" else np.float64)


def _tensor_dtype(kernel, i, x):
    """A tensor argument's dtype is one dlx can stage, else the eager call's TypeError for a
    dtype DLPack cannot express (int4, float8_*), kernel and parameter named."""
    dt = np.dtype(x.dtype)
    if dt not in _NP_TO_DLX:
        raise TypeError(f"{kernel.__name__}(): '{kernel._plan[i][0]}' must be "
                        f"{kernel._params[i][2]}: dtype {dt} has no DLPack equivalent dlx "
                        "handles")


def _batched_whole(kernel, plan, bound):
    """Every given tensor parameter declares "..." first and every result starts with the
    batch: a vmap batch is one call (XLA broadcasts unbatched inputs)."""
    derived = kernel._derived
    if derived is None:
        return False
    tensors = [p for p, x in zip(plan, bound) if p[1] == "tensor" and x is not None]
    if not tensors or any(not p[5] or p[5][0] is not Ellipsis for p in tensors):
        return False
    return all(dims and dims[0][0] == "batch" for _dt, dims in derived[0])


def staged_call(kernel, args, kwargs):
    """lib.NAME(*args, **kwargs) with tracers among the arguments, as an XLA FFI call."""
    name = kernel.__name__
    plan = kernel._plan
    if plan is None:
        raise TypeError(f"{name}(): a declaration is needed to call it under a JAX "
                        f"transformation (jax.jit, vmap, ...): DLX_KERNEL({name}, \"...\")")
    bound = _infer.bind(kernel, args, kwargs)
    attrs = {}
    none = 0
    ins, muts = [], []
    for i, (pname, kind, _opt, _d, _dts, _dims, flags) in enumerate(plan):
        v = bound[i]
        if v is None:
            if kind != "tensor":  # the eager call's TypeError where None is not declared
                kernel._scalar(i, v)
            none |= 1 << i
            continue
        if kind == "tensor":
            x = v if _is_tracer(v) else jax.numpy.asarray(v)
            _tensor_dtype(kernel, i, x)
            bound[i] = x
            (muts if "mut" in flags else ins).append(x)
        else:
            attrs["p_" + pname] = _static(kernel, i, pname, kind, v)
    tensor_params = [i for i, p in enumerate(plan) if p[1] == "tensor" and bound[i] is not None]
    tensor_params.sort(key=lambda i: "mut" in plan[i][6])  # ins, then muts (stable)
    if none >= 1 << 63:
        none -= 1 << 64

    def stage(tensors):
        """The FFI call on these tensors (the whole arrays, or one device's slices)."""
        b = list(bound)
        for i, x in zip(tensor_params, tensors):
            b[i] = x
        results = _infer.results(kernel, b, shape=lambda x: x.shape, dtype=_dtype_name,
                                 fresh=_fresh(name))
        out_types = [jax.ShapeDtypeStruct(tuple(s), _DLX_TO_NP[dt]) for s, dt in results]
        ms = tensors[len(ins):]
        out_types += [jax.ShapeDtypeStruct(m.shape, m.dtype) for m in ms]
        nres = len(results)
        aliases = {len(ins) + j: nres + j for j in range(len(ms))}
        call = jax.ffi.ffi_call(
            TARGET, out_types, input_output_aliases=aliases or None,
            vmap_method="broadcast_all" if _batched_whole(kernel, plan, b) else "sequential",
            # `; effects`: XLA keeps, runs and never merges each call (the custom call's
            # side effect); a kernel without results is kept for what it writes
            has_side_effect=kernel._effects or not out_types)
        return out_types, call

    out_types, call = stage(ins + muts)  # checks the arguments at trace time, whole
    fixed = dict(_kernel_ref(kernel), dlx_none=np.int64(none), **attrs)
    partitioned = None
    if out_types and not kernel._effects and _many_devices():
        from . import _jax_shard

        partitioned = _jax_shard.partitioned(kernel, plan, tensor_params, ins + muts,
                                             out_types, stage, fixed)

    # A rule that only refuses: jax.grad then names the kernel and the way out.
    def run(*tensors):
        if partitioned is not None:
            return partitioned(*tensors)
        return call(*tensors, **fixed)

    run.__name__ = run.__qualname__ = f"dlx_{name}"
    run = jax.custom_jvp(run)

    @run.defjvp
    def no_rule(primals, tangents):
        raise TypeError(f"{name}(): dlx kernels have no differentiation rule; give it one with "
                        "jax.custom_vjp (its backward may be another dlx kernel)")

    outs = run(*ins, *muts)
    if not out_types:
        return None
    return outs[0] if len(outs) == 1 else tuple(outs)


_device_count = None


def _many_devices():
    """More than one device: only then may a call be partitioned (one device keeps the plain
    FFI call, and its cost). Asked once: jax's device list is fixed after backend init."""
    global _device_count
    if _device_count is None:
        _device_count = jax.device_count()
    return _device_count > 1


def _tracing():
    """A JAX trace is running on this thread (jit, vmap, grad, scan...): jax's own test for
    a clean trace state, the one its jit dispatch uses."""
    return not _trace_state_clean()


try:
    from jax._src.core import trace_state_clean as _trace_state_clean
except ImportError:  # pragma: no cover - a jax that moved it: find the current trace
    from jax.extend.core import find_top_trace as _find_top_trace

    def _trace_state_clean():
        return type(_find_top_trace(())).__name__ == "EvalTrace"


_trace.register(_is_tracer, staged_call)
_trace.register_active(_tracing, staged_call)


# The FFI target is registered on import: a process that deserializes a saved program and
# loaded none of its libraries gets dlx's error naming them, not XLA's "no handler".
_handler_lib()


def export(fun, *, disabled_checks=(), **kwargs):
    """jax.export.export(fun) for a function that calls dlx kernels (jax.jit applied when
    it is not jitted yet): dlx's FFI target is allowed (jax.export refuses custom calls it
    does not know to be stable; a dlx call names its kernel by content, docs/jax.md "Saved
    programs"). Returns jax.export's Exported, called with the argument shapes."""
    from jax import export as jax_export

    if not hasattr(fun, "lower"):
        fun = jax.jit(fun)
    checks = [*disabled_checks, jax_export.DisabledSafetyCheck.custom_call(TARGET)]
    return jax_export.export(fun, disabled_checks=checks, **kwargs)
