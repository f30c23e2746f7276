"""dlx.torch: give torch tensors an exchange table dlx can use, for the backend this
machine has.

Facts are gathered here, at the edge; the decisions (backend, addon identity and file
name, cache trust, locking, compiling) are made in C in src/core and reached through
dlx._core. User guide: docs/torch.md.
"""
import collections
import importlib.util
import os
import shlex
import sys
import sysconfig
import threading

from . import _core, include_dir

Record = collections.namedtuple("Record", "source backend path identity")
Record.__doc__ = """What install() put in force: source is 'native', 'native+stream' or 'addon';
path and identity describe the addon library (None otherwise)."""

ADDON_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "addon")
ADDON_SOURCE = os.path.join(ADDON_DIR, "dlx_torch_addon.cc")   # the exchange table
ADDON_OPS_SOURCE = os.path.join(ADDON_DIR, "dlx_torch_ops.cc")  # dlx.torch.register's operators
# The headers they include from beside them: their bytes count in the identity as the
# sources' do (dlx_torch_addon.h: what the two share; dlx_invoke.h: dlx's invoke api).
ADDON_SHARED_HEADER = os.path.join(ADDON_DIR, "dlx_torch_addon.h")
ADDON_HEADER = os.path.join(ADDON_DIR, "dlx_invoke.h")

_lock = threading.RLock()


def _reset_lock_in_child():
    """A fork while another thread is inside install() (building the addon) would leave the
    child a lock no thread of it will release: the child gets a fresh one, and installs for
    itself (the build lock it then waits on is the parent's to release; src/core/dlx_fork.h
    keeps the child from holding that one)."""
    global _lock
    _lock = threading.RLock()


os.register_at_fork(after_in_child=_reset_lock_in_child)
_record = None
probe_errors = {}  # probe -> repr(exception); a probe that raised counts as "not available"


def _torch():
    import torch

    return torch


def _probe(name, fn):
    try:
        return bool(fn())
    except Exception as e:  # any failure of a probe means "not available"
        probe_errors[name] = f"{type(e).__name__}: {e}"
        return False


def facts(torch=None):
    """The facts backend selection decides on, read from the installed torch."""
    torch = torch or _torch()
    version = getattr(torch, "version", None)
    has_npu = hasattr(torch, "npu")
    return {
        "platform": sys.platform,
        "cuda_available": _probe("torch.cuda.is_available()", lambda: torch.cuda.is_available()),
        "version_cuda_set": getattr(version, "cuda", None) is not None,
        "version_hip_set": getattr(version, "hip", None) is not None,
        "npu_namespace": has_npu,
        "npu_available": has_npu and _probe("torch.npu.is_available()",
                                            lambda: torch.npu.is_available()),
    }


def selection(torch=None):
    """(backend, reason) for the installed torch; DLX_BACKEND forces a choice."""
    f = facts(torch)
    return _core.select_backend(f["platform"], f["cuda_available"], f["version_cuda_set"],
                                f["version_hip_set"], f["npu_namespace"], f["npu_available"],
                                os.environ.get("DLX_BACKEND") or None)


def backend():
    """'cpu', 'cuda', 'rocm' or 'torch_npu', as selected for the installed torch."""
    return selection()[0]


def _torch_npu_dirs():
    spec = importlib.util.find_spec("torch_npu")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("backend torch_npu: the torch_npu package is not installed")
    root = list(spec.submodule_search_locations)[0]
    return os.path.join(root, "include"), os.path.join(root, "lib")


class BuildSpec(collections.namedtuple(
        "BuildSpec", "backend cxx includes defines lib_dirs libs cxxflags ldflags")):
    """Everything the compiler is given, except the output path."""

    @property
    def flags(self):
        """The part of the command that shapes the binary: it goes into the identity."""
        return shlex.join([self.cxx, *self.includes, *self.defines, *self.lib_dirs, *self.libs,
                           self.cxxflags or "", self.ldflags or ""])


