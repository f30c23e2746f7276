"""What a kernel's call would return, without running it: the abstract evaluation that
compilers need (torch's fake implementation, JAX's abstract eval). Framework-neutral.

It reads the plan the C parser built (`kernel._plan`) and what dlx_derive.c derived from it
(`kernel._derived`), binds size symbols from the inputs' shapes as the eager call does
(under a tracer the extents may be symbolic: comparisons are left to the framework's own
integers) and reports faults in the eager call's words and exception types."""
import sys

_signatures = {}  # kernel -> (its inspect.Signature, number of parameters)


def bind(kernel, args, kwargs):
    """The arguments in declared order with defaults filled; arity errors as the eager call
    gives them (`k() missing 1 required positional argument: 'x'`)."""
    known = _signatures.get(kernel)
    if known is None:  # kernel.__signature__ makes a new one each time
        sig = kernel.__signature__
        known = _signatures[kernel] = (sig, len(sig.parameters))
    sig, nparams = known
    if not kwargs and len(args) == nparams:
        # every argument by position, as torch's dispatcher passes them to an operator's
        # Python implementation: ~0.1 us where Signature.bind takes ~3 us
        return list(args)
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError as e:
        raise TypeError(_arity_error(kernel, args, kwargs, e)) from None
    bound.apply_defaults()
    return list(bound.arguments.values())


def _arity_error(kernel, args, kwargs, e):
    """What a def with the kernel's parameters says (and so the eager call, src/python/
    calls/call.c's binding): Signature.bind knows the fault but words it without the name and
    counts."""
    name = kernel.__name__
    params = list(kernel.__signature__.parameters.values())
    names = [p.name for p in params]
    if len(args) > len(names) and not kwargs:
        nreq = sum(p.default is p.empty for p in params)
        takes = (f"{len(names)} positional argument{'' if len(names) == 1 else 's'}"
                 if nreq == len(names) else f"from {nreq} to {len(names)} positional arguments")
        return (f"{name}() takes {takes} but {len(args)} "
                f"{'was' if len(args) == 1 else 'were'} given")
    for i, key in enumerate(kwargs):
        if key not in names:
            return f"{name}() got an unexpected keyword argument '{key}'{_suggest(key, names)}"
        if names.index(key) < len(args):
            return f"{name}() got multiple values for argument '{key}'"
    given = set(names[:len(args)]) | set(kwargs)
    lacking = [f"'{p.name}'" for p in params if p.name not in given and p.default is p.empty]
    if not lacking:  # no fault a def of plain parameters has: Signature.bind's own words
        return f"{name}(): {e}"
    listed = (lacking[0] if len(lacking) == 1 else " and ".join(lacking) if len(lacking) == 2
              else ", ".join(lacking[:-1]) + ", and " + lacking[-1])
    return (f"{name}() missing {len(lacking)} required positional argument"
            f"{'' if len(lacking) == 1 else 's'}: {listed}")


def _suggest(key, names):
    """CPython 3.13's "Did you mean" for a keyword no parameter has (the eager call's too)."""
    if sys.version_info < (3, 13):
        return ""
    try:
        from _suggestions import _generate_suggestions
    except ImportError:  # an interpreter without CPython's helper: no suggestion
        return ""
    near = _generate_suggestions(names, key)
    return f". Did you mean '{near}'?" if near else ""


def _num(n):
    """An extent for a message: its value where the tracer knows one (a torch SymInt's
    hint; this is the error path, so pinning it to that value costs nothing)."""
    try:
        return int(n)
    except Exception:  # a symbolic extent without a value
        return n


def _shape_text(shape):
    return "[" + ", ".join(str(_num(n)) for n in shape) + "]"


def _extents(decl, shape):
    """(declared dim, extent, tensor dim) for each declared entry but "...", or None when
    the number of dimensions cannot match."""
    nd = len(decl)
    if Ellipsis not in decl:
        if len(shape) != nd:
            return None
        return [(decl[d], shape[d], d) for d in range(nd)]
    e = decl.index(Ellipsis)
    skip = len(shape) - (nd - 1)
    if skip < 0:
        return None
    out = [(decl[d], shape[d], d) for d in range(e)]
    out += [(decl[d], shape[d - 1 + skip], d - 1 + skip) for d in range(e + 1, nd)]
    return out


def check(kernel, bound, *, shape, dtype):
    """Check the bound tensors against their declared types (dtype, rank, fixed extents,
    size symbols) and return the symbols' values {symbol: extent}. TypeError for a dtype,
    ValueError for the rest, worded as the eager call words them."""
    name = kernel.__name__
    params = kernel._params
    values, owner = {}, {}
    for i, (pname, kind, optional, _default, dtypes, dims, _flags) in enumerate(kernel._plan):
        if kind != "tensor":
            continue
        x = bound[i]
        if x is None:
            if optional:
                continue
            raise TypeError(f"{name}(): '{pname}' must be {params[i][2]}, got None")
        want = params[i][2]
        dt = dtype(x)
        if dtypes is not None and dt not in dtypes:
            raise TypeError(f"{name}(): '{pname}' must be {want}, got dtype {dt}")
        if dims is None:
            continue
        shp = tuple(shape(x))
        ext = _extents(dims, shp)
        if ext is None:
            raise ValueError(f"{name}(): '{pname}' must be {want}, got {len(shp)} dimension"
                             f"{'' if len(shp) == 1 else 's'} of shape {_shape_text(shp)}")
        for decl, n, d in ext:
            if decl is None:
                continue
            if isinstance(decl, int):
                if n != decl:
                    raise ValueError(f"{name}(): '{pname}' must be {want}, got shape "
                                     f"{_shape_text(shp)} (dimension {d} is {_num(n)})")
            elif decl not in values:
                values[decl], owner[decl] = n, pname
            elif n != values[decl]:
                raise ValueError(f"{name}(): '{pname}' has {decl}={_num(n)} where "
                                 f"'{owner[decl]}' has {decl}={_num(values[decl])}")
    return values


def results(kernel, bound, *, shape, dtype, fresh):
    """[(shape tuple, dtype name), ...] of the declared results, after check(). `fresh(sym)`
    makes a data-dependent extent (sym: the result-only symbol, or None for "_"); one
    symbol gets one extent across all results. ValueError when the results cannot be
    derived (kernel._derived says why)."""
    values = check(kernel, bound, shape=shape, dtype=dtype)
    derived = kernel._derived
    if derived is None:
        raise ValueError(f"{kernel.__name__}(): declare a signature")
    out = []
    made = {}
    for dt, dims in derived[0]:
        shp = []
        for entry in dims:
            how = entry[0]
            if how == "fixed":
                shp.append(entry[1])
            elif how == "dim":
                _, p, d, back, sym = entry
                if sym in values:
                    shp.append(values[sym])
                elif sym not in made:  # declared only by optional tensors given None
                    made[sym] = fresh(sym)
                    shp.append(made[sym])
                else:
                    shp.append(made[sym])
            elif how == "batch":
                p = entry[1]
                decl = kernel._plan[p][5]
                s = tuple(shape(bound[p]))
                e = decl.index(Ellipsis)
                shp.extend(s[e:e + len(s) - (len(decl) - 1)])
            else:  # fresh
                sym = entry[1]
                if sym is None:
                    shp.append(fresh(None))
                else:
                    if sym not in made:
                        made[sym] = fresh(sym)
                    shp.append(made[sym])
        out.append((tuple(shp), dt if isinstance(dt, str) else dtype(bound[dt])))
    return out
