"""What the table checker (dlx.check) knows about a framework: how to make its tensors,
its own view of a tensor (to compare an export with), its devices and its stream API.

numpy and torch are known; any other type is driven through a target file's hooks
(`make`, and optionally `DTYPES`, `describe`, `variants`, `DEVICES`, `stream`), or, with
none, through the framework's own `__dlpack__` and the table's import.
"""
import contextlib
import ctypes

from .._dlpack_ctypes import DLManagedTensorVersioned, capsule_address, capsule_name

# dtype names the checker speaks, with their DLPack (code, bits, lanes).
DTYPES = {
    "bool": (6, 8, 1), "int8": (0, 8, 1), "int16": (0, 16, 1), "int32": (0, 32, 1),
    "int64": (0, 64, 1), "uint8": (1, 8, 1), "uint16": (1, 16, 1), "uint32": (1, 32, 1),
    "uint64": (1, 64, 1), "float16": (2, 16, 1), "float32": (2, 32, 1),
    "float64": (2, 64, 1), "bfloat16": (4, 16, 1), "complex32": (5, 32, 1),
    "complex64": (5, 64, 1), "complex128": (5, 128, 1), "float8_e4m3fn": (10, 8, 1),
    "float8_e4m3fnuz": (11, 8, 1), "float8_e5m2": (12, 8, 1), "float8_e5m2fnuz": (13, 8, 1),
    "float8_e8m0fnu": (14, 8, 1),
}
KDL_CPU, KDL_CUDA, KDL_ROCM, KDL_EXTDEV = 1, 2, 10, 12
VARIANTS = ("contiguous", "strided", "0-d", "empty", "sliced", "readonly")


def dlpack_view(obj):
    """The framework's own `__dlpack__` export of obj, as a view dict (the capsule is left
    unconsumed, so its destructor runs the deleter). None when obj has no __dlpack__."""
    if not hasattr(obj, "__dlpack__"):
        return None
    try:
        cap = obj.__dlpack__(max_version=(1, 3))
    except TypeError:
        cap = obj.__dlpack__()
    name = capsule_name(cap)
    addr = capsule_address(cap, name)
    if name == b"dltensor_versioned":
        m = ctypes.cast(addr, ctypes.POINTER(DLManagedTensorVersioned)).contents
        t, readonly = m.dl_tensor, bool(m.flags & 1)
    else:  # a legacy DLManagedTensor starts with its DLTensor
        from .._dlpack_ctypes import DLTensor

        t, readonly = ctypes.cast(addr, ctypes.POINTER(DLTensor)).contents, None
    shape = [t.shape[i] for i in range(t.ndim)] if t.ndim else []
    view = {"shape": shape, "ptr": (t.data or 0) + t.byte_offset,
            "dtype": (t.dtype.code, t.dtype.bits, t.dtype.lanes),
            "device": (t.device.device_type, t.device.device_id)}
    if t.strides:
        view["strides"] = [t.strides[i] for i in range(t.ndim)]
    if readonly is not None:
        view["readonly"] = readonly
    del cap
    return view


