"""dlx: call native kernels with tensors from any Python framework, zero-copy, on the
caller's current stream. See README.md; the public names are in docs/interface."""
import os as _os

from . import _core
from ._core import Kernel, Library, exchange_api, register_provider

__all__ = ["include_dir", "load", "exchange_api", "register_provider", "Library", "Kernel"]

try:  # numpy cannot carry the table attribute itself: dlx provides one for it
    import numpy as _np  # noqa: F401
except ImportError:  # pragma: no cover - numpy is optional at import time
    pass
else:
    _core._install_numpy()


def include_dir():
    """The folder holding dlx/dlx.h and dlx/dlpack.h, for `cc -I`."""
    return _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "include")


def load(path):
    """Load a shared library of DLX_KERNEL kernels; returns a dlx.Library."""
    return _core.load(_os.path.abspath(_os.fspath(path)))
