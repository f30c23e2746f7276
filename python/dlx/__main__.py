"""python -m dlx: --include-dir | --cflags | --cmake-dir | --pkgconfig-dir | doctor |
build-addon | build | cache list|clean | bench | check | stubs"""
import glob
import os
import shlex
import shutil
import sys

USAGE = """usage: python -m dlx COMMAND
  --include-dir      print the folder to pass to the compiler with -I
  --cflags           print the compiler flags for a kernel library (as pkg-config --cflags dlx)
  --cmake-dir        print the folder to put on CMAKE_PREFIX_PATH for find_package(dlx)
  --pkgconfig-dir    print the folder to put on PKG_CONFIG_PATH for pkg-config dlx
  doctor             what dlx found and chose, and why
  build-addon        build the torch addon: [--backend cpu|cuda|rocm|torch_npu |
                     --build-with-cuda | --build-with-rocm | --build-with-torch-npu |
                     --build-with-ascend] [--output-dir DIR]
  build SRC...       compile kernel sources into the cache (dlx.build): [-o OUT] [--name N]
                     [--language c|c++|cuda] [--cflags FLAGS] [--ldflags FLAGS] [-I DIR]
                     [-l LIB] [--cuda-arch ARCH] [-v]
  cache list|clean   the cached addon and kernel libraries
  bench              ns per kernel call, next to a bare C-extension call
  check TARGET       check a framework's DLPack exchange table: [--device DEV]...
                     [--select PREFIX]... [--json] [--timeout S] [--import-timeout S]
  stubs LIB.so       print a .pyi for a kernel library (declared signatures)"""


def _err(msg, code=2):
    print(f"python -m dlx: error: {msg}", file=sys.stderr)
    return code


def build_addon(args, platform=None):
    from . import _core
    from . import torch as dt

    try:
        backend, output_dir = _core.parse_build_args(list(args), platform or sys.platform)
    except ValueError as e:
        return _err(e)
    try:
        import torch  # (the addon is built against this interpreter's torch)
    except ImportError as e:
        return _err(f"build-addon needs torch, which {sys.executable} cannot import ({e})")
    backend = backend or dt.backend()
    # A torch built without the backend's runtime has none of its headers: say so before
    # the compiler fails on the first missing one (whose hint names a Debian package).
    runtime = {"cuda": ("cuda", "CUDA"), "rocm": ("hip", "ROCm")}.get(backend)
    if runtime and getattr(getattr(torch, "version", None), runtime[0], None) is None:
        return _err(f"build-addon for {backend}: torch {torch.__version__} at "
                    f"{os.path.dirname(torch.__file__)} was built without {runtime[1]} "
                    f"(torch.version.{runtime[0]} is None); install a {runtime[1]} build of "
                    "torch, or build for the backend it has (--backend cpu)")
    import importlib.util

    if backend == "torch_npu" and importlib.util.find_spec("torch_npu") is None:
        return _err(f"build-addon for torch_npu (Ascend): {sys.executable} cannot import "
                    "torch_npu; install Ascend's torch_npu for this torch first")
    try:
        path, ident, _ = dt.ensure_addon(backend, output_dir)
    except (RuntimeError, OSError, ValueError) as e:
        return _err(e, 1)  # the compiler's output, if any, is on stderr already
    print(path)
    return 0


def _entries(folder):
    return sorted(glob.glob(os.path.join(folder, "libdlx_torch_*")))


