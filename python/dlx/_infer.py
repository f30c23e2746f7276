"""What a kernel's call would return, without running it: the abstract evaluation that
compilers need (torch's fake implementation, JAX's abstract eval). Framework-neutral.

It reads the plan the C parser built (`kernel._plan`) and what dlx_derive.c derived from it
(`kernel._derived`), binds size symbols from the inputs' shapes as the eager call does
(under a tracer the extents may be symbolic: comparisons are left to the framework's own
integers) and reports faults in the eager call's words and exception types."""
import keyword

_binders = {}  # kernel -> a def with the kernel's parameters, for CPython's arity errors


def _binder(kernel):
    f = _binders.get(kernel)
    if f is None:
        plan = kernel._plan
        names = [p[0] for p in plan]
        # The parser admits only ASCII identifiers that are not keywords; checked again
        # because this text becomes code.
        if not all(n.isidentifier() and n.isascii() and not keyword.iskeyword(n) for n in names):
            raise ValueError(f"{kernel.__name__}(): parameter names are not identifiers")
        name = kernel.__name__
        if not (name.isidentifier() and name.isascii() and not keyword.iskeyword(name)):
            name = "kernel"
        ns = {}
        args = ", ".join(names)
        exec(f"def {name}({args}):\n    return [{args}]\n", ns)  # noqa: S102 (checked names)
        f = ns[name]
        f.__defaults__ = tuple(p[3] for p in plan if p[3] is not Ellipsis) or None
        _binders[kernel] = f
    return f


def bind(kernel, args, kwargs):
    """The arguments in declared order with defaults filled; arity errors as the eager call
    gives them (`k() missing 1 required positional argument: 'x'`)."""
    return _binder(kernel)(*args, **kwargs)


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
