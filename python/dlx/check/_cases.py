"""The checks of `python -m dlx check`, run inside the checker's child processes.

Each check is a function of the Context returning its PASS reason, or raising Fail/Skip.
dlx.check (the parent) decides which child runs which checks and survives their crashes.
"""
import ctypes
import gc
import os
import sys
import threading
import tracemalloc
import weakref

from . import _frameworks as fw
from .._dlpack_ctypes import (DELETER, IS_COPIED, IS_SUBBYTE_TYPE_PADDED, READ_ONLY, REQUIRED,
                              SETERROR, VIEW, DLDataType, DLDevice, DLManagedTensorVersioned,
                              DLTensor, capsule_address, capsule_name, header_at,
                              implausible_address, table_at, take)

MAX_PREV_API_DEPTH = 16  # as dlx's consumer: a longer chain is treated as not ending
ROUNDS = 200             # export/import rounds of the leak checks
KNOWN_FLAGS = READ_ONLY | IS_COPIED | IS_SUBBYTE_TYPE_PADDED

# Malformed tensors handed to managed_tensor_to_py_object_no_sync, each in its own child.
# (version, device, dtype, shape, strides); "unreadable" shape/data pointers for the
# wrong-major case: nothing but the version and the deleter may be read there.
MALFORMED = {
    "wrong_major": ((2, 0), (1, 0), (2, 32, 1), "unreadable", None),
    "null_shape": ((1, 3), (1, 0), (2, 32, 1), None, None),
    "negative_extent": ((1, 3), (1, 0), (2, 32, 1), (-1, 3), (3, 1)),
    "overflow": ((1, 3), (1, 0), (2, 32, 1), (1 << 62, 1 << 62), (1 << 62, 1)),
    "bad_dtype": ((1, 3), (1, 0), (3, 64, 1), (2, 3), (3, 1)),  # kDLOpaqueHandle
    "bad_device": ((1, 3), (16, 0), (2, 32, 1), (2, 3), (3, 1)),  # kDLHexagon
}
# Prototypes the allocator must refuse through SetError: (device, dtype, shape).
BAD_ALLOCATIONS = {
    "bad_dtype": ((1, 0), (3, 64, 1), (2, 3)),
    "bad_device": ((16, 0), (2, 32, 1), (2, 3)),
    "negative_extent": ((1, 0), (2, 32, 1), (-1, 3)),
    "overflow": ((1, 0), (2, 32, 1), (1 << 62, 1 << 62)),
}
# The exception kinds a caller expects for each refusal. The contract leaves the kind to the
# table (torch 2.13 reports every failure as MemoryError), so another kind still passes,
# with a note: it is the type of the exception a kernel's caller sees.
ALLOC_KINDS = {"bad_dtype": ("TypeError", "ValueError"), "bad_device": ("ValueError",),
               "negative_extent": ("ValueError",),
               "overflow": ("ValueError", "OverflowError", "MemoryError")}
ALLOC_SHAPES = ((2, 3), (), (0, 4), (5,))
UNREADABLE = 0x10  # in the first page: reading it faults


class Fail(Exception):
    pass


class Skip(Exception):
    pass


# The argument is a plain address: converting it to a ctypes pointer object would fail
# while the caller has an exception set, and the count would be lost.
_COUNTING_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_PATTERN = bytes(range(256)) * 4096  # what a producer's memory holds (1 MiB)
_keep = []  # producer tensors and callbacks a late deleter call may still touch