def build(args):
    """python -m dlx build SRC... [-o OUT]: the library's path on stdout."""
    import argparse

    from . import _build as b

    p = argparse.ArgumentParser(prog="python -m dlx build",
                                description="compile kernel sources into dlx's cache")
    p.add_argument("sources", nargs="+", metavar="SRC")
    p.add_argument("-o", "--output", help="also copy the library here")
    p.add_argument("--name")
    p.add_argument("--language", choices=["c", "c++", "cuda"])
    p.add_argument("--cflags", action="append", default=[], help="compiler flags (shell words)")
    p.add_argument("--ldflags", action="append", default=[], help="linker flags (shell words)")
    p.add_argument("-I", dest="include_dirs", action="append", default=[], metavar="DIR")
    p.add_argument("-l", dest="libraries", action="append", default=[], metavar="LIB")
    p.add_argument("--cuda-arch")
    p.add_argument("-v", "--verbose", action="store_true")
    # "--cflags -O3": the flags are the option's value, though they start with '-'
    joined, it = [], iter(args)
    for a in it:
        joined.append(f"{a}={next(it, '')}" if a in ("--cflags", "--ldflags") else a)
    try:
        o = p.parse_args(joined)
    except SystemExit as e:
        return e.code
    try:
        path = b.build(o.sources, name=o.name, language=o.language,
                       cflags=shlex.split(" ".join(o.cflags)),
                       ldflags=shlex.split(" ".join(o.ldflags)), include_dirs=o.include_dirs,
                       libraries=o.libraries, cuda_arch=o.cuda_arch, verbose=o.verbose)
    except b.BuildError as e:
        return _err(e, 1)
    except (OSError, ValueError, TypeError) as e:
        return _err(e)
    if o.output:
        out = os.path.abspath(o.output)
        if os.path.isdir(out):
            out = os.path.join(out, os.path.basename(path))
        tmp = f"{out}.tmp.{os.getpid()}"
        shutil.copyfile(path, tmp)
        os.chmod(tmp, 0o755)
        os.replace(tmp, out)  # whole or not at all
        path = out
    print(path)
    return 0


def _kernel_records(folder):
    return sorted(glob.glob(os.path.join(folder, "kernels", "*.build")))


def _list_kernels(folder):
    from . import _core

    records = _kernel_records(folder)
    if records:
        print(f"{os.path.join(folder, 'kernels')} (dlx.build):")
    for rec_path in records:
        rec = _core.read_build_record(rec_path)
        if rec is None:
            print(f"  {os.path.basename(rec_path)}  unreadable build record")
            continue
        lib = os.path.join(folder, "kernels", rec["lib"])
        status, why = _core.library_checked(lib)  # the loader's checks, seal included
        state = "ok" if status == 1 else "missing" if status == 0 else f"refused: {why}"
        size = f"{os.path.getsize(lib)} bytes  " if status != 0 else ""
        print(f"  {rec['lib']}  {size}{state}")
        print(f"    name {rec['name']}; built from {', '.join(rec['sources'])}")
        for lang, (tool, version) in sorted(rec["tools"].items()):
            print(f"    {lang}: {tool} ({version})")
        print(f"    {len(rec['deps'])} headers digested")
        if rec["arch"]:
            print(f"    {rec['arch']}")


def cache(args):
    from . import _core
    from . import torch as dt

    folder = dt.cache_dir()
    if args == ["list"]:
        print(folder)
        for path in _entries(folder):
            if path.endswith(".so"):
                status, why = _core.file_trusted(path)
                state = "ok" if status == 1 else f"refused: {why}"
                print(f"  {os.path.basename(path)}  {os.path.getsize(path)} bytes  {state}")
        _list_kernels(folder)
        return 0
    if args == ["clean"]:
        removed = 0
        kernels = os.path.join(folder, "kernels")
        for path in _entries(folder) + sorted(glob.glob(os.path.join(kernels, "*"))):
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)  # a build's leftover work folder
            else:
                os.unlink(path)
            removed += 1
        print(f"removed {removed} file(s) from {folder}")
        return 0
    return _err("cache takes 'list' or 'clean'")


def _stream_source(rec):
    """Who answers current_work_stream for the record's backend, best source first."""
    if rec.source == "native+stream":
        return (f"{rec.backend} devices from the runtime provider (overlay); others from "
                "torch's native table")
    if rec.source == "native":
        return "torch's native table"
    if rec.backend == "cpu":
        return "addon (CPU: none); device types it was not built for: runtime provider"
    return (f"addon, compiled-in getter for {rec.backend}; other device types: "
            "runtime provider")