class Framework:
    """Defaults for a framework the checker knows nothing about."""
    name = "unknown"

    def __init__(self, type_, devices=()):
        self.type = type_
        self.requested = list(devices)

    def dtypes(self):
        return ["float32"]

    def make(self, shape, dtype):
        raise NotImplementedError(f"the checker cannot make a {self.type.__name__}")

    def lazy_views(self):
        """name -> a tensor whose values are not what its memory holds (torch's conjugate
        and negative views: a bit on the tensor, resolved lazily); {} when the framework
        has none. An export must refuse them (or copy): raw storage gives wrong values."""
        return {}

    def variants(self, dtype):
        """name -> tensor, or name -> str (why that variant is skipped)."""
        out = {"contiguous": self.make((4, 6), dtype), "0-d": self.make((), dtype),
               "empty": self.make((0, 3), dtype)}
        base = out["contiguous"]
        for name, index in (("strided", (slice(None), slice(None, None, 2))),
                            ("sliced", slice(1, None))):
            try:
                out[name] = base[index]
            except Exception as e:  # noqa: BLE001 - any framework error means "cannot"
                out[name] = f"cannot make one ({type(e).__name__}: {e})"
        out["readonly"] = "the checker knows no way to make a read-only tensor here"
        return out

    def view(self, obj):
        """The framework's own idea of obj: shape, strides (elements), ptr (address of
        element 0), dtype (code, bits, lanes), device (type, id), readonly. Keys may be
        missing where unknown."""
        view = dlpack_view(obj)
        if view is None and hasattr(obj, "shape"):
            view = {"shape": list(obj.shape)}
        return view or {}

    def refuses(self, obj):
        """True when the framework's own `__dlpack__` refuses obj too (so a table that
        refuses it is within its rights)."""
        try:
            return dlpack_view(obj) is None
        except Exception:  # noqa: BLE001
            return True

    def devices(self):
        return list(self.requested)

    def stream(self, device):
        """A context manager selecting a new stream on `device` for the calling thread and
        yielding the value current_work_stream must answer inside; None when unknown."""
        return None

    def current_stream(self, device):
        """What current_work_stream must answer on this thread now; None when unknown."""
        return None


