"""How dlx libraries and kernels cross a process boundary: pickle.

Nothing travels as an address. A library loaded from a file travels as its path and the
sha256 of its content (computed on first pickling, from the file as it was loaded: a file
changed or deleted since it was loaded cannot be pickled); the receiving process refuses a
file whose content differs (ImportError naming it) and never loads other code. A library
made by dlx.build or dlx.load_inline travels as its sources (load_inline: the text itself)
and build options, with the digests of the user's own files the build read (sources, and
headers under the sources' folders or the include_dirs): the receiving process finds the
library in its cache or builds it there, under the cache's usual checks, after checking
those files are unchanged. A kernel travels as its library and its name.

The C types call reduce_library / reduce_kernel (src/python/libraries/library.c, `__reduce__`).
Unpickling the same library again in a process is a dictionary lookup (and one stat).
A pickle is input: one dlx did not write (a path to a FIFO, a device or a folder, a digest
that is no digest, a list of files that is no list) is refused with ImportError naming the
library and what is wrong, and only regular files are ever read."""
import hashlib
import os
import pickle
import re
import stat
import weakref

from . import _core

# shown path -> ["file", stat key at load, digest or None]
#            | ["inline", source, language, name, options, user files or None]
#            | ["build", sources, name, language, options, user files or None]
_origins = {}
# what this process unpickled: loader arguments -> (stat key or None, Library)
_received = {}

_SHA256 = re.compile("[0-9a-f]{64}")  # a digest as hexdigest() writes it
_ABSENT = "0" * 64  # a build record's digest of a path the compiler looked for, absent
_PICKLED_OPTIONS = ("cflags", "ldflags", "include_dirs", "libraries", "cuda_arch")


def _key(st):
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)


def _sha256_fd(fd):
    h = hashlib.sha256()
    while True:
        block = os.read(fd, 1 << 20)
        if not block:
            return h.hexdigest()
        h.update(block)


class _NotAFile(OSError):
    """A path that names something other than a regular file: never read (a FIFO waits for
    a writer forever, /dev/zero never ends)."""


_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


def _sha256(path):
    # O_NONBLOCK: opening a FIFO with no writer returns at once (it is refused below); it
    # changes nothing for a regular file. The type is checked on the descriptor read.
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = next((k for test, k in _KINDS if test(mode)), "not a regular file")
            raise _NotAFile(f"{kind}, not a regular file")
        return _sha256_fd(fd)
    finally:
        os.close(fd)


def _why(e):
    """An OSError in words for a refusal: its strerror, or its text."""
    return e.strerror or str(e)


def note_file(path, st):
    """dlx.load: `path` was loaded as it was when stat'ed as `st`."""
    origin = _origins.get(path)
    if origin is None or origin[0] != "file" or origin[1] != _key(st):
        _origins[path] = ["file", _key(st), None]


def note_inline(path, source, language, name, options):
    _origins[path] = ["inline", source, language, name,
                      tuple((k, options[k]) for k in _PICKLED_OPTIONS), None]


def note_build(path, sources, name, language, options):
    _origins[path] = ["build", sources, name, language,
                      tuple((k, options[k]) for k in _PICKLED_OPTIONS), None]


def _file_args(path, origin):
    """(path, digest) for a library loaded from a file: the file must still be the one
    loaded (same device, inode, mtime and size)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise pickle.PicklingError(
            f"cannot pickle the dlx library {path}: the file was deleted since it was loaded "
            "(a library pickles as its path and a digest of its content)") from None
    if origin is None:  # loaded without dlx.load (dlx._core.load): as it is now
        origin = _origins[path] = ["file", _key(st), None]
    if origin[1] != _key(st):
        raise pickle.PicklingError(
            f"cannot pickle the dlx library {path}: the file changed since it was loaded, so "
            "its content is no longer what this process runs (load it again, then pickle)")
    if origin[2] is None:
        origin[2] = _sha256(path)
    return path, origin[2]


# a library's type (each load makes one of its own) -> its file's stat key at that load
_as_loaded = weakref.WeakKeyDictionary()


def note_loaded(lib, st):
    """dlx.load, load_inline: `lib` was loaded from its file as it was when stat'ed as `st`."""
    if type(lib) is not _core.Library:
        _as_loaded[type(lib)] = _key(st)


