"""dlx.build and dlx.load_inline: kernel libraries compiled from C, C++ and CUDA sources into
dlx's cache, checked and loaded as the torch addon is. User guide: docs/guide.md ("Building
kernels from source").

The cache key, compiler choice, command lines and CUDA architecture are decided in C
(src/core/toolchain/compile/dlx_build_plan.c); the build itself runs there too
(dlx_kernel_build.c). This module gathers what only Python knows (the visible GPU) and
raises BuildError."""
import os
import shlex
import sys

from . import _core, _pickle, include_dir

__all__ = ["BuildError", "build", "load_inline"]


class BuildError(RuntimeError):
    """A build failed. The message holds the command and the compiler's first errors;
    .log holds its whole output (may be empty when no compiler ran); .command the
    command that failed (or None)."""

    def __init__(self, message, log="", command=None):
        super().__init__(message)
        self.log = log
        self.command = command


def _words(value, what):
    """A str is split like a shell would; any other iterable gives its str items (or
    paths). A NUL byte would cut the word the compiler sees (the key holds it whole)."""
    if isinstance(value, str):
        items = tuple(shlex.split(value))
    elif isinstance(value, (bytes, bytearray)):
        raise TypeError(f"{what} must be a str or a sequence of str, not "
                        f"{type(value).__name__}")
    else:
        try:
            items = tuple(value)
        except TypeError:
            raise TypeError(f"{what} must be a str or a sequence of str, not "
                            f"{type(value).__name__}") from None
    out = []
    for i, item in enumerate(items):
        word = os.fspath(item) if isinstance(item, os.PathLike) else item
        if not isinstance(word, str):
            raise TypeError(f"{what}[{i}] must be a str or a path, not "
                            f"{type(item).__name__}: {item!r}")
        if "\0" in word:
            raise ValueError(f"{what}[{i}] holds a NUL byte: {word!r}")
        out.append(word)
    return tuple(out)


_arch = None  # (major*10+minor, who answered) once asked


def _visible_arch():
    """The visible GPU's compute capability: torch's answer when torch is already
    imported (importing it here would cost a second), else the CUDA driver's; 0 with
    the reason when neither can say."""
    global _arch
    if _arch is not None:
        return _arch
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            if torch.cuda.is_available():
                major, minor = torch.cuda.get_device_capability()
                _arch = (major * 10 + minor, "torch.cuda")
                return _arch
        except Exception:  # a torch without working CUDA: ask the driver
            pass
    import ctypes

    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        _arch = (0, "no CUDA driver (libcuda.so.1)")
        return _arch
    dev, major, minor = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    if (cuda.cuInit(0) != 0 or cuda.cuDeviceGet(ctypes.byref(dev), 0) != 0 or
            cuda.cuDeviceGetAttribute(ctypes.byref(major), 75, dev) != 0 or  # CC major
            cuda.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev) != 0):  # CC minor
        _arch = (0, "the CUDA driver sees no GPU")
    else:
        _arch = (major.value * 10 + minor.value, "the CUDA driver")
    return _arch


def _needs_cuda(sources, language):
    if language is not None:
        return str(language).lower() in ("cuda", "cu")
    return any(s.endswith(".cu") for s in sources)


def _build(sources, inline, name, language, cflags, ldflags, include_dirs, libraries,
           cuda_arch, verbose):
    """(path, descriptor open on the checked library, built)"""
    if language is not None and not isinstance(language, str):
        raise TypeError(f"language must be a str, not {type(language).__name__}")
    if cuda_arch is not None and not isinstance(cuda_arch, (str, int)):
        raise TypeError(f"cuda_arch must be a str or an int, not {type(cuda_arch).__name__}")
    visible, visible_from = 0, None
    if cuda_arch is None and _needs_cuda(sources, language):
        visible, visible_from = _visible_arch()
    include_dirs = tuple(os.path.abspath(d) for d in _words(include_dirs, "include_dirs"))
    folder = _core.cache_dir()
    r = _core.kernel_build(folder, name, sources, inline, language, include_dirs,
                           _words(cflags, "cflags"), _words(ldflags, "ldflags"),
                           _words(libraries, "libraries"),
                           None if cuda_arch is None else str(cuda_arch), visible, visible_from,
                           include_dir(), bool(verbose))
    if r[0] == "ok":
        return r[1], r[2], r[3]
    _, why, command, log = r
    if isinstance(log, bytes):
        log = log.decode("utf-8", "replace")
    message = f"building {name} failed: {why}"
    if command:
        message += f"\n  command: {command}"
    if log:
        message += "\n" + _core.first_errors(log, 8).rstrip("\n")
        message += "\n  (the whole compiler output is in this error's .log)"
    raise BuildError(message, log or "", command)


