"""Libraries, kernels and dlx's exceptions cross process boundaries by pickle (issue 24):
a library by its path and content digest, one made by dlx.build / dlx.load_inline by its
sources and options; a kernel by its library and name. Other processes are fresh
interpreters (conftest.run_python) that unpickle what this one wrote."""
import json
import os
import pickle
import subprocess
import textwrap

import pytest

from conftest import BUILD, run_python

import dlx

ADD = r"""
#include <dlx/dlx.h>
DLX_KERNEL(add) {
  int64_t a, b;
  if (dlx_arg_int(call, 0, &a) || dlx_arg_int(call, 1, &b)) return -1;
  return dlx_return_int(call, a + b);
}
"""


def compile_so(folder, name, body):
    src = folder / f"{name}.c"
    src.write_text("#include <dlx/dlx.h>\n" + textwrap.dedent(body))
    so, tmp = folder / f"{name}.so", folder / f"{name}.so.tmp"
    subprocess.run(["cc", "-shared", "-fPIC", "-I", dlx.include_dir(), str(src), "-o", str(tmp)],
                   check=True, timeout=120)
    os.replace(tmp, so)  # a new file: one this process has mapped is never written in place
    return so


def in_child(tmp_path, obj, code, env=None, check=True):
    """Pickle `obj` here; in a fresh interpreter, `x = pickle.load(...)` then `code`."""
    data = tmp_path / "obj.pickle"
    data.write_bytes(pickle.dumps(obj))
    return run_python(f"import pickle\nx = pickle.loads(open({str(data)!r}, 'rb').read())\n"
                      + textwrap.dedent(code), env=env, check=check, timeout=300)


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("DLX_CACHE_DIR", str(folder))
    return folder


def test_library_and_kernel_round_trip_by_path_and_digest(tmp_path):
    lib = dlx.load(BUILD / "kernels" / "test_kernels.so")
    data = pickle.dumps(lib)
    assert str(BUILD / "kernels" / "test_kernels.so").encode() in data
    again = pickle.loads(data)
    assert again.kernels == lib.kernels and again.path == lib.path
    assert pickle.loads(data) is again  # a warm unpickle is a lookup, not another load
    k = pickle.loads(pickle.dumps(lib.echo_int))
    assert k(41) == 41 and k.__name__ == "echo_int"
    r = in_child(tmp_path, (lib, lib.echo_int), """
        lib, k = x
        print(k(7), lib.echo_int(8), lib.kernels == tuple(sorted(lib.kernels)))
    """)
    assert r.stdout.split() == ["7", "8", "True"]


def test_changed_file_on_the_other_side_is_an_import_error_naming_it(tmp_path):
    so = compile_so(tmp_path, "one", "DLX_KERNEL(k) { return dlx_return_int(call, 1); }")
    lib = dlx.load(so)
    data = tmp_path / "lib.pickle"
    data.write_bytes(pickle.dumps(lib.k))
    other = compile_so(tmp_path, "two", "DLX_KERNEL(k) { return dlx_return_int(call, 2); }")
    os.replace(other, so)  # the receiving side has other code under that name
    r = run_python(f"import pickle\npickle.loads(open({str(data)!r}, 'rb').read())", check=False)
    assert r.returncode != 0 and "ImportError" in r.stderr and str(so) in r.stderr
    assert "other content" in r.stderr
    so.unlink()
    r = run_python(f"import pickle\npickle.loads(open({str(data)!r}, 'rb').read())", check=False)
    assert r.returncode != 0 and "ImportError" in r.stderr and str(so) in r.stderr


def test_deleted_or_changed_since_loaded_cannot_be_pickled(tmp_path):
    so = compile_so(tmp_path, "gone", "DLX_KERNEL(k) { return dlx_return_int(call, 1); }")
    lib = dlx.load(so)
    k = lib.k
    so.unlink()
    for obj in (lib, k):
        with pytest.raises(pickle.PicklingError, match=f"{so}: the file was deleted"):
            pickle.dumps(obj)
    assert k() == 1  # still loaded and callable
    so2 = compile_so(tmp_path, "edited", "DLX_KERNEL(k) { return dlx_return_int(call, 1); }")
    lib2 = dlx.load(so2)
    compile_so(tmp_path, "edited", "DLX_KERNEL(k) { return dlx_return_int(call, 3); }")
    with pytest.raises(pickle.PicklingError, match="changed since it was loaded"):
        pickle.dumps(lib2)
    reloaded = dlx.load(so2)  # the edit-reload loop: the new code, which pickles
    assert reloaded.k() == 3 and pickle.loads(pickle.dumps(reloaded.k))() == 3


