"""Saved programs holding dlx operators (docs/torch.md, "Saved programs"): torch.export
programs (torch.export.save / load) and AOTInductor packages (.pt2).

A saved program names a dlx operator as torch.ops.<namespace>.<name> and nothing more: in
the process that loads it, whatever library was registered under that namespace serves
it. So that it is never another library's kernel, dlx.torch.save and
dlx.torch.aoti_compile_and_package write a manifest beside the program: per namespace the
program calls, the library's path, the sha256 of its content and each operator's schema.
dlx.torch.load and dlx.torch.aoti_load_package check it before running anything: a
namespace not registered here, or registered from another library (another digest, another
declaration), is refused with an error naming the operator, the library and how to load
it. A manifest is data: it is compared, never followed (no library is loaded from the path
it names).

torch.export.load of a program whose operators are not registered fails with a generic
"check the warnings above"; dlx.torch.load names the operators instead.
"""
import json
import os
import re
import zipfile

from . import _pickle

MANIFEST = "dlx_operators.json"  # the extra file (torch.export) / metadata key (AOTI)
FORMAT = 1
DIGEST_KEY = "dlx.digest."  # + namespace: the library's sha256, flat (AOTI metadata)
_MAX_MANIFEST = 1 << 20  # a manifest is small: a larger one is not dlx's
_TARGET = re.compile(r'"torch\.ops\.([A-Za-z_]\w*)\.([A-Za-z_]\w*)\.([A-Za-z_]\w*)"')


def _registrations():
    from . import torch_ops

    return torch_ops._registrations


def manifest(program):
    """The manifest (a JSON text) of the dlx operators an ExportedProgram calls: per
    namespace, the library's path and sha256 and each operator's schema. RuntimeError
    where a library changed on disk since it was loaded: no digest names what runs."""
    import torch

    regs = _registrations()
    used = {}
    for module in program.graph_module.modules():
        graph = getattr(module, "graph", None)
        if not isinstance(graph, torch.fx.Graph):
            continue
        for node in graph.nodes:
            target = node.target
            if isinstance(target, torch._ops.OpOverload) and target.namespace in regs:
                used.setdefault(target.namespace, set()).add(target._opname)
    namespaces = {}
    for ns, names in sorted(used.items()):
        reg = regs[ns]
        sha = _pickle.loaded_digest(reg.lib)
        if sha is None:
            raise RuntimeError(
                f"cannot save a program calling {ns}::{', '.join(sorted(names))}: the library "
                f"{reg.lib.path} registered under {ns!r} changed on disk (or went) since it "
                f"was loaded, so no digest names the kernels this process runs; load it "
                f"again and register it under another namespace (or in a new process), "
                f"then export again")
        namespaces[ns] = {
            "library": str(reg.lib.path),
            "sha256": sha,
            "operators": {n: reg.lib[n]._schema for n in sorted(names)},
        }
    return json.dumps({"format": FORMAT, "namespaces": namespaces}, sort_keys=True)


def check(text, what):
    """Refuse (RuntimeError) a program whose manifest `text` names dlx operators this
    process does not serve with the same library: `what` names the program."""
    if len(text) > _MAX_MANIFEST:
        raise ValueError(f"{what}: its dlx manifest is {len(text)} bytes, not one dlx wrote")
    try:
        data = json.loads(text)
        namespaces = data["namespaces"]
        if data.get("format") != FORMAT or not isinstance(namespaces, dict):
            raise ValueError(f"format {data.get('format')!r}")
        entries = [(ns, str(e["library"]), str(e["sha256"]), dict(e["operators"]))
                   for ns, e in namespaces.items()]
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:
        raise ValueError(f"{what}: its dlx manifest is not one dlx wrote ({e})") from e
    regs = _registrations()
    for ns, path, sha, ops in entries:
        names = ", ".join(f"{ns}::{n}" for n in sorted(ops))
        load = f"dlx.torch.register(dlx.load({path!r}), {ns!r})"
        reg = regs.get(ns)
        if reg is None:
            raise RuntimeError(
                f"{what} calls the dlx operator{'s' if len(ops) > 1 else ''} {names} of the "
                f"library {path} (sha256 {sha[:16]}), and no library is registered under "
                f"{ns!r} in this process: {load} before loading it")
        have = _pickle.loaded_digest(reg.lib)
        if have != sha:
            now = ("changed on disk since it was loaded" if have is None
                   else f"sha256 {have[:16]}")
            raise RuntimeError(
                f"{what} calls {names} of the library {path} (sha256 {sha[:16]}), and "
                f"namespace {ns!r} is registered here from another library: {reg.lib.path} "
                f"({now}); its kernels are not the ones the program was made with")
        for name, schema in sorted(ops.items()):
            k = reg.ops.get(name)
            mine = reg.lib[name]._schema if k is not None else None
            if mine != schema:
                raise RuntimeError(
                    f"{what} calls {ns}::{name} as {schema!r}; the library registered "
                    f"under {ns!r} here declares {mine!r}")