def loaded_key(lib):
    """The identity (device, inode, mtime, size) of the file `lib` was loaded from, while
    the file is still that one; None when it changed or went since (what runs is then no
    longer what is on disk). Loaded without dlx.load: its path's record, else as it is now."""
    path = getattr(lib, "path", None)
    try:
        now = _key(os.stat(path))
    except (OSError, TypeError, ValueError):
        return None
    then = _as_loaded.get(type(lib))
    if then is None:
        origin = _origins.get(path)
        then = origin[1] if origin is not None and origin[0] == "file" else now
    return now if now == then else None


_loaded_digests = {}  # (path, loaded_key) -> sha256: a file hashed once while unchanged


def loaded_digest(lib):
    """The sha256 of the file `lib` was loaded from, or None where that file changed, went
    or cannot be read since (hashing a new file would name code this process does not run)."""
    key = loaded_key(lib)
    if key is None:
        return None
    got = _loaded_digests.get((lib.path, key))
    if got is None:
        try:
            got = _loaded_digests[(lib.path, key)] = _sha256(lib.path)
        except OSError:
            return None
    return got


_content = {}  # path -> (stat key, digest) of built libraries named by content (dlx.jax)


def content_digest(path):
    """The sha256 of the library file `path` as this process loaded it, computed once (the
    file is checked unchanged by its stat key, as for pickling): what a staged XLA call
    names its library by (dlx.jax). ValueError when the file changed or went since."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise ValueError(f"the library {path} cannot be read ({_why(e)}), so its content is "
                         "no longer known") from e
    origin = _origins.get(path)
    if origin is None:  # loaded without dlx.load (dlx._core.load): as it is now
        origin = _origins[path] = ["file", _key(st), None]
    if origin[0] == "file":
        if origin[1] != _key(st):
            raise ValueError(f"the library {path} changed on disk since it was loaded, so "
                             "its content is no longer what this process runs (load it again)")
        if origin[2] is None:
            origin[2] = _sha256(path)
        return origin[2]
    hit = _content.get(path)  # dlx.build / load_inline: the file in dlx's cache
    if hit is None:
        hit = _content[path] = (_key(st), _sha256(path))
    elif hit[0] != _key(st):
        raise ValueError(f"the library {path} changed on disk since it was loaded, so its "
                         "content is no longer what this process runs (build it again)")
    return hit[1]


def _record_of(path):
    """The build record of a library in dlx's cache (beside it, naming it), or None."""
    import glob

    folder, base = os.path.split(path)
    for rec_path in glob.glob(os.path.join(glob.escape(folder), "*.build")):
        rec = _core.read_build_record(rec_path)
        if rec is not None and rec["lib"] == base:
            return rec
    return None


def _under(path, folders):
    return any(os.path.commonpath([path, f]) == f for f in folders)


def _user_files(path, origin):
    """((path, digest), ...) of the user's own files the build read, from its record:
    the sources (dlx.build) and headers under the sources' folders or the include_dirs."""
    if origin[5] is None:
        rec = _record_of(path)
        if rec is None:
            raise pickle.PicklingError(f"cannot pickle the dlx library {path}: its build record "
                                       "is missing from the cache")
        options = dict(origin[4])
        folders = [os.path.abspath(d) for d in options.get("include_dirs", ())]
        if origin[0] == "build":
            folders += [os.path.dirname(s) for s in origin[1]]
        digests = rec.get("digests", {})
        origin[5] = tuple(sorted((p, d) for p, d in digests.items()
                                 if os.path.isabs(p) and _under(p, folders)
                                 and os.path.dirname(p) != os.path.dirname(path)))
    return origin[5]


def reduce_library(lib):
    return _reduce_path(lib.path)


def _reduce_path(path):
    origin = _origins.get(path)
    if origin is not None and origin[0] in ("inline", "build"):
        if origin[0] == "inline":
            args = (origin[1], origin[2], origin[3], origin[4], _user_files(path, origin))
            return _load_inline, args
        return _load_build, (origin[1], origin[2], origin[3], origin[4],
                             _user_files(path, origin))
    return _load_file, _file_args(path, origin)


def reduce_kernel(path, name):
    loader, args = _reduce_path(path)  # a kernel holds its library's path, not the library
    return _kernel, (loader, args, name)


def _kernel(loader, args, name):
    lib = loader(*args)
    try:
        return lib[name]  # lib[name]: also a kernel an attribute shadows
    except (KeyError, TypeError) as e:
        raise _malformed(lib.path, f"it has no kernel {name!r}") from e


