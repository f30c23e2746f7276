"""Declared kernel signatures on the Python side: inspect.Signature objects and .pyi stubs.

The plan itself is parsed in C at dlx.load; a kernel exposes it as `_params` (name, kind,
type text, optional, default or Ellipsis when required) and `_results`."""
import inspect
import keyword

_PY = {"int": "int", "float": "float", "bool": "bool", "str": "str",
       "ints": "Sequence[int]", "floats": "Sequence[float]", "tensor": "Tensor"}


def signature(kernel):
    """inspect.Signature of a kernel: declared names, defaults, types as annotations."""
    params = kernel._params
    if params is None:  # undeclared: positional arguments of any kind
        return inspect.Signature([inspect.Parameter("args", inspect.Parameter.VAR_POSITIONAL)])
    out = []
    for name, _kind, text, _optional, default in params:
        out.append(inspect.Parameter(
            name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
            default=inspect.Parameter.empty if default is Ellipsis else default,
            annotation=text))
    results = kernel._results
    ret = inspect.Signature.empty
    if results is not None:
        ret = results[0][1] if len(results) == 1 else "(" + ", ".join(r[1] for r in results) + ")"
    return inspect.Signature(out, return_annotation=ret)


def _annotation(kind, optional):
    t = _PY[kind]
    return f"Optional[{t}]" if optional else t


def _stub(name, kernel):
    params = kernel._params
    doc = (kernel.__doc__ or "").split("\n", 1)[0]
    if params is None:
        return f"def {name}(*args: Any) -> Any:\n    {doc!r}\n    ...\n"
    args = []
    for pname, kind, _text, optional, default in params:
        a = f"{pname}: {_annotation(kind, optional)}"
        if default is not Ellipsis:
            a += f" = {default!r}"
        args.append(a)
    results = kernel._results
    if not results:
        ret = "None"
    elif len(results) == 1:
        ret = _annotation(results[0][0], results[0][2])
    else:
        ret = "Tuple[" + ", ".join(_annotation(k, o) for k, _t, o in results) + "]"
    return f"def {name}({', '.join(args)}) -> {ret}:\n    {doc!r}\n    ...\n"


def spellable(name):
    """Whether `def name` parses: an identifier and not a keyword (`class`)."""
    return name.isidentifier() and not keyword.iskeyword(name)


def stubs(lib):
    """The text of a .pyi for a loaded dlx.Library: one function per kernel. A kernel whose
    name Python cannot spell (`class`, `cost$k`) is listed in a comment instead; one named
    like an attribute of the library (`kernels`, `path`) is stubbed, and reached as
    lib["kernels"]."""
    shown = repr(lib.path).replace('"', '\\"')  # whatever the path, the docstring ends here
    head = (f'"""Stubs for the dlx kernels of {shown} (python -m dlx stubs)."""\n'
            "from typing import Any, Optional, Sequence, Tuple\n\n"
            "Tensor = Any  # any tensor dlx accepts: torch, numpy, DLPack producers\n")
    names = [n for n in lib.kernels if spellable(n)]
    unspelt = [n for n in lib.kernels if not spellable(n)]
    shadowed = [n for n in names if n in ("kernels", "path")]
    if shadowed:
        head += ("\n# kernels named like an attribute of the library, reached as lib[\"name\"]: "
                 + ", ".join(shadowed) + "\n")
    if unspelt:
        head += ("\n# kernels whose names Python cannot spell, reached as lib[\"name\"] "
                 "(no stub):\n" + "".join(f"#   {n!r}\n" for n in unspelt))
    return head + "".join("\n\n" + _stub(n, lib[n]) for n in names)