def save(program, f, *, extra_files=None, **kwargs):
    """torch.export.save(program, f), with the manifest of its dlx operators."""
    import torch

    extra = dict(extra_files or {})
    extra[MANIFEST] = manifest(program)
    torch.export.save(program, f, extra_files=extra, **kwargs)


def _unresolved(f):
    """The operators (ns::name) a saved torch.export program names that this process does
    not have: read from the archive's JSON as text (a program is data, nothing in it runs)."""
    import torch

    missing = set()
    try:
        with zipfile.ZipFile(f) as z:
            for info in z.infolist():
                if "/models/" not in info.filename or not info.filename.endswith(".json"):
                    continue
                if info.file_size > (256 << 20):
                    continue
                text = z.read(info).decode("utf-8", "replace")
                for ns, name, _ in _TARGET.findall(text):
                    if ns in ("aten", "prims", "higher_order"):
                        continue
                    packet = getattr(getattr(torch.ops, ns), name, None)
                    if packet is None:
                        missing.add(f"{ns}::{name}")
    except (OSError, zipfile.BadZipFile, RuntimeError, AttributeError):
        return set()
    finally:
        if hasattr(f, "seek"):
            f.seek(0)
    return missing


def _name(f):
    return f"the saved program {os.fspath(f)!s}" if isinstance(f, (str, os.PathLike)) \
        else "the saved program"


def load(f, *, extra_files=None, **kwargs):
    """torch.export.load(f), after checking the manifest dlx.torch.save wrote (a program
    saved by torch.export.save alone has none: then only torch's own checks hold)."""
    import torch

    if isinstance(f, (str, os.PathLike)):
        f = os.fspath(f)
    extra = dict(extra_files or {})
    extra.setdefault(MANIFEST, "")
    # torch reads extra files only with the program: the manifest is read here first
    text = _read_extra(f)
    if text:
        check(text, _name(f))
    try:
        program = torch.export.load(f, extra_files=extra, **kwargs)
    except RuntimeError as e:
        missing = _unresolved(f)
        if not missing:
            raise
        raise RuntimeError(
            f"{_name(f)} calls operator{'s' if len(missing) > 1 else ''} "
            f"{', '.join(sorted(missing))} that this process has not registered: register "
            "their library first (dlx.torch.register(lib, namespace))") from e
    if extra_files is not None:
        extra_files.update(extra)
    return program


def _read_extra(f):
    """The manifest's text in a torch.export archive, or None."""
    try:
        with zipfile.ZipFile(f) as z:
            for info in z.infolist():
                if info.filename.endswith("/extra/" + MANIFEST) or info.filename.endswith(
                        "extra/" + MANIFEST):
                    if info.file_size > _MAX_MANIFEST:
                        return "x" * (_MAX_MANIFEST + 1)
                    return z.read(info).decode("utf-8", "replace")
    except (OSError, zipfile.BadZipFile):
        return None
    finally:
        if hasattr(f, "seek"):
            f.seek(0)
    return None


def aoti_compile_and_package(program, *, package_path=None, inductor_configs=None):
    """torch._inductor.aoti_compile_and_package, with the manifest of the program's dlx
    operators in the package's metadata (AOTIModelPackageLoader::get_metadata in C++)."""
    import torch

    configs = dict(inductor_configs or {})
    metadata = dict(configs.get("aot_inductor.metadata") or {})
    text = metadata[MANIFEST] = manifest(program)
    # flat entries a C++ program checks without a JSON parser (dlx_torch_check_package)
    for ns, entry in json.loads(text)["namespaces"].items():
        metadata[DIGEST_KEY + ns] = entry["sha256"]
    configs["aot_inductor.metadata"] = metadata
    return torch._inductor.aoti_compile_and_package(program, package_path=package_path,
                                                    inductor_configs=configs)


def aoti_load_package(path, *args, **kwargs):
    """torch._inductor.aoti_load_package(path), refused before its first call when its
    manifest names dlx operators this process does not serve with the same library."""
    import torch

    model = torch._inductor.aoti_load_package(path, *args, **kwargs)
    text = model.get_metadata().get(MANIFEST)
    if text:
        check(text, f"the AOTInductor package {os.fspath(path)}")
    return model