def test_kernels_named_like_library_attributes_pickle(tmp_path):
    so = compile_so(tmp_path, "clash", """
        DLX_KERNEL(path) { return dlx_return_int(call, 1); }
        DLX_KERNEL(__hidden) { return dlx_return_int(call, 4); }
    """)
    lib = dlx.load(so)
    assert lib.__hidden() == 4
    assert pickle.loads(pickle.dumps(lib.__hidden))() == 4
    path_kernel = lib["path"]
    assert pickle.loads(pickle.dumps(path_kernel))() == 1


def test_load_inline_travels_as_source_and_builds_where_missing(tmp_path, cache):
    lib = dlx.load_inline(ADD, name="adder", cflags=["-DUNUSED=1"])
    data = pickle.dumps(lib.add)
    assert b"DLX_KERNEL(add)" in data and b"-DUNUSED=1" in data
    assert str(cache).encode() not in data  # nothing of this machine's cache travels
    fresh = tmp_path / "other-cache"
    r = in_child(tmp_path, lib.add, """
        import os, dlx
        print(x(40, 2), sorted(os.listdir(os.path.join(os.environ['DLX_CACHE_DIR'], 'kernels')))[:1])
    """, env={"DLX_CACHE_DIR": str(fresh)})
    assert r.stdout.split()[0] == "42"
    assert any(n.endswith(".so") for n in os.listdir(fresh / "kernels"))  # built there


def test_build_travels_as_sources_checked_on_the_other_side(tmp_path, cache):
    src = tmp_path / "src" / "adder.c"
    src.parent.mkdir()
    (src.parent / "local.h").write_text("#define OFFSET 0\n")
    src.write_text(ADD.replace("a + b", "a + b + OFFSET").replace(
        "#include <dlx/dlx.h>", '#include <dlx/dlx.h>\n#include "local.h"'))
    lib = dlx.load(dlx.build(src))
    assert lib.add(1, 2) == 3
    data = pickle.dumps(lib.add)
    assert pickle.loads(data)(2, 2) == 4
    r = in_child(tmp_path, lib.add, "print(x(20, 22))",
                 env={"DLX_CACHE_DIR": str(tmp_path / "fresh")})
    assert r.stdout.strip() == "42"
    # a header the build read, changed on the receiving side: refused, named
    (src.parent / "local.h").write_text("#define OFFSET 1\n")
    r = in_child(tmp_path, lib.add, "print(x(20, 22))", check=False,
                 env={"DLX_CACHE_DIR": str(tmp_path / "fresh2")})
    assert r.returncode != 0 and "ImportError" in r.stderr and "local.h" in r.stderr
    (src.parent / "local.h").write_text("#define OFFSET 0\n")
    src.write_text(src.read_text() + "\n/* edited */\n")
    r = in_child(tmp_path, lib.add, "print(x(20, 22))", check=False)
    assert r.returncode != 0 and "ImportError" in r.stderr and str(src) in r.stderr


def test_build_error_pickles_with_its_log_and_command(tmp_path, cache):
    with pytest.raises(dlx.BuildError) as e:
        dlx.load_inline("#include <dlx/dlx.h>\nDLX_KERNEL(b) { return nope; }\n", name="broken")
    again = pickle.loads(pickle.dumps(e.value))
    assert type(again) is dlx.BuildError and str(again) == str(e.value)
    assert again.log == e.value.log and "nope" in again.log and again.command == e.value.command
    r = in_child(tmp_path, e.value, "print(type(x).__module__, type(x).__name__, 'nope' in x.log)")
    assert r.stdout.split() == ["dlx._build", "BuildError", "True"]


def test_kernel_errors_pickle_with_message_and_fields(tmp_path, monkeypatch):
    pkg = tmp_path / "pkerrs"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "errors.py").write_text(
        "class ShapeError(ValueError):\n    code = 0\n\n"
        "class Outer:\n    class Inner(LookupError):\n        pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    sk = dlx.load(BUILD / "kernels" / "sig_kernels.so")
    kernels = dlx.load(BUILD / "kernels" / "test_kernels.so")
    caught = []
    for call in (lambda: kernels.fail_value(), lambda: sk.raise_kind("pkerrs.errors.ShapeError", "bad"),
                 lambda: sk.raise_kind("pkerrs.errors.Outer.Inner", "deep")):
        with pytest.raises(Exception) as e:
            call()
        caught.append(e.value)
    caught[1].code = 7  # a field set on the instance travels with it
    for err in caught:
        again = pickle.loads(pickle.dumps(err))
        assert type(again) is type(err) and str(again) == str(err)
    r = in_child(tmp_path, caught, """
        for e in x:
            print(type(e).__module__ + ':' + type(e).__qualname__, '|', e, '|', getattr(e, 'code', '-'))
    """, env={"PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", ""),
                                             *__import__("conftest").PYPATH.split(os.pathsep)])})
    lines = r.stdout.strip().splitlines()
    assert lines[0].startswith("builtins:ValueError | fail_value(): bad value 42")
    assert lines[1] == "pkerrs.errors:ShapeError | raise_kind(): bad | 7"
    assert lines[2].startswith("pkerrs.errors:Outer.Inner | ")


