"""dlx: call native kernels with tensors from any Python framework, zero-copy, on the
caller's current stream. User guide: docs/guide.md; the public names are in
docs/interface.md."""
import os as _os
import sys as _sys
from threading import local as _thread_local

from . import _core
from ._core import Kernel, Library, exchange_api, register_provider, register_stream_provider

__all__ = ["include_dir", "load", "exchange_api", "register_provider", "register_stream_provider",
           "stream", "Library", "Kernel", "build", "load_inline", "BuildError"]

try:  # numpy cannot carry the table attribute itself: dlx provides one for it
    import numpy as _np  # noqa: F401
except ImportError:  # pragma: no cover - numpy is optional at import time
    pass
else:
    _core._install_numpy()


def _torch_autosetup():
    import os

    if os.environ.get("DLX_DISABLE_TORCH_ADDON") == "1":
        return
    from . import torch as _dlx_torch

    _dlx_torch._autosetup()


# The first torch tensor that reaches a kernel sets torch up; importing dlx compiles nothing.
_core.register_lazy_setup("torch", "Tensor", _torch_autosetup)


def _jax_autosetup():
    import jax

    # A JAX without device backends (CPU only) has host arrays only: no device check each.
    try:
        from jax.extend.backend import backends

        device_backends = any(platform != "cpu" for platform in backends())
    except Exception:  # an older or newer JAX: check every array's device
        device_backends = True
    _core._install_jax(jax.Array, device_backends)


# JAX arrays: dlx's provider (read-only exports, results as jax.Array), installed by the
# first jax.Array that reaches a call; importing dlx never imports jax.
_core.register_lazy_setup("jax", "Array", _jax_autosetup)


def _stream_handle(s):
    """The integer handle of a stream given to dlx.stream: an int, `__cuda_stream__` (the
    CUDA stream protocol: (version, handle)), or a `cuda_stream` / `npu_stream` / `ptr`
    attribute (torch.cuda.Stream, torch.npu.Stream, cupy.cuda.Stream)."""
    if isinstance(s, int) and not isinstance(s, bool):
        h, what = s, "the handle"
    else:
        proto = getattr(type(s), "__cuda_stream__", None)
        if proto is not None:
            r = s.__cuda_stream__() if callable(proto) else s.__cuda_stream__
            if not (isinstance(r, tuple) and len(r) == 2):
                raise TypeError(f"dlx.stream: {type(s).__name__}.__cuda_stream__() returned "
                                f"{r!r}, not a (version, handle) tuple")
            h, what = r[1], "__cuda_stream__()[1]"
        else:
            for what in ("cuda_stream", "npu_stream", "ptr"):
                h = getattr(s, what, None)
                if h is not None:
                    break
            else:
                raise TypeError(f"dlx.stream: {type(s).__name__} is not a stream: expected an "
                                "int, an object with a cuda_stream, npu_stream or ptr attribute, "
                                "or one implementing __cuda_stream__")
        if not isinstance(h, int) or isinstance(h, bool):
            raise TypeError(f"dlx.stream: {type(s).__name__}'s {what} is "
                            f"{type(h).__name__}, not an int")
    if not 0 <= h < 1 << 64:
        raise ValueError(f"dlx.stream: {what} {h} is not a stream handle (0 <= handle < 2**64)")
    return h


_stream_entries = _thread_local()  # .stack: [(dlx.stream, handle)] entered on this thread


def _stream_stack():
    stack = getattr(_stream_entries, "stack", None)
    if stack is None:
        stack = _stream_entries.stack = []
    return stack


class stream:
    """`with dlx.stream(s):` every kernel call on this thread runs on stream `s`, and
    producers without an exchange table are exported for it (`__dlpack__(stream=...)`).
    `s`: an int, an object with `cuda_stream`, `npu_stream` or `ptr`, or one implementing
    `__cuda_stream__`; None changes nothing. Resolved once, on entering; nests; other
    threads do not see it."""

    __slots__ = ("_s",)

    def __init__(self, s):
        self._s = s

    def __enter__(self):
        if self._s is not None:
            h = _stream_handle(self._s)
            _core._stream_push(h)
            _stream_stack().append((self, h))
        return self

    def __exit__(self, *exc):
        # Leaving takes this entry off the thread's list wherever it is, and the latest one
        # left is in force: blocks left out of order (coroutines interleaving on one thread)
        # leave no stale override behind.
        if self._s is not None:
            stack = _stream_stack()
            for i in range(len(stack) - 1, -1, -1):
                if stack[i][0] is self:
                    del stack[i]
                    break
            else:
                raise RuntimeError(f"{self!r} left on a thread where it was not entered "
                                   "(the override belongs to the thread that entered it)")
            _core._stream_pop(stack[-1][1] if stack else None)
        return False

    def __repr__(self):
        return f"dlx.stream({self._s!r})"


def __getattr__(name):
    """`dlx.torch` after a plain `import dlx`: imported on first use, so that importing
    dlx never imports torch."""
    if name == "torch":
        import importlib

        return importlib.import_module(".torch", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _here(*parts):
    return _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), *parts)


def include_dir():
    """The folder holding dlx/dlx.h and dlx/dlpack.h, for `cc -I`."""
    return _here("include")


def cmake_dir():
    """The folder holding dlxConfig.cmake: put it on CMAKE_PREFIX_PATH (or pass it as dlx_DIR)
    for find_package(dlx CONFIG)."""
    return _here("share", "cmake", "dlx")


def pkgconfig_dir():
    """The folder holding dlx.pc: put it on PKG_CONFIG_PATH for `pkg-config --cflags dlx`."""
    return _here("share", "pkgconfig")


def cflags():
    """The compiler flags a kernel library needs (the same as `pkg-config --cflags dlx`)."""
    import shlex

    return shlex.join(["-I" + include_dir()])


_loaded = {}  # absolute path -> (st_dev, st_ino, st_mtime_ns, st_size) when first loaded


def _adopted(lib):
    """A library loaded again from the file a registered library came from (a second
    dlx.load, an unpickled copy): its kernels are the same torch operators."""
    ops = _sys.modules.get("dlx.torch_ops")
    if ops is not None:
        ops.adopt(lib)
    return lib


def load(path):
    """Load a shared library of DLX_KERNEL kernels; returns a dlx.Library.

    The dynamic loader hands back the library already mapped under a path, so a file
    rebuilt since (the edit-rebuild-reload loop) is loaded through a private copy."""
    path = _os.path.abspath(_os.fspath(path))
    if _build.in_kernels_dir(path):
        # built by dlx.build: checked as the addon is, and loaded through that descriptor
        st = _os.stat(path)
        lib = _core.load_cached(path)
        _pickle.note_loaded(lib, st)
        if path not in _pickle._origins:  # one dlx.build made here pickles by its sources
            _pickle.note_file(path, st)
        return _adopted(lib)
    st = _os.stat(path)
    key = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)
    first = _loaded.setdefault(path, key)
    if first == key:
        lib = _core.load(path)
        _pickle.note_loaded(lib, st)
        _pickle.note_file(path, st)  # pickle.dumps(lib): by path and digest (dlx/_pickle.py)
        return _adopted(lib)
    import shutil
    import tempfile

    copy = _os.path.join(tempfile.mkdtemp(prefix="dlx-reload-"), _os.path.basename(path))
    shutil.copy2(path, copy)
    lib = _core.load(copy)
    st = _os.stat(copy)
    _pickle.note_loaded(lib, st)
    _pickle.note_file(copy, st)
    return lib


from . import _build, _pickle  # noqa: E402  (needs include_dir above)
from ._build import BuildError, build, load_inline  # noqa: E402