def _table_reason(rec, torch, choice):
    """Why install() chose the record's table (choice: dlx.torch.choice())."""
    if rec.source == "addon" and not (choice and choice.had_table):
        return (f"torch {torch.__version__} has no __dlpack_c_exchange_api__; dlx compiled "
                "one against it")
    if rec.source == "addon" and choice and choice.prefer == "auto":
        return (f"torch {torch.__version__} ships its own __dlpack_c_exchange_api__; dlx's "
                "addon for it was in the cache, so it replaces it (fewer instructions per "
                f"tensor; {choice.origin})")
    if rec.source == "addon":
        return (f"torch {torch.__version__} ships its own __dlpack_c_exchange_api__; dlx's "
                f"addon replaces it because {choice.origin} (fewer instructions per tensor)")
    why = f"torch {torch.__version__} ships its own __dlpack_c_exchange_api__; nothing is compiled"
    if rec.source == "native+stream":
        why += (f"; its table answers no {rec.backend} stream, so dlx lays its stream "
                "overlay over it")
    if choice and choice.prefer != "auto":
        why += f" ({choice.origin})"
    else:
        why += (" (dlx's addon is not in the cache: `python -m dlx build-addon` builds it, "
                "and later processes take it by default; DLX_TORCH_TABLE=native keeps torch's)")
    return why


def _operators_note(rec, torch, backend):
    """dlx.torch.register's implementation, and what its addon gains direct calls."""
    from . import torch as dt
    from .torch_ops import MIN_TORCH, _torch_version

    if _torch_version(torch) < MIN_TORCH:
        return None  # dlx.torch.register says why itself
    if rec.source == "addon":
        return "dlx.torch.register implements them in C++ in this addon"
    _, fname = dt.identity(dt.build_spec(backend, torch), torch)
    built = os.path.exists(os.path.join(dt.cache_dir(), fname))
    return ("dlx.torch.register implements them in C++ in the addon "
            f"({'built' if built else 'built on first register, ~1 min'}); registering before "
            "the first call also puts the addon's table in force for direct calls: ~4x fewer "
            "instructions per torch tensor (make bench-ir), 3 tensors about 2x faster a call; "
            "DLX_TORCH_TABLE=addon asks for it always")


def gil_state():
    """The GIL as doctor reports it. A free-threaded CPython (3.13t) keeps it off after
    `import dlx` (issue 23); an extension imported since that does not declare itself safe,
    or PYTHON_GIL=1, turns it back on."""
    import sysconfig

    if not getattr(sys, "_is_gil_enabled", lambda: True)():
        return "disabled (free-threaded)"
    if sysconfig.get_config_var("Py_GIL_DISABLED"):
        return ("enabled on a free-threaded build (PYTHON_GIL=1, or an extension that is not "
                "free-threading safe turned it on)")
    return "enabled"