def build_spec(backend, torch=None):
    torch = torch or _torch()
    root = os.path.dirname(torch.__file__)
    includes = [include_dir(), sysconfig.get_paths()["include"],
                os.path.join(root, "include"),
                os.path.join(root, "include", "torch", "csrc", "api", "include"),
                "/usr/include/torch/csrc/api/include"]  # Debian's libtorch-dev layout
    lib_dirs = [os.path.join(root, "lib")]
    libs = ["c10", "torch_cpu", "torch_python"]
    defines = [f"_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}"]
    if backend == "cuda":
        defines.append("BUILD_WITH_CUDA")
        libs += ["c10_cuda", "torch_cuda"]
        cuda_home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
        includes.append(os.path.join(cuda_home, "include"))
    elif backend == "rocm":
        defines += ["BUILD_WITH_ROCM", "USE_ROCM", "__HIP_PLATFORM_AMD__"]
        libs += ["c10_hip", "torch_hip"]
        rocm_home = os.environ.get("ROCM_HOME", "/opt/rocm")
        includes.append(os.path.join(rocm_home, "include"))
    elif backend == "torch_npu":
        npu_inc, npu_lib = _torch_npu_dirs()
        defines.append("BUILD_WITH_TORCH_NPU")
        includes.append(npu_inc)
        lib_dirs.append(npu_lib)
        libs.append("torch_npu")
    return BuildSpec(backend, os.environ.get("CXX") or "c++",
                     [d for d in includes if os.path.isdir(d)], defines,
                     [d for d in lib_dirs if os.path.isdir(d)], libs,
                     os.environ.get("DLX_CXXFLAGS"), os.environ.get("DLX_LDFLAGS"))


def identity(spec, torch=None):
    """(identity, file name) of the addon `spec` builds for this interpreter and torch."""
    torch = torch or _torch()
    source = b""
    for path in (ADDON_SOURCE, ADDON_OPS_SOURCE, ADDON_SHARED_HEADER, ADDON_HEADER):
        with open(path, "rb") as f:
            source += f.read()
    return _core.addon_identity(torch.__version__, bool(torch._C._GLIBCXX_USE_CXX11_ABI),
                                spec.backend, sysconfig.get_config_var("SOABI") or "unknown",
                                source, spec.flags)


def cache_dir():
    return _core.cache_dir()


def ensure_addon(backend, output_dir=None, torch=None):
    """Load the addon for `backend` from the cache (or output_dir), building it first
    when it is missing, untrusted, corrupt or for another identity.
    Returns (path, identity, table capsule)."""
    spec = build_spec(backend, torch)
    ident, name = identity(spec, torch)
    folder = output_dir or cache_dir()
    # Created 0700 when missing; refused (PermissionError naming the folder) when it,
    # or a folder above it, could be written by another user.
    _core.ensure_dir(folder)
    path = os.path.join(folder, name)
    bad_inode = 0
    try:
        # checked and loaded through one descriptor: what loads is what was checked
        return path, ident, _core.load_addon(path, ident)
    except FileNotFoundError:
        pass
    except ImportError:  # untrusted, truncated, corrupt or foreign: rebuild that very file
        bad_inode = _core.file_inode(path)
    defines = spec.defines + [f'DLX_ADDON_IDENTITY="{ident}"']
    _core.build_addon(path, spec.cxx, (ADDON_SOURCE, ADDON_OPS_SOURCE), tuple(spec.includes),
                      tuple(defines), tuple(spec.lib_dirs), tuple(spec.libs), spec.cxxflags,
                      spec.ldflags, bad_inode)
    return path, ident, _core.load_addon(path, ident)


def cached_addon(backend, torch=None):
    """(path, identity, table capsule) of the addon for `backend` when the cache already
    holds it for this exact torch and dlx (the identity names the file), else None. Never
    compiles and never creates the cache folder: install()'s default asks this on the first
    torch call, where a compiler run would be a minute's wait. A file that is missing,
    untrusted, corrupt or of another identity, or a cache folder dlx refuses, is None."""
    spec = build_spec(backend, torch)
    ident, name = identity(spec, torch)
    path = os.path.join(cache_dir(), name)
    if not os.path.isfile(path):  # the usual miss: one stat, nothing opened
        return None
    try:
        return path, ident, _core.load_addon(path, ident)
    except (ImportError, OSError):  # ensure_addon (build-addon) would rebuild or refuse it
        return None


def installed():
    """The Record of the table in force, or None before install()."""
    return _record


TABLES = ("native", "addon", "auto")
Choice = collections.namedtuple("Choice", "prefer origin had_table")
Choice.__doc__ = """How install() decided: the preference ('native', 'addon' or 'auto'), what
said so (preference()'s origin) and whether torch.Tensor already had a table (False: the
addon, whatever the preference). 'auto' took the addon when the cache held it for this
torch, else torch's own table: Record.source says which."""
_choice = None


