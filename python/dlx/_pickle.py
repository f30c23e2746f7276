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

The C types call reduce_library / reduce_kernel (src/python/library.c, `__reduce__`).
Unpickling the same library again in a process is a dictionary lookup (and one stat)."""
import hashlib
import os
import pickle

from . import _core

# shown path -> ["file", stat key at load, digest or None]
#            | ["inline", source, language, name, options, user files or None]
#            | ["build", sources, name, language, options, user files or None]
_origins = {}
# what this process unpickled: loader arguments -> (stat key or None, Library)
_received = {}

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


def _sha256(path):
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return _sha256_fd(fd)
    finally:
        os.close(fd)


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
    return loader(*args)[name]  # lib[name]: also a kernel an attribute shadows


def _refuse(path, why):
    return ImportError(f"dlx: refusing to unpickle a library: {path} {why}; its content is not "
                       "what the pickling process ran", path=path)


def _check_files(files):
    """Each of the user's files must still hold the content the build read."""
    for path, digest in files:
        if digest == _ABSENT:  # the build looked for it and did not find it: still absent
            if os.path.lexists(path):
                raise _refuse(path, "now exists, shadowing a header the build used")
            continue
        try:
            got = _sha256(path)
        except OSError as e:
            raise _refuse(path, f"cannot be read ({e.strerror})") from e
        if got != digest:
            raise _refuse(path, f"changed (sha256 {got[:16]}..., the build read "
                                f"{digest[:16]}...)")


def _load_file(path, digest):
    hit = _received.get((path, digest))
    try:
        st = os.stat(path)
    except OSError as e:
        raise _refuse(path, f"cannot be read ({e.strerror})") from e
    if hit is not None and hit[0] == _key(st):
        return hit[1]
    got = _sha256(path)
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


def _built(key, files, make):
    """A built library once per process: the user's files checked, then make() (which finds
    it in the cache or builds it)."""
    hit = _received.get(key)
    if hit is not None:
        return hit[1]
    _check_files(files)
    lib = make()
    _received[key] = (None, lib)
    return lib


def _load_inline(source, language, name, options, files):
    from . import load_inline

    return _built(("inline", source, language, name, options, files), files,
                  lambda: load_inline(source, language=language, name=name, **dict(options)))


def _load_build(sources, name, language, options, files):
    from . import build, load

    return _built(("build", sources, name, language, options, files), files,
                  lambda: load(build(sources, name=name, language=language, **dict(options))))