def _refuse(path, why, lib=None):
    where = "" if lib is None or lib == path else f" {lib}:"
    return ImportError(f"dlx: refusing to unpickle a library:{where} {path} {why}; its content "
                       "is not what the pickling process ran", path=path)


def _malformed(lib, why):
    """A pickle dlx did not write: its arguments are not what dlx pickles."""
    return ImportError(f"dlx: refusing to unpickle the library {lib!r}: {why} (not a pickle "
                       "dlx wrote, or one altered since)",
                       path=lib if isinstance(lib, str) else None)


def _check_path(lib, path, what):
    if not (isinstance(path, str) and path and "\0" not in path):
        raise _malformed(lib, f"{what} {path!r} is not a path (a non-empty str, no NUL)")


def _check_digest(lib, digest, what):
    if not (isinstance(digest, str) and _SHA256.fullmatch(digest)):
        raise _malformed(lib, f"the digest of {what} is {digest!r}, not a sha256")


def _check_files(lib, files):
    """Each of the user's files must still hold the content the build read."""
    if not isinstance(files, (tuple, list)) or not all(
            isinstance(f, (tuple, list)) and len(f) == 2 for f in files):
        raise _malformed(lib, f"its list of files read is {files!r:.200}, not (path, digest) pairs")
    for path, digest in files:
        _check_path(lib, path, "a file read")
        if not os.path.isabs(path):
            raise _malformed(lib, f"a file read, {path!r}, is not an absolute path")
        _check_digest(lib, digest, path)
        if digest == _ABSENT:  # the build looked for it and did not find it: still absent
            if os.path.lexists(path):
                raise _refuse(path, "now exists, shadowing a header the build used", lib)
            continue
        try:
            got = _sha256(path)
        except OSError as e:
            raise _refuse(path, f"cannot be read ({_why(e)})", lib) from e
        if got != digest:
            raise _refuse(path, f"changed (sha256 {got[:16]}..., the build read "
                                f"{digest[:16]}...)", lib)


def _load_file(path, digest):
    _check_path(path, path, "its path")
    _check_digest(path, digest, "its file")
    hit = _received.get((path, digest))
    try:
        st = os.stat(path)
    except OSError as e:
        raise _refuse(path, f"cannot be read ({_why(e)})") from e
    if hit is not None and hit[0] == _key(st):
        return hit[1]
    try:
        got = _sha256(path)
    except OSError as e:
        raise _refuse(path, f"cannot be read ({_why(e)})") from e
    if got != digest:
        raise _refuse(path, f"has other content (sha256 {got[:16]}..., pickled "
                            f"{digest[:16]}...)")
    from . import load

    lib = load(path)
    after = os.stat(path)
    if _key(after) != _key(st):  # replaced while it was checked: not the bytes checked
        raise _refuse(path, "changed while it was being loaded")
    _received[(path, digest)] = (_key(after), lib)
    return lib


def _built(label, key, files, options, make):
    """A built library once per process: the user's files checked, then make() (which finds
    it in the cache or builds it). `label` names it in errors."""
    if not isinstance(options, (tuple, list)) or not all(
            isinstance(o, (tuple, list)) and len(o) == 2 and o[0] in _PICKLED_OPTIONS
            for o in options):
        raise _malformed(label, f"its build options are {options!r:.200}, not dlx.build's")
    try:
        hit = _received.get(key)
    except TypeError as e:  # a list where dlx pickles a tuple: unhashable
        raise _malformed(label, f"an argument is unhashable ({e})") from e
    if hit is not None:
        return hit[1]
    _check_files(label, files)
    try:
        lib = make()
    except (TypeError, ValueError) as e:  # arguments no pickle of a build that ran has
        raise _malformed(label, f"dlx.build refuses them ({type(e).__name__}: {e})") from e
    _received[key] = (None, lib)
    return lib


def _load_inline(source, language, name, options, files):
    from . import load_inline

    return _built(name if isinstance(name, str) else "inline source",
                  ("inline", source, language, name, options, files), files, options,
                  lambda: load_inline(source, language=language, name=name, **dict(options)))


def _load_build(sources, name, language, options, files):
    from . import build, load

    return _built(name if isinstance(name, str) else sources,
                  ("build", sources, name, language, options, files), files, options,
                  lambda: load(build(sources, name=name, language=language, **dict(options))))