def _sources(sources):
    if isinstance(sources, (str, os.PathLike)):
        sources = [sources]
    out = []
    for s in _words(sources, "sources"):
        path = os.path.abspath(s)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"dlx.build: no source file {path}")
        out.append(path)
    if not out:
        raise ValueError("dlx.build: no sources given")
    return tuple(out)


def _default_name(path):
    stem = os.path.splitext(os.path.basename(path))[0]
    safe = "".join(c if c.isalnum() or c in "_-." else "_" for c in stem).lstrip(".-")
    return safe[:64] or "kernels"


def build(sources, *, name=None, language=None, cflags=(), ldflags=(), include_dirs=(),
          libraries=(), cuda_arch=None, verbose=False):
    """Compile C (.c), C++ (.cc .cpp .cxx) or CUDA (.cu) sources into a kernel library in
    dlx's cache and return its path. Unchanged sources, headers, compilers and flags
    load from the cache without running a compiler."""
    srcs = _sources(sources)
    name = name or _default_name(srcs[0])
    path, fd, _ = _build(srcs, None, name, language, cflags, ldflags, include_dirs, libraries,
                         cuda_arch, verbose)
    os.close(fd)
    _pickle.note_build(path, srcs, name, language, _options(cflags, ldflags, include_dirs,
                                                           libraries, cuda_arch))
    return path


def _options(cflags, ldflags, include_dirs, libraries, cuda_arch):
    """The build options as they travel with a pickled library (dlx/_pickle.py)."""
    return {"cflags": _words(cflags, "cflags"), "ldflags": _words(ldflags, "ldflags"),
            "include_dirs": tuple(os.path.abspath(d) for d in _words(include_dirs, "include_dirs")),
            "libraries": _words(libraries, "libraries"), "cuda_arch": cuda_arch}


_libraries = {}  # (path, st_dev, st_ino) -> Library: a warm load_inline is a lookup


def _load_built(path, fd):
    st = os.fstat(fd)
    key = (path, st.st_dev, st.st_ino)
    lib = _libraries.get(key)
    if lib is not None:
        os.close(fd)
        return lib
    # Threads loading the same library at once all get the first one kept (setdefault is
    # one step, with or without a GIL); the others' loads are dropped (the same handle).
    lib = _core.load_fd(fd, path)
    _pickle.note_loaded(lib, st)
    return _libraries.setdefault(key, lib)


_BUILD_OPTIONS = {"cflags": (), "ldflags": (), "include_dirs": (), "libraries": (),
                  "cuda_arch": None, "verbose": False}


def load_inline(source, *, language="c", name=None, **build_options):
    """dlx.load(dlx.build(...)) for source text: the text is kept in the cache, compiled
    once, and the library loaded through the descriptor its checks were made on."""
    if not isinstance(source, str):
        raise TypeError(f"load_inline: source must be a str, not {type(source).__name__}")
    unknown = sorted(set(build_options) - set(_BUILD_OPTIONS))
    if unknown:
        raise TypeError(f"load_inline() got unexpected keyword argument(s) {', '.join(unknown)}; "
                        f"it takes dlx.build's: {', '.join(_BUILD_OPTIONS)}")
    options = dict(_BUILD_OPTIONS, **build_options)
    name, language = name or "inline", language or "c"
    path, fd, _ = _build((), source.encode(), name, language, **options)
    lib = _load_built(path, fd)
    if path not in _pickle._origins:
        del options["verbose"]
        _pickle.note_inline(path, source, language, name, _options(**options))
    return lib


def kernels_dir():
    """The cache folder holding built libraries and their build records."""
    return os.path.join(_core.cache_dir(), "kernels")


def in_kernels_dir(path):
    """True for an absolute path to a file directly in kernels_dir() (False when there is
    no cache folder at all)."""
    try:
        return os.path.dirname(path) == kernels_dir()
    except OSError:  # no DLX_CACHE_DIR, XDG_CACHE_HOME or HOME: nothing was built
        return False
