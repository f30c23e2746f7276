"""The ctypes mirrors of the DLPack structs live in dlx (dlx._dlpack_ctypes, shared with
the table checker); tests keep importing them from here."""
from dlx._dlpack_ctypes import *  # noqa: F401,F403