class Forged:
    """A pickle dlx did not write: its loader called with other arguments."""

    def __init__(self, loader, *args):
        self.loader, self.args = loader, args

    def __reduce__(self):
        return self.loader, self.args


def test_tampered_pickles_are_import_errors_naming_library_and_fault(tmp_path):
    """Paths to a FIFO, a device or a folder are never read (a FIFO would block the digest
    for ever, /dev/zero never ends); digests, paths and lists that are not what dlx pickles
    are refused. Unpickled in a child, under a timeout, so a regression fails, not hangs."""
    from dlx import _pickle

    so = BUILD / "kernels" / "test_kernels.so"
    digest = _pickle._sha256(str(so))
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    header = tmp_path / "h.h"
    header.write_text("")
    ok_file = (str(header), _pickle._sha256(str(header)))
    opts = (("cflags", ()),)
    cases = {  # name -> (forged object, what the message must say)
        "fifo": (Forged(_pickle._load_file, str(fifo), digest), [str(fifo), "a FIFO"]),
        "dev_zero": (Forged(_pickle._load_file, "/dev/zero", digest),
                     ["/dev/zero", "a character device"]),
        "folder": (Forged(_pickle._load_file, str(tmp_path), digest), [str(tmp_path), "a folder"]),
        "nul": (Forged(_pickle._load_file, str(so) + "\0x", digest), ["is not a path"]),
        "fd": (Forged(_pickle._load_file, 0, digest), ["0", "is not a path"]),
        "digest_none": (Forged(_pickle._load_file, str(so), None), [str(so), "not a sha256"]),
        "kernel": (Forged(_pickle._kernel, _pickle._load_file, (str(so), digest), "nope"),
                   [str(so), "no kernel 'nope'"]),
        "files_fifo": (Forged(_pickle._load_inline, ADD, "c", "forged", opts,
                              (ok_file, (str(fifo), digest))), ["forged", str(fifo), "a FIFO"]),
        "files_dev_zero": (Forged(_pickle._load_build, (str(header),), "forged", "c", opts,
                                  (("/dev/zero", digest),)), ["forged", "/dev/zero", "device"]),
        "files_digest_none": (Forged(_pickle._load_inline, ADD, "c", "forged", opts,
                                     ((str(header), None),)), ["forged", "not a sha256"]),
        "files_not_pairs": (Forged(_pickle._load_inline, ADD, "c", "forged", opts, "abc"),
                            ["forged", "not (path, digest) pairs"]),
        "files_relative": (Forged(_pickle._load_inline, ADD, "c", "forged", opts,
                                  (("h.h", digest),)), ["forged", "not an absolute path"]),
        "options": (Forged(_pickle._load_inline, ADD, "c", "forged", (("exec", "x"),), ()),
                    ["forged", "build options"]),
    }
    data = tmp_path / "forged.pickle"
    data.write_bytes(pickle.dumps({n: pickle.dumps(obj) for n, (obj, _) in cases.items()}))
    r = run_python(textwrap.dedent(f"""
        import json, pickle
        out = {{}}
        for name, one in pickle.loads(open({str(data)!r}, 'rb').read()).items():
            try:
                pickle.loads(one)
                out[name] = 'unpickled'
            except Exception as e:
                out[name] = [type(e).__name__, str(e), isinstance(e.__cause__, OSError)]
        print(json.dumps(out))
    """), timeout=120)
    got = json.loads(r.stdout)
    for name, (_, words) in cases.items():
        kind, msg, _ = got[name]
        assert kind == "ImportError" and all(w in msg for w in words), (name, got[name])
    for name in ("fifo", "dev_zero", "folder", "files_fifo", "files_dev_zero"):
        assert got[name][2], (name, "the OSError kept as __cause__")