def doctor():
    import dlx

    from . import _core

    print(f"interpreter: {sys.executable} ({sys.version.split()[0]}, {sys.platform})")
    print(f"dlx: {os.path.dirname(dlx.__file__)} (DLPack {_core.DLPACK_MAJOR_VERSION}."
          f"{_core.DLPACK_MINOR_VERSION}, kernel ABI {_core.ABI_VERSION >> 16}."
          f"{_core.ABI_VERSION & 0xFFFF})")
    print(f"include dir: {dlx.include_dir()}")
    print(f"GIL: {gil_state()}")
    try:
        import numpy
        print(f"numpy {numpy.__version__}: table {'in force' if dlx.exchange_api(numpy.ndarray) else 'missing'} (dlx provider)")
    except ImportError:
        print("numpy: not importable")
    try:
        import torch
    except ImportError as e:
        print(f"torch: not importable ({e})")
        torch = None
    from . import torch as dt

    if torch is not None:
        print(f"torch {torch.__version__} at {os.path.dirname(torch.__file__)}; "
              f"C++11 ABI {int(torch._C._GLIBCXX_USE_CXX11_ABI)}")
        try:
            name, reason = dt.selection(torch)
            forced = os.environ.get("DLX_BACKEND")
            print(f"backend: {name} — {reason}" + (f" (DLX_BACKEND={forced})" if forced else ""))
        except ValueError as e:
            print(f"backend: error — {e}")
            name = None
        for probe, err in dt.probe_errors.items():
            print(f"  probe {probe} raised {err} (counted as not available)")
        import importlib.util

        if not hasattr(torch, "npu") and importlib.util.find_spec("torch_npu") is not None:
            print("  note: torch_npu is installed but not imported; import torch_npu before "
                  "dlx selects a backend (torch < 2.5 does not autoload device plugins)")
        if os.environ.get("DLX_DISABLE_TORCH_ADDON") == "1":
            print("table: DLX_DISABLE_TORCH_ADDON=1, torch tensors use __dlpack__")
        elif name:
            try:
                rec = dt.install()
                print(f"table in force: {rec.source} (backend {rec.backend})")
                print(f"  why: {_table_reason(rec, torch, dt.choice())}")
                if rec.path:
                    print(f"  addon: {rec.path}\n  identity: {rec.identity}")
                print(f"  streams: {_stream_source(rec)}")
                note = _operators_note(rec, torch, name)
                if note:
                    print(f"  torch operators: {note}")
            except Exception as e:
                print(f"table: could not be installed — {type(e).__name__}: {e}")
                missing = _core.missing_header(str(e))
                if missing:
                    header, package = missing
                    if package and " " not in package:
                        package = f"install the Debian package {package} (apt-get install {package})"
                    print(f"  missing header: {header}" + (f" — {package}" if package else ""))
    info = _core.provider_info()
    print(f"stream providers (active backend {info['active']}, {info['calls']} calls so far):")
    for backend, where in info["providers"].items():
        print(f"  {backend}: {where}")
    print("streams for __dlpack__ producers without a table, when nothing else names one: "
          "the per-thread default stream (CUDA: cudaStreamPerThread, DLPack stream 2; ROCm: the "
          "default stream, DLPack 0); before that: `with dlx.stream(s)`, the stream of a table "
          "tensor in the same call, a stream provider (built in: cupy.ndarray -> "
          "cupy.cuda.get_current_stream(device_id).ptr)")
    registered = _core._stream_providers()
    for tp, fn in registered.items():
        print(f"  provider for {tp.__module__}.{tp.__qualname__}: {fn!r}")
    print("device map (DLPack device type -> backend):")
    for dev, backend, note, only_active in _core.device_rows():
        cond = " while that backend is active" if only_active else ""
        print(f"  {dev:3d} -> {backend}{cond}: {note}")
    folder = dt.cache_dir()
    print(f"cache: {folder}")
    for path in _entries(folder):
        print(f"  {os.path.basename(path)}")
    cxx = os.environ.get("CXX") or "c++"
    exe = shutil.which(shlex.split(cxx)[0]) if cxx.strip() else None
    print(f"compiler: {cxx} -> {exe or 'NOT FOUND'}")
    for lang, command, path, package in _core.compilers():
        found = path or f"NOT FOUND (install the Debian package {package})"
        print(f"  dlx.build {lang}: {command} -> {found}")
    return 0


def main(argv=None, platform=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    cmd, rest = (argv[0], argv[1:]) if argv else (None, [])
    paths = {"--include-dir": "include_dir", "--cflags": "cflags", "--cmake-dir": "cmake_dir",
             "--pkgconfig-dir": "pkgconfig_dir"}
    if cmd in paths:
        if rest:
            return _err(f"{cmd} takes no arguments")
        import dlx

        print(getattr(dlx, paths[cmd])())
        return 0
    if cmd == "build-addon":
        return build_addon(rest, platform)
    if cmd == "cache":
        return cache(rest)
    if cmd == "build":
        return build(rest)
    if cmd == "doctor":
        return doctor()
    if cmd == "check":
        from .check import main as check_main

        return check_main(rest)
    if cmd == "stubs":
        if len(rest) != 1:
            return _err("stubs takes one kernel library: python -m dlx stubs LIB.so")
        import dlx

        from ._sig import stubs

        try:
            lib = dlx.load(rest[0])
        except (OSError, ImportError) as e:
            return _err(e, 1)
        sys.stdout.write(stubs(lib))
        return 0
    if cmd == "bench":
        from .bench import main as bench_main
        from .bench.jax import main as jax_main
        from .bench.tvmffi import main as tvmffi_main

        return bench_main() or tvmffi_main() or jax_main()
    if cmd in ("-h", "--help", "help") and not rest:
        print(USAGE)
        return 0
    if cmd is not None:
        print(f"python -m dlx: error: unknown command {cmd!r}", file=sys.stderr)
    print(USAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