def preference(prefer=None):
    """(table, origin): the table install() prefers where torch ships its own, 'native',
    'addon' or 'auto' (the default: the addon when it is in the cache already, else torch's
    own), and what said so ("prefer='addon'", 'DLX_TORCH_TABLE=addon' or 'default').
    prefer overrides the environment; an unknown value raises ValueError naming its origin."""
    if prefer is not None:
        if not isinstance(prefer, str):
            raise TypeError(f"dlx.torch.install(prefer=...): expected a str, got "
                            f"{type(prefer).__name__}")
        if prefer not in TABLES:
            raise ValueError(f"dlx.torch.install(prefer={prefer!r}): expected one of "
                             f"{', '.join(map(repr, TABLES))} or None")
        return prefer, f"prefer={prefer!r}"
    env = os.environ.get("DLX_TORCH_TABLE")
    if not env:  # unset or empty: the default
        return "auto", "default"
    if env not in TABLES:
        raise ValueError(f"DLX_TORCH_TABLE={env!r}: expected one of {', '.join(TABLES)} "
                         "(unset means auto)")
    return env, f"DLX_TORCH_TABLE={env}"


def choice():
    """The Choice install() made, or None before install()."""
    return _choice


def install(prefer=None):
    """Make torch.Tensor.__dlpack_c_exchange_api__ usable for the selected backend and
    return a Record. With DLX_DISABLE_TORCH_ADDON=1 nothing changes and None is returned.

    Where torch ships its own table (torch >= 2.10), prefer ('native', 'addon' or 'auto';
    None: DLX_TORCH_TABLE, else 'auto') says which one goes in force: torch's, or dlx's
    addon, compiled against it, which converts a tensor in far fewer instructions. 'auto'
    takes the addon when the cache holds it already (`python -m dlx build-addon` builds it
    ahead), else torch's own table: it never compiles. A torch without a table always gets
    the addon (built on the first call when missing, said on stderr). install() decides once per process: a later call returns
    the Record in force, and raises RuntimeError when its explicit prefer asks for the
    other table (the first torch tensor reaching a kernel also decides: call install(prefer)
    or set DLX_TORCH_TABLE before that)."""
    global _record, _choice
    if prefer is not None:
        preference(prefer)  # a bad argument is an error in any state
    with _lock:
        if _record is not None:
            _refuse_other_table(prefer)
            return _record
        if os.environ.get("DLX_DISABLE_TORCH_ADDON") == "1":
            return None
        pref, origin = preference(prefer)
        torch = _torch()
        name, _ = selection(torch)
        _core.set_active_backend(name)
        native = getattr(torch.Tensor, "__dlpack_c_exchange_api__", None)
        cached = None
        if (native is not None and pref == "auto" and name != "torch_npu"
                and _table_is_torchs_own(torch)):
            # with torch_npu the native table keeps its stream overlay unless asked; a
            # table someone else put on torch.Tensor is theirs, kept as 'native' was
            cached = cached_addon(name, torch)
        if cached is not None:
            path, ident, capsule = cached
            torch.Tensor.__dlpack_c_exchange_api__ = capsule
            _record = Record("addon", name, path, ident)
        elif native is not None and pref != "addon":
            if name == "torch_npu":
                # Native conversions, NPU stream from the runtime provider.
                torch.Tensor.__dlpack_c_exchange_api__ = _core.stream_overlay(native)
                _record = Record("native+stream", name, None, None)
            else:
                _record = Record("native", name, None, None)
        else:
            # No table (an older torch), or the addon asked for: it replaces the native
            # table (with torch_npu, the addon built for it also answers NPU streams).
            path, ident, capsule = ensure_addon(name, torch=torch)
            torch.Tensor.__dlpack_c_exchange_api__ = capsule
            _record = Record("addon", name, path, ident)
        _choice = Choice(pref, origin, native is not None)
        return _record