class Numpy(Framework):
    name = "numpy"

    def __init__(self, type_, devices=()):
        super().__init__(type_, devices)
        import numpy

        self.np = numpy

    def dtypes(self):
        names = []
        for name in DTYPES:
            try:
                if self.np.dtype(name).name == name:
                    names.append(name)
            except TypeError:
                pass
        return names

    def make(self, shape, dtype):
        n = 1
        for s in shape:
            n *= s
        return (self.np.arange(n) % 100).astype(dtype).reshape(shape)

    def variants(self, dtype):
        base = self.make((4, 6), dtype)
        ro = base.copy()
        ro.setflags(write=False)
        return {"contiguous": base, "strided": base[:, ::2].T, "0-d": self.make((), dtype),
                "empty": self.make((0, 3), dtype), "sliced": base[1:, 2:5], "readonly": ro}

    def view(self, a):
        item = a.dtype.itemsize
        strides = [s // item for s in a.strides] if all(s % item == 0 for s in a.strides) else None
        v = {"shape": list(a.shape), "ptr": a.ctypes.data, "dtype": DTYPES.get(a.dtype.name),
             "device": (KDL_CPU, 0), "readonly": not a.flags.writeable}
        if strides is not None:
            v["strides"] = strides
        return v


class Torch(Framework):
    name = "torch"

    def __init__(self, type_, devices=()):
        super().__init__(type_, devices)
        import torch

        self.torch = torch
        if any(d[0] == KDL_EXTDEV for d in self.requested) and not hasattr(torch, "npu"):
            with contextlib.suppress(ImportError):  # torch < 2.5 loads no device plugins
                import torch_npu  # noqa: F401

    def dtypes(self):
        return [n for n in DTYPES if isinstance(getattr(self.torch, n, None), self.torch.dtype)]

    def make(self, shape, dtype, device="cpu"):
        t = self.torch
        dt = getattr(t, dtype)
        n = 1
        for s in shape:
            n *= s
        try:
            x = (t.arange(n) % 100).to(dt)
        except (RuntimeError, TypeError):  # dtypes without arithmetic: zeros still work
            x = t.zeros(n, dtype=dt)
        return x.reshape(shape).to(device)

    def variants(self, dtype):
        base = self.make((4, 6), dtype)
        return {"contiguous": base, "strided": base.t(), "0-d": self.make((), dtype),
                "empty": self.make((0, 3), dtype), "sliced": base[1:, 2:5],
                "readonly": "torch tensors cannot be read-only"}

    def lazy_views(self):
        t = self.torch
        z = t.tensor([1 + 2j, 3 - 4j], dtype=t.complex64)
        out = {"conj": t.conj(z)}
        if hasattr(t, "_neg_view"):
            out["neg"] = t._neg_view(t.tensor([1.0, -2.0]))
        out["conj().imag"] = t.conj(z).imag  # public: a negative view of real dtype
        return {k: v for k, v in out.items()
                if getattr(v, "is_conj", lambda: False)() or getattr(v, "is_neg", lambda: False)()}

    def _device(self, dev):
        if dev.type == "cpu":
            return (KDL_CPU, 0)
        if dev.type == "cuda":
            return (KDL_ROCM if self.torch.version.hip else KDL_CUDA, dev.index or 0)
        if dev.type in ("privateuseone", "npu"):
            return (KDL_EXTDEV, dev.index or 0)
        return None

    def view(self, x):
        v = {"shape": list(x.shape), "strides": list(x.stride()),
             "dtype": DTYPES.get(str(x.dtype).replace("torch.", "")), "readonly": False}
        if x.numel():
            v["ptr"] = x.data_ptr()
        dev = self._device(x.device)
        if dev:
            v["device"] = dev
        return v

    def refuses(self, x):
        try:
            self.torch.utils.dlpack.to_dlpack(x)
            return False
        except Exception:  # noqa: BLE001
            return True

    def _api(self, device_type):
        t = self.torch
        if device_type in (KDL_CUDA, KDL_ROCM):
            return (t.cuda, "cuda_stream") if t.cuda.is_available() else (None, None)
        if device_type == KDL_EXTDEV and hasattr(t, "npu"):
            return (t.npu, "npu_stream") if t.npu.is_available() else (None, None)
        return None, None

    def devices(self):
        if self.requested:
            return list(self.requested)
        found = []
        for dtype in (KDL_ROCM if self.torch.version.hip else KDL_CUDA, KDL_EXTDEV):
            mod, _ = self._api(dtype)
            if mod is not None and mod.device_count() > 0:
                found.append((dtype, 0))
        return found

    def stream(self, device):
        mod, attr = self._api(device[0])
        if mod is None:
            return None

        @contextlib.contextmanager
        def select():
            s = mod.Stream(device=device[1])
            with mod.stream(s):
                yield getattr(s, attr)

        return select()

    def current_stream(self, device):
        mod, attr = self._api(device[0])
        return getattr(mod.current_stream(device[1]), attr) if mod is not None else None


class Hooks(Framework):
    """A target file's hooks over the generic defaults."""

    def __init__(self, type_, module, devices=()):
        super().__init__(type_, devices)
        self.module = module
        self.name = getattr(module, "__file__", "target file")

    def _hook(self, name):
        return getattr(self.module, name, None)

    def dtypes(self):
        return list(self._hook("DTYPES") or super().dtypes())

    def make(self, shape, dtype):
        return self.module.make(tuple(shape), dtype)

    def variants(self, dtype):
        hook = self._hook("variants")
        return dict(hook(dtype)) if hook else super().variants(dtype)

    def view(self, obj):
        hook = self._hook("describe")
        return dict(hook(obj)) if hook else super().view(obj)

    def devices(self):
        if self.requested:
            return list(self.requested)
        return [tuple(d) for d in (self._hook("DEVICES") or ())]

    def stream(self, device):
        hook = self._hook("stream")
        return hook(*device) if hook else None

    def current_stream(self, device):
        hook = self._hook("current_stream")
        return hook(*device) if hook else None


def for_type(type_, module=None, devices=()):
    """The adapter for tensors of `type_` (a target file's module, when given, decides)."""
    if module is not None and hasattr(module, "make"):
        return Hooks(type_, module, devices)
    qual = f"{type_.__module__}.{type_.__qualname__}"
    for prefix, cls in (("numpy.ndarray", Numpy), ("torch.Tensor", Torch)):
        if qual == prefix or any(f"{b.__module__}.{b.__qualname__}" == prefix
                                 for b in type_.__mro__):
            return cls(type_, devices)
    return Framework(type_, devices)