class Producer:
    """A DLManagedTensorVersioned over checker-owned memory whose deleter counts its calls."""

    def __init__(self, version=(1, 3), device=(1, 0), dtype=(2, 32, 1), shape=(2, 3),
                 strides="compact", byte_offset=0, nbytes=None):
        self.deleted = 0
        ndim = len(shape) if isinstance(shape, tuple) else 2
        if nbytes is None:
            n = 1
            for s in shape if isinstance(shape, tuple) else ():
                n *= max(s, 0)
            nbytes = min(n, 1 << 20) * max(dtype[1] // 8, 1) + byte_offset
        nbytes = max(nbytes, 16)
        self.buf = ctypes.create_string_buffer(_PATTERN[:nbytes] if nbytes <= len(_PATTERN)
                                               else nbytes)
        if shape == "unreadable":
            shape_p, data = ctypes.cast(UNREADABLE, ctypes.POINTER(ctypes.c_int64)), UNREADABLE
        else:
            data = ctypes.addressof(self.buf)
            self.shape = (ctypes.c_int64 * ndim)(*shape) if shape is not None else None
            shape_p = self.shape
        if strides == "compact" and isinstance(shape, tuple):
            acc, compact = 1, []
            for s in reversed(shape):
                compact.insert(0, acc)
                acc *= s
            strides = tuple(compact)
        self.strides = (ctypes.c_int64 * ndim)(*strides) if isinstance(strides, tuple) else None
        self.deleter = _COUNTING_DELETER(self._delete)
        m = self.m = DLManagedTensorVersioned()
        m.version.major, m.version.minor = version
        m.deleter = ctypes.cast(self.deleter, DELETER)
        m.dl_tensor = DLTensor(data, DLDevice(*device), ndim, DLDataType(*dtype), shape_p,
                               self.strides, byte_offset)
        self.ptr = data + byte_offset
        _keep.append(self)

    def _delete(self, _):
        self.deleted += 1

    def pointer(self):
        return ctypes.pointer(self.m)


class Context:
    """What the preamble found: the target, its adapter and the table under test."""

    def __init__(self, type_, adapter, module=None):
        self.type, self.adapter, self.module = type_, adapter, module
        self.address = None  # the major-1 table dlx would use
        self.api = None
        self.source = None
        self.capsule = None
        self.legacy = None
        self.header_problem = None  # why no table can be used

    def need(self, *functions):
        if self.api is None:
            raise Skip(f"no usable table ({self.header_problem})")
        for f in functions:
            if f == "dltensor_from_py_object_no_sync":
                if not self.api.dltensor_from_py_object_no_sync:
                    raise Skip("dltensor_from_py_object_no_sync is NULL (optional)")
            elif not getattr(self.api, f):
                raise Skip(f"{f} is NULL")
        return self.api


def _err(e):
    """An exception in one line (C++ exceptions bring their whole backtrace along)."""
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"


# ---- finding the table (the consumer's order) -------------------------------------

def find_table(ctx):
    import dlx

    t = ctx.type
    _install_the_preferred_torch_table(t)
    attr = getattr(t, "__dlpack_c_exchange_api__", None)
    if attr is not None:
        ctx.capsule, ctx.source = attr, "type attribute __dlpack_c_exchange_api__"
        rec = _torch_record(t)
        if rec is not None and rec.source != "native":  # put there by dlx.torch.install()
            ctx.source += f" ({_describe_record(rec)})"
        return ctx.source
    legacy = getattr(t, "__c_dlpack_exchange_api__", None)
    if legacy is not None:
        ctx.legacy, ctx.source = legacy, "legacy int attribute __c_dlpack_exchange_api__"
        return ctx.source
    try:
        cap = dlx.exchange_api(t)
    except TypeError as e:  # a lazy setup installed a table the consumer refuses
        cap, why = None, _err(e)
    else:
        why = None
    attr = getattr(t, "__dlpack_c_exchange_api__", None)
    if attr is not None:  # dlx's lazy setup (dlx.torch.install) put it there
        ctx.capsule = attr
        ctx.source = "type attribute __dlpack_c_exchange_api__, installed by dlx"
        rec = _torch_record(t)
        if rec is not None:
            ctx.source += f" ({_describe_record(rec)})"
        return ctx.source
    if cap is not None:
        ctx.capsule = cap
        ctx.source = "dlx provider (dlx.register_provider), handed out by dlx.exchange_api"
        return ctx.source
    ctx.header_problem = "no table found"
    raise Fail(why or f"{t.__qualname__} has no __dlpack_c_exchange_api__, no "
               "__c_dlpack_exchange_api__ and no dlx provider (consumers use __dlpack__)")


def _install_the_preferred_torch_table(t):
    """DLX_TORCH_TABLE=addon: the consumer's first torch call would replace torch's own
    table with dlx's addon, so the checker checks that one too."""
    torch = sys.modules.get("torch")
    if torch is None or t is not torch.Tensor:
        return
    import dlx.torch

    try:
        if dlx.torch.preference()[0] != "addon":  # the one reading of the variable
            return
    except ValueError:  # a bad value: the consumer's first call warns and keeps torch's own
        return
    try:
        dlx.torch.install()
    except Exception as e:  # noqa: BLE001 - any failure is the check's answer
        raise Fail(f"DLX_TORCH_TABLE=addon: dlx.torch.install() failed: {_err(e)}") from None


def _describe_record(rec):
    return (f"dlx.torch.install(): {rec.source}, backend {rec.backend}"
            + (f", {rec.path}" if rec.path else ""))


def _torch_record(t):
    mod = sys.modules.get("dlx.torch")
    try:
        return mod.installed() if mod and "torch" in t.__module__ else None
    except Exception:  # noqa: BLE001 - the record is a detail of the report
        return None


def header_capsule(ctx):
    if ctx.legacy is not None:
        why = implausible_address(ctx.legacy)
        if why:
            ctx.header_problem = "implausible legacy address"
            raise Fail(f"__c_dlpack_exchange_api__ is not a plausible table address: {why}")
        ctx.top = ctx.legacy
        return f"legacy int address {ctx.legacy:#x} (no capsule)"
    if ctx.capsule is None:
        raise Skip("no table")
    try:
        name = capsule_name(ctx.capsule)
    except TypeError:
        ctx.header_problem = "the attribute is not a capsule"
        raise Fail(f"__dlpack_c_exchange_api__ is a {type(ctx.capsule).__name__}, not a "
                   "PyCapsule named 'dlpack_exchange_api'") from None
    if name != b"dlpack_exchange_api":
        ctx.header_problem = "wrong capsule name"
        raise Fail(f"capsule is named {name!r}, not 'dlpack_exchange_api'")
    ctx.top = capsule_address(ctx.capsule)
    if not ctx.top:
        ctx.header_problem = "NULL table"
        raise Fail("the capsule holds a NULL pointer")
    return "PyCapsule named 'dlpack_exchange_api'"


def _walk(address):
    """[(address, major, minor)] along prev_api; ends with a problem string or None."""
    chain, seen = [], set()
    while address:
        why = implausible_address(address)
        if why:
            return chain, f"prev_api entry {len(chain)} is not a plausible pointer: {why}"
        if address in seen:
            return chain, f"prev_api chain loops back to entry {len(chain)}"
        if len(chain) >= MAX_PREV_API_DEPTH:
            return chain, f"prev_api chain longer than {MAX_PREV_API_DEPTH} entries"
        seen.add(address)
        h = header_at(address)
        chain.append((address, h.version.major, h.version.minor))
        address = h.prev_api
    return chain, None


def header_version(ctx):
    if getattr(ctx, "top", None) is None:
        raise Skip("no table")
    chain, problem = _walk(ctx.top)
    ctx.chain, ctx.chain_problem = chain, problem
    major, minor = chain[0][1:] if chain else (None, None)
    for depth, (addr, ma, mi) in enumerate(chain):
        if ma == 1:
            ctx.address, ctx.api = addr, table_at(addr)
            if depth == 0:
                return f"{ma}.{mi}"
            return (f"{major}.{minor}; the consumer uses the {ma}.{mi} table at prev_api "
                    f"depth {depth}")
    ctx.header_problem = f"major version {major} and no major-1 table in prev_api"
    raise Fail(f"header version {major}.{minor} and no major-1 table along prev_api"
               + (f" ({problem})" if problem else ""))


def header_prev_api(ctx):
    if not getattr(ctx, "chain", None):
        raise Skip("no table")
    if ctx.chain_problem:
        raise Fail(ctx.chain_problem)
    versions = ", ".join(f"{ma}.{mi}" for _, ma, mi in ctx.chain[1:])
    return f"ends after {len(ctx.chain) - 1} entries" + (f" ({versions})" if versions else "")


def header_required(ctx):
    if ctx.api is None:
        raise Skip(f"no major-1 table ({ctx.header_problem})")
    missing = [f for f in REQUIRED if not getattr(ctx.api, f)]
    if missing:
        raise Fail("NULL: " + ", ".join(missing))
    return "allocator, managed export, import and current_work_stream are set"


def header_view(ctx):
    if ctx.api is None:
        raise Skip("no major-1 table")
    if not ctx.api.dltensor_from_py_object_no_sync:
        raise Skip("dltensor_from_py_object_no_sync is NULL (optional: consumers use the "
                   "managed export)")
    return "dltensor_from_py_object_no_sync is set"


def find_consumer(ctx):
    """dlx's own consumer agrees: same table, or the same refusal."""
    import dlx

    try:
        cap = dlx.exchange_api(ctx.type)
    except TypeError as e:
        if ctx.api is None or any(not getattr(ctx.api, f) for f in REQUIRED):
            return f"dlx refuses it too: {e}"
        raise Fail(f"dlx refuses a table the checker accepts: {e}") from None
    if ctx.api is None:
        raise Fail("dlx accepts a table the checker cannot use")
    if cap is None:
        raise Fail("dlx finds no table for this type")
    if capsule_address(cap) != ctx.address:
        raise Fail(f"dlx uses the table at {capsule_address(cap):#x}, the checker "
                   f"{ctx.address:#x}")
    return "dlx.exchange_api uses the same table"


# ---- exports --------------------------------------------------------------------

def _compact(shape):
    out, acc = [], 1
    for s in reversed(shape):
        out.insert(0, acc)
        acc *= s
    return out


def describe_problems(t, view, version=(1, 3), flags=None, expect_device=None):
    """What is wrong with DLTensor `t` against the framework's view of the same tensor."""
    p = []
    ndim = t.ndim
    if ndim < 0:
        return [f"ndim {ndim}"]
    if ndim and not t.shape:
        return [f"shape is NULL with ndim {ndim}"]
    shape = [t.shape[i] for i in range(ndim)]
    if "shape" in view and shape != list(view["shape"]):
        p.append(f"shape {shape}, the framework says {list(view['shape'])}")
    numel = 1
    for s in shape:
        numel *= s
    if t.strides:
        strides = [t.strides[i] for i in range(ndim)]
    elif ndim and tuple(version) >= (1, 2):
        p.append(f"strides NULL with ndim {ndim} (required since DLPack 1.2)")
        strides = None
    else:
        strides = _compact(shape)
    if strides is not None and "strides" in view and numel > 0:
        theirs = list(view["strides"])
        if any(shape[d] > 1 and strides[d] != theirs[d] for d in range(min(ndim, len(theirs)))):
            p.append(f"strides {strides}, the framework says {theirs}")
    dtype = (t.dtype.code, t.dtype.bits, t.dtype.lanes)
    if view.get("dtype") and dtype != tuple(view["dtype"]):
        p.append(f"dtype {dtype}, the framework says {tuple(view['dtype'])}")
    device = (t.device.device_type, t.device.device_id)
    want = view.get("device") or expect_device
    if want and device != tuple(want):
        p.append(f"device {device}, the framework says {tuple(want)}")
    if numel > 0:
        if not t.data:
            p.append("data is NULL for a non-empty tensor")
        elif "ptr" in view and t.data + t.byte_offset != view["ptr"]:
            p.append(f"data + byte_offset = {t.data + t.byte_offset:#x}, the framework's "
                     f"element 0 is at {view['ptr']:#x}")
    if flags is not None:
        if flags & ~KNOWN_FLAGS:
            p.append(f"unknown flag bits {flags & ~KNOWN_FLAGS:#x}")
        if flags & IS_COPIED:
            p.append("IS_COPIED set: a no-sync export must share the tensor's memory")
        if flags & IS_SUBBYTE_TYPE_PADDED and t.dtype.bits >= 8:
            p.append("IS_SUBBYTE_TYPE_PADDED set on a dtype of 8 or more bits")
        if "readonly" in view and bool(flags & READ_ONLY) != bool(view["readonly"]):
            p.append("READ_ONLY flag " + ("set on a writable" if flags & READ_ONLY else
                                          "missing on a read-only") + " tensor")
    return p


def managed(api, obj):
    """The managed export of obj (a pointer); Fail when the function breaks its contract."""
    out = ctypes.POINTER(DLManagedTensorVersioned)()
    rc = api.managed_tensor_from_py_object_no_sync(obj, ctypes.byref(out))
    if rc != 0:
        raise Fail(f"managed export returned {rc} without an exception")
    if not out:
        raise Fail("managed export returned 0 and left out NULL")
    return out


def export_managed(ctx, obj, view=None):
    """Export obj through the managed function, check it against the framework's view,
    run the deleter once, and check the tensor got its reference back."""
    api = ctx.need("managed_tensor_from_py_object_no_sync")
    view = ctx.adapter.view(obj) if view is None else view
    before = sys.getrefcount(obj)
    out = managed(api, obj)
    m = out.contents
    version = (m.version.major, m.version.minor)
    problems = describe_problems(m.dl_tensor, view, version, m.flags)
    if version[0] != 1:
        problems.insert(0, f"managed tensor version {version[0]}.{version[1]}")
    if not m.deleter:
        problems.append("deleter is NULL (the export can never be released)")
    else:
        m.deleter(out)
        after = sys.getrefcount(obj)
        if after != before:
            problems.append(f"the tensor's refcount is {after} after the deleter, {before} "
                            "before the export")
    return problems


def export_view(ctx, obj, view=None):
    api = ctx.need("dltensor_from_py_object_no_sync")
    view = ctx.adapter.view(obj) if view is None else view
    t = DLTensor()
    before = sys.getrefcount(obj)
    rc = VIEW(api.dltensor_from_py_object_no_sync)(obj, ctypes.byref(t))
    if rc != 0:
        raise Fail(f"returned {rc} without an exception")
    problems = describe_problems(t, view)
    if sys.getrefcount(obj) != before:
        problems.append("a non-owning view changed the tensor's refcount")
    return problems


def _variant_check(kind, variant):
    export = export_managed if kind == "managed" else export_view

    def check(ctx):
        ctx.need("managed_tensor_from_py_object_no_sync" if kind == "managed"
                 else "dltensor_from_py_object_no_sync")
        obj = ctx.variants.get(variant)
        if obj is None or isinstance(obj, str):
            raise Skip(obj or "not made")
        try:
            problems = export(ctx, obj)
        except (Fail, Skip):
            raise
        except Exception as e:  # noqa: BLE001 - the table raised
            raise Fail(f"raised {_err(e)}") from None
        if problems:
            raise Fail("; ".join(problems))
        v = ctx.adapter.view(obj)
        return f"shape {v.get('shape')}, strides {v.get('strides', '?')}"
    return check


def _dtypes_check(kind):
    export = export_managed if kind == "managed" else export_view

    def check(ctx):
        ctx.need("managed_tensor_from_py_object_no_sync" if kind == "managed"
                 else "dltensor_from_py_object_no_sync")
        ok, refused, bad = [], [], []
        for name in ctx.adapter.dtypes():
            try:
                objs = [ctx.adapter.make((2, 3), name), ctx.adapter.make((), name)]
            except Exception:  # noqa: BLE001 - the framework cannot make it after all
                continue
            try:
                problems = list(dict.fromkeys(p for o in objs for p in export(ctx, o)))
            except (Fail, Skip):
                raise
            except Exception as e:  # noqa: BLE001
                if ctx.adapter.refuses(objs[0]):
                    refused.append(name)
                    continue
                problems = [f"raised {_err(e)} (the framework's own __dlpack__ exports it)"]
            (bad if problems else ok).append((name, problems))
        ctx.exportable = [n for n, _ in ok]
        if bad:
            raise Fail("; ".join(f"{n}: {', '.join(p)}" for n, p in bad))
        note = f"; refused, as by the framework's own __dlpack__: {', '.join(refused)}" \
            if refused else ""
        return f"{len(ok)} dtypes: {', '.join(n for n, _ in ok)}{note}"
    return check


def _lazy_views_check(kind):
    """Tensors whose values are not what their memory holds (torch's conjugate and negative
    views) must be refused (or copied): exported as their raw storage, a consumer computes
    on the unconjugated / unnegated values (torch's own __dlpack__ refuses them)."""
    def check(ctx):
        api = ctx.need("managed_tensor_from_py_object_no_sync" if kind == "managed"
                       else "dltensor_from_py_object_no_sync")
        try:
            views = ctx.adapter.lazy_views()
        except Exception as e:  # noqa: BLE001 - the framework cannot make them
            raise Skip(f"cannot make lazy views: {_err(e)}") from None
        if not views:
            raise Skip("the framework has no conjugate or negative views")
        raw, refused = [], []
        for name, obj in views.items():
            try:
                if kind == "managed":
                    out = managed(api, obj)
                    t = out.contents.dl_tensor
                    ptr = (t.data or 0) + t.byte_offset
                    if out.contents.deleter:
                        out.contents.deleter(out)
                else:
                    t = DLTensor()
                    rc = VIEW(api.dltensor_from_py_object_no_sync)(obj, ctypes.byref(t))
                    if rc != 0:
                        raise Fail(f"{name}: returned {rc} without an exception")
                    ptr = (t.data or 0) + t.byte_offset
            except (Fail, Skip):
                raise
            except Exception:  # noqa: BLE001 - refused: what the contract asks
                refused.append(name)
                continue
            if ptr == ctx.adapter.view(obj).get("ptr"):
                raw.append(name)
        if raw:
            raise Fail(f"exports {', '.join(raw)} view(s) as their raw storage: a consumer "
                       "reads values the tensor does not hold (refuse them, as the framework's "
                       "own __dlpack__ does)")
        return f"refused: {', '.join(refused)}" if refused else "copied"
    return check


def export_owner_alive(ctx):
    """Drop every reference to the tensor while its export lives: the memory must stay.
    1 MiB is above malloc's mmap threshold, so memory freed by mistake is unmapped and
    reading it crashes this child (reported by the parent as a FAIL)."""
    api = ctx.need("managed_tensor_from_py_object_no_sync")
    obj = ctx.adapter.make((512, 512), "float32")
    view = ctx.adapter.view(obj)
    if tuple(view.get("device", (1, 0))) != (1, 0):
        raise Skip("not host memory: cannot be read from here")
    out = managed(api, obj)
    t = out.contents.dl_tensor
    ptr, nbytes = t.data + t.byte_offset, 512 * 512 * 4
    snapshot = ctypes.string_at(ptr, nbytes)
    w = _weak(obj)
    del obj
    gc.collect()
    churn = [ctx.adapter.make((511, 513), "float32") for _ in range(4)]
    del churn
    gc.collect()
    again = ctypes.string_at(ptr, nbytes)
    out.contents.deleter(out)
    gc.collect()
    if again != snapshot:
        raise Fail("the export's memory changed after the tensor was dropped: the export "
                   "does not keep its owner alive")
    if w is not None and w() is not None:
        raise Fail("the tensor is still alive after the export's deleter ran (leak)")
    return "memory intact after the tensor was dropped; released by the deleter"


def _weak(obj):
    try:
        return weakref.ref(obj)
    except TypeError:
        return None


def _rss():
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return None


def _leak_rounds(one_round, what):
    """Run one_round() ROUNDS times; Fail when Python objects, traced memory or the
    resident size grow with the rounds."""
    for _ in range(20):  # warm caches and free lists first
        one_round()
    gc.collect()
    tracemalloc.start()
    objects, rss = len(gc.get_objects()), _rss()
    base, _ = tracemalloc.get_traced_memory()
    for _ in range(ROUNDS):
        one_round()
    gc.collect()
    traced, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    grew_objects = len(gc.get_objects()) - objects
    grew_rss = (_rss() - rss) if rss is not None else 0
    problems = []
    if grew_objects > ROUNDS // 4:
        problems.append(f"{grew_objects} more Python objects")
    if traced - base > 64 * ROUNDS:
        problems.append(f"{traced - base} more bytes traced by tracemalloc")
    if grew_rss > 8 << 20:
        problems.append(f"resident size grew by {grew_rss >> 20} MiB")
    if problems:
        raise Fail(f"after {ROUNDS} {what}: " + ", ".join(problems))
    return (f"{ROUNDS} {what}: {grew_objects:+d} objects, {traced - base:+d} traced bytes, "
            f"resident {grew_rss // 1024:+d} KiB")


def export_no_leak(ctx):
    api = ctx.need("managed_tensor_from_py_object_no_sync")

    def one():
        obj = ctx.adapter.make((64, 256), "float32")  # 64 KiB: a leaked owner shows
        out = managed(api, obj)
        out.contents.deleter(out)

    return _leak_rounds(one, "exports of a 64 KiB tensor")


# ---- imports --------------------------------------------------------------------

def _import(api, m_pointer):
    obj = ctypes.py_object()
    rc = api.managed_tensor_to_py_object_no_sync(m_pointer, ctypes.byref(obj))
    if rc != 0:
        raise Fail(f"returned {rc} without an exception")
    return take(obj)


def _imports_as(ctx, obj):
    """The import gives the checked type, or a base of it that is not `object` (a
    subclass carrying the table of its framework's tensor type)."""
    return isinstance(obj, ctx.type) or (type(obj) is not object
                                         and issubclass(ctx.type, type(obj)))


def import_round_trip(ctx):
    api = ctx.need("managed_tensor_from_py_object_no_sync", "managed_tensor_to_py_object_no_sync")
    obj = ctx.adapter.make((4, 6), "float32")
    mine = ctx.adapter.view(obj)
    before = sys.getrefcount(obj)
    r = _import(api, managed(api, obj))
    if not _imports_as(ctx, r):
        raise Fail(f"import returned a {type(r).__qualname__}, not a {ctx.type.__qualname__}")
    theirs = ctx.adapter.view(r)
    if "ptr" in mine and theirs.get("ptr") != mine["ptr"]:
        raise Fail("the imported tensor does not share the exported tensor's memory")
    if theirs.get("shape") != mine.get("shape"):
        raise Fail(f"shape {theirs.get('shape')} after the round trip, {mine.get('shape')} before")
    del r
    gc.collect()
    if sys.getrefcount(obj) != before:
        raise Fail("the export was not released when the imported tensor died")
    return "same memory, same shape; the export released when the import died"


def import_foreign(ctx):
    """A tensor the checker produced: shared, and its deleter run exactly once, when the
    imported object dies, not before."""
    api = ctx.need("managed_tensor_to_py_object_no_sync")
    cases = (("contiguous", Producer(shape=(2, 3))),
             ("strided with byte_offset", Producer(shape=(2, 2), strides=(3, 1),
                                                   byte_offset=4, nbytes=28)))
    for what, p in cases:
        r = _import(api, p.pointer())
        if not _imports_as(ctx, r):
            raise Fail(f"{what}: import returned a {type(r).__qualname__}")
        v = ctx.adapter.view(r)
        problems = describe_problems(p.m.dl_tensor, v)
        if p.deleted:
            problems.append(f"deleter ran {p.deleted} time(s) while the import was alive")
        del r
        gc.collect()
        if p.deleted != 1:
            problems.append(f"deleter ran {p.deleted} time(s) after the import died, not once")
        if problems:
            raise Fail(f"{what}: " + "; ".join(problems))
    return "shares the producer's memory; its deleter ran exactly once, at release"


def import_no_leak(ctx):
    api = ctx.need("managed_tensor_to_py_object_no_sync")
    counts = set()

    def one():
        p = Producer(shape=(128, 128))
        r = _import(api, p.pointer())
        del r
        counts.add(p.deleted)
        if p.deleted == 1:  # released: no late deleter call can reach it any more
            _keep.remove(p)

    reason = _leak_rounds(one, "imports")
    if counts != {1}:
        raise Fail(f"deleter call counts over the rounds: {sorted(counts)}")
    return reason


def _malformed_check(case):
    version, device, dtype, shape, strides = MALFORMED[case]

    def check(ctx):
        api = ctx.need("managed_tensor_to_py_object_no_sync")
        p = Producer(version=version, device=device, dtype=dtype, shape=shape,
                     strides=strides, nbytes=64)
        obj = ctypes.py_object()
        raised = None
        try:
            rc = api.managed_tensor_to_py_object_no_sync(p.pointer(), ctypes.byref(obj))
        except Exception as e:  # noqa: BLE001 - the expected path: -1 with an exception
            rc, raised = -1, e
        accepted = bool(obj)
        if accepted:
            got = take(obj)
            kind = type(got).__qualname__
            del got
        gc.collect()
        if accepted:
            raise Fail(f"accepted it (returned a {kind})" + (f" and raised {_err(raised)}"
                                                              if raised else ""))
        if rc == 0:
            raise Fail("returned 0 without a tensor")
        if raised is None:
            raise Fail(f"returned {rc} without setting an exception (cleared by the "
                       "producer's deleter? it may run Python code: keep the exception "
                       "across it)" if p.deleted else f"returned {rc} without setting an "
                       "exception")
        if p.deleted != 1:
            raise Fail(f"raised {_err(raised)}, but the deleter ran {p.deleted} times, not once")
        return f"{_err(raised)}; deleter ran once"
    return check


# ---- allocator ------------------------------------------------------------------

class _Errors:
    def __init__(self):
        self.calls = []
        self.fn = SETERROR(self._record)
        _keep.append(self)

    def _record(self, ctx, kind, message):
        self.calls.append((kind.decode(errors="replace") if kind else None,
                           message.decode(errors="replace") if message else None))


def _allocate(api, device, dtype, shape):
    """(rc, managed pointer or None, SetError calls, exception left set or None)."""
    ndim = len(shape)
    shape_arr = (ctypes.c_int64 * max(ndim, 1))(*shape)
    proto = DLTensor(None, DLDevice(*device), ndim, DLDataType(*dtype),
                     shape_arr if ndim else None, None, 0)
    out = ctypes.POINTER(DLManagedTensorVersioned)()
    errors = _Errors()
    left = None
    try:
        rc = api.managed_tensor_allocator(ctypes.byref(proto), ctypes.byref(out), None,
                                          errors.fn)
    except Exception as e:  # noqa: BLE001 - an exception left set besides SetError
        rc, left = -1, e
    return rc, (out if out else None), errors.calls, left


def allocator_shapes(ctx):
    api = ctx.need("managed_tensor_allocator", "managed_tensor_to_py_object_no_sync")
    names = getattr(ctx, "exportable", None) or ctx.adapter.dtypes()
    devices = [(1, 0)] + [d for d in ctx.adapter.devices() if d != (1, 0)]
    jobs = [((1, 0), n, s) for n in names for s in ALLOC_SHAPES]
    jobs += [(d, "float32", (2, 3)) for d in devices[1:]]
    bad = []
    for device, name, shape in jobs:
        dtype = fw.DTYPES[name]
        rc, out, errors, left = _allocate(api, device, dtype, shape)
        what = f"{name}{list(shape)} on {device}"
        if rc != 0 or out is None:
            bad.append(f"{what}: returned {rc}" + (f", SetError{errors[0]}" if errors else "")
                       + (f", left {_err(left)}" if left else ""))
            continue
        m = out.contents
        expect = {"shape": list(shape), "dtype": dtype, "device": device,
                  "strides": _compact(list(shape))}
        problems = describe_problems(m.dl_tensor, expect, (m.version.major, m.version.minor))
        if errors:
            problems.append(f"SetError called on success: {errors}")
        if m.version.major != 1:
            problems.append(f"version {m.version.major}.{m.version.minor}")
        try:
            r = _import(api, out)
        except Exception as e:  # noqa: BLE001
            problems.append(f"not importable: {_err(e)}")
        else:
            if not _imports_as(ctx, r):
                problems.append(f"imports as a {type(r).__qualname__}")
            v = ctx.adapter.view(r)
            if v.get("shape") is not None and list(v["shape"]) != list(shape):
                problems.append(f"imports with shape {v['shape']}")
            if v.get("dtype") is not None and tuple(v["dtype"]) != dtype:
                problems.append(f"imports with dtype {tuple(v['dtype'])}")
            del r
        if problems:
            bad.append(f"{what}: " + "; ".join(problems))
    if bad:
        raise Fail("; ".join(bad[:6]) + (f" (and {len(bad) - 6} more)" if len(bad) > 6 else ""))
    return (f"{len(jobs)} allocations, each imported back: shapes {list(ALLOC_SHAPES)} of "
            f"{', '.join(names)}" + (f"; (2, 3) on {devices[1:]}" if devices[1:] else ""))


def _bad_allocation_check(case):
    device, dtype, shape = BAD_ALLOCATIONS[case]

    def check(ctx):
        api = ctx.need("managed_tensor_allocator")
        rc, out, errors, left = _allocate(api, device, dtype, shape)
        if rc == 0 or out is not None:
            if out is not None and out.contents.deleter:
                out.contents.deleter(out)
            raise Fail(f"allocated it (returned {rc})")
        if len(errors) != 1:
            raise Fail(f"returned {rc} and called SetError {len(errors)} times, not once"
                       + (f" (left {_err(left)} set instead)" if left else ""))
        kind, message = errors[0]
        if not kind or not message:
            raise Fail(f"SetError called with kind={kind!r}, message={message!r}")
        note = ("" if kind in ALLOC_KINDS[case] else
                f" (note: {kind} for {case.replace('_', ' ')}, not "
                f"{' or '.join(ALLOC_KINDS[case])}: callers see a {kind})")
        return f"SetError({kind}, {message!r}){note}"
    return check


# ---- streams --------------------------------------------------------------------

def _ask(api, device):
    s = ctypes.c_void_p(0xD1C0)  # a sentinel: the function must write its answer
    rc = api.current_work_stream(device[0], device[1], ctypes.byref(s))
    if rc != 0:
        raise Fail(f"returned {rc} without an exception")
    return s.value or 0


def streams_cpu(ctx):
    api = ctx.need("current_work_stream")
    try:
        got = _ask(api, (1, 0))
    except Fail:
        raise
    except Exception as e:  # noqa: BLE001
        raise Fail(f"raised {_err(e)}") from None
    if got:
        raise Fail(f"answered {got:#x}; the CPU has no stream (NULL)")
    return "NULL"


def _device_check(device):
    def check(ctx):
        api = ctx.need("current_work_stream")
        got = _ask(api, device)
        want = ctx.adapter.current_stream(device)
        if want is not None and got != want:
            raise Fail(f"answered {got:#x}; the framework's current stream is {want:#x}")
        return f"{got:#x}" + (" (the framework's current stream)" if want is not None
                              else " (no stream API known to compare with)")
    return check


def _api_check(device):
    def check(ctx):
        api = ctx.need("current_work_stream")
        sel = ctx.adapter.stream(device)
        if sel is None:
            raise Skip(f"no stream API known for device {device}")
        before = _ask(api, device)
        with sel as expected:
            inside = _ask(api, device)
        after = _ask(api, device)
        if inside != expected:
            raise Fail(f"inside the stream context: {inside:#x}, the stream is {expected:#x}")
        if after != before:
            raise Fail(f"after the context: {after:#x}, before it {before:#x}")
        return f"follows the selected stream ({expected:#x}) and returns to {before:#x}"
    return check


def _threads_check(device):
    def check(ctx):
        api = ctx.need("current_work_stream")
        if ctx.adapter.stream(device) is None:
            raise Skip(f"no stream API known for device {device} to set per-thread streams")
        main = _ask(api, device)
        barrier = threading.Barrier(2, timeout=60)
        seen, errors = {}, []

        def worker(name):
            try:
                with ctx.adapter.stream(device) as mine:
                    barrier.wait()  # both threads inside their own context before asking
                    answers = {_ask(api, device) for _ in range(200)}
                    barrier.wait()
                seen[name] = (mine, answers)
            except Exception as e:  # noqa: BLE001
                errors.append(_err(e))

        threads = [threading.Thread(target=worker, args=(n,)) for n in "ab"]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise Fail("; ".join(errors))
        for name, (mine, answers) in seen.items():
            if answers != {mine}:
                raise Fail(f"thread {name} selected {mine:#x} but was answered "
                           f"{sorted(hex(a) for a in answers)}")
        if _ask(api, device) != main:
            raise Fail("the main thread's answer changed while other threads selected streams")
        return "two threads, each answered its own stream; the main thread unaffected"
    return check


# ---- the list -------------------------------------------------------------------

PREAMBLE = [("find.table", find_table), ("header.capsule", header_capsule),
            ("header.version", header_version), ("header.prev_api", header_prev_api),
            ("header.required", header_required), ("header.view", header_view)]


def checks(ctx):
    """[(name, fn)] after the preamble, in order; names depend only on the target."""
    out = [("find.consumer", find_consumer)]  # dlx's own consumer may crash on a bad table
    for kind in ("managed", "view"):
        out += [(f"export.{kind}.{v}", _variant_check(kind, v)) for v in fw.VARIANTS]
        out.append((f"export.{kind}.dtypes", _dtypes_check(kind)))
        out.append((f"export.{kind}.lazy_views", _lazy_views_check(kind)))
    out += [("export.owner_alive", export_owner_alive), ("export.no_leak", export_no_leak),
            ("import.round_trip", import_round_trip), ("import.foreign", import_foreign),
            ("import.no_leak", import_no_leak)]
    out += [(f"import.malformed.{c}", _malformed_check(c)) for c in MALFORMED]
    out.append(("allocator.shapes", allocator_shapes))
    out += [(f"allocator.set_error.{c}", _bad_allocation_check(c)) for c in BAD_ALLOCATIONS]
    out.append(("streams.cpu", streams_cpu))
    for d in ctx.adapter.devices():
        tag = f"{d[0]}:{d[1]}"
        out += [(f"streams.device[{tag}]", _device_check(d)),
                (f"streams.api[{tag}]", _api_check(d)),
                (f"streams.threads[{tag}]", _threads_check(d))]
    return out


def run_one(ctx, fn):
    """(status, reason) of one check; the table's own exceptions are FAILs."""
    try:
        return "PASS", fn(ctx)
    except Skip as e:
        return "SKIP", str(e)
    except Fail as e:
        return "FAIL", str(e)
    except Exception as e:  # noqa: BLE001 - whatever the table or framework raised
        return "FAIL", f"raised {_err(e)}"


def prepare_variants(ctx):
    ctx.variants = {}
    try:
        ctx.variants = ctx.adapter.variants("float32")
    except NotImplementedError as e:
        ctx.variants = {v: str(e) for v in fw.VARIANTS}