def _refuse_other_table(prefer):
    """A second install() that explicitly asks for the table not in force: an error, not a
    silent no (the table is chosen once; swapping it under live calls is not supported)."""
    if prefer is None:
        return
    if prefer == "auto":  # whichever auto chose, or was chosen: not a conflict
        return
    wants_addon = prefer == "addon" or not _choice.had_table  # without a native table: the addon
    if wants_addon != (_record.source == "addon"):
        raise RuntimeError(f"dlx.torch.install(prefer={prefer!r}): the {_record.source} table "
                           f"is already in force ({_choice.origin}); the table is chosen once per "
                           "process: pass prefer to the first install(), or set "
                           "DLX_TORCH_TABLE before the first torch tensor reaches a kernel")


def _table_is_torchs_own(torch):
    """True when torch.Tensor has no table or the one torch shipped; False when someone
    else put one there (that one is theirs: the autosetup leaves it alone)."""
    cap = getattr(torch.Tensor, "__dlpack_c_exchange_api__", None)
    if cap is None:
        return True
    native = getattr(torch._C, "_dlpack_exchange_api", None)
    if native is None:
        return False
    import ctypes

    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    try:
        return get(cap, b"dlpack_exchange_api") == get(native(), b"dlpack_exchange_api")
    except ValueError:  # not an exchange-table capsule: not torch's
        return False


def _autosetup():
    """Run by dlx._core the first time a torch tensor reaches a kernel call (before its
    table is read: torch's own native table gets the NPU stream overlay with torch_npu, or
    gives way to the addon with DLX_TORCH_TABLE=addon; install() reads the variable)."""
    import warnings

    try:
        if _table_is_torchs_own(_torch()):
            install()
    except Exception as e:  # the call still works through __dlpack__
        warnings.warn(f"dlx: torch exchange table not installed ({type(e).__name__}: {e}); "
                      "torch tensors go through __dlpack__", RuntimeWarning, stacklevel=2)


def register(lib, namespace):
    """Register each declared kernel of `lib` as torch.ops.<namespace>.<name> (schema, fake
    implementation, device implementations), so that `lib.NAME` works inside torch.compile
    and torch.export; returns a Registration (.ops, .skipped). Needs torch 2.5 or newer.
    See dlx.torch_ops and docs/torch.md."""
    from .torch_ops import register as _register

    return _register(lib, namespace, _addon_for_operators, _build_addon_for_operators)


ADDON_TABLE_ORIGIN = "dlx.torch.register built the addon for its operators"


def _build_addon_for_operators():
    """The addon built (or found) for register's operators, before register takes its lock:
    the first build takes a minute. Raises when it cannot be built."""
    ensure_addon(backend())


def _addon_for_operators():
    """The addon register's operators are implemented in, loaded (built first when
    missing); raises when it cannot be built (then they are implemented in Python).
    It is loaded anyway: where no table is in force yet and nothing chose one
    (DLX_TORCH_TABLE unset), dlx's own table goes in force for direct calls too. It
    converts a torch tensor in 141 instructions against torch 2.13's 624 (make bench-ir);
    lib.add3 on 3 tensors: 283 -> 133 ns a call. A table already in force stays (it is
    chosen once per process)."""
    global _choice
    ensure_addon(backend())
    if (installed() is not None or os.environ.get("DLX_TORCH_TABLE")
            or os.environ.get("DLX_DISABLE_TORCH_ADDON") == "1"):
        return
    install(prefer="addon")
    if _choice is not None:
        _choice = _choice._replace(origin=ADDON_TABLE_ORIGIN)


# ---- saved programs (dlx.torch_saved; docs/torch.md, "Saved programs") -----------------

def save(program, f, **kwargs):
    """torch.export.save, with a manifest of the dlx operators the program calls (library
    digest, schemas) that dlx.torch.load checks. See dlx.torch_saved."""
    from . import torch_saved

    return torch_saved.save(program, f, **kwargs)


def load(f, **kwargs):
    """torch.export.load, refusing a program whose dlx operators are not registered here
    from the same library (naming them). See dlx.torch_saved."""
    from . import torch_saved

    return torch_saved.load(f, **kwargs)


def aoti_compile_and_package(program, **kwargs):
    """torch._inductor.aoti_compile_and_package, with the dlx operators' manifest in the
    package's metadata. See dlx.torch_saved."""
    from . import torch_saved

    return torch_saved.aoti_compile_and_package(program, **kwargs)


def aoti_load_package(path, *args, **kwargs):
    """torch._inductor.aoti_load_package, checked against the package's manifest. See
    dlx.torch_saved."""
    from . import torch_saved

    return torch_saved.aoti_load_package(path, *args, **kwargs)
