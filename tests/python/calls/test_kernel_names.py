"""Kernels whose C names Python cannot write after a dot (`cost$k`, `class`) or that an
attribute of the library shadows (`kernels`, `path`): the library loads, each kernel is
lib["name"], the AttributeError says why, and `python -m dlx stubs` prints stubs that parse."""
import ast
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import PYPATH

SOURCE = r"""
#include <dlx/dlx.h>
DLX_KERNEL(cost$k, "a: int = 1 -> int") {
  int64_t a;
  if (dlx_arg_int(call, 0, &a)) return -1;
  return dlx_return_int(call, a + 10);
}
DLX_KERNEL(class) { return dlx_return_int(call, 2); }
DLX_KERNEL(kernels, "x: float = 1.5 -> int") { return dlx_return_int(call, 3); }
DLX_KERNEL(path) { return dlx_return_int(call, 4); }
DLX_KERNEL(__init__) { return dlx_return_int(call, 5); }
DLX_KERNEL(__dict__) { return dlx_return_int(call, 7); }
DLX_KERNEL(plain, "s: str = 'a' -> int") { return dlx_return_int(call, 6); }
"""
NAMES = ("__dict__", "__init__", "class", "cost$k", "kernels", "path", "plain")


@pytest.fixture(scope="module")
def names_so(tmp_path_factory):
    import dlx

    folder = tmp_path_factory.mktemp("names")
    (folder / "names.c").write_text(SOURCE)
    so = folder / "names.so"
    # gcc and clang take '$' in identifiers (the Itanium ABI has no use for it)
    subprocess.run(["cc", "-shared", "-fPIC", "-I", dlx.include_dir(), str(folder / "names.c"),
                    "-o", str(so)], check=True)
    return so


def test_a_dollar_name_loads_and_every_kernel_is_reachable(names_so):
    import dlx

    lib = dlx.load(names_so)  # was: TypeError: __slots__ must be identifiers
    assert lib.kernels == NAMES
    assert lib["cost$k"]() == 11 and lib["cost$k"](a=5) == 15
    assert getattr(lib, "cost$k") is lib["cost$k"]
    assert lib["kernels"]() == 3 and lib["path"]() == 4  # shadowed by the library's attributes
    assert lib.kernels == NAMES and lib.path == str(names_so)
    assert lib["class"]() == 2 and getattr(lib, "class")() == 2
    assert lib["__dict__"]() == 7 and lib.__dict__ is lib["__dict__"]  # no type attribute
    assert lib["__init__"]() == 5 and lib["plain"]() == 6 and lib.plain is lib["plain"]
    for name in NAMES:
        assert lib[name].__name__ == name


def test_lib_item_is_not_changed_by_setting_attributes(names_so):
    import dlx

    lib = dlx.load(names_so)
    kernel = lib.plain
    lib.plain = 5
    assert lib.plain == 5 and lib["plain"] is kernel


def test_missing_names_say_why(names_so):
    import dlx

    lib = dlx.load(names_so)
    with pytest.raises(AttributeError) as e:
        lib.cost
    msg = str(e.value)
    assert "has no kernel 'cost'" in msg
    assert "not attributes: reach them as lib['cost$k'], lib['kernels'], lib['path']" in msg
    with pytest.raises(KeyError, match="has no kernel 'cost'"):
        lib["cost"]
    with pytest.raises(TypeError, match="by its name"):
        lib[0]


def test_stubs_parse_and_list_what_python_cannot_spell(names_so, tmp_path):
    env = dict(os.environ, PYTHONPATH=PYPATH)
    r = subprocess.run([sys.executable, "-m", "dlx", "stubs", str(names_so)], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    tree = ast.parse(r.stdout)
    defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert sorted(defs) == ["__dict__", "__init__", "kernels", "path", "plain"]
    assert [a.arg for a in defs["kernels"].args.args] == ["x"]
    assert "#   'class'\n" in r.stdout and "#   'cost$k'\n" in r.stdout
    assert 'reached as lib["name"]: kernels, path' in r.stdout


def test_stubs_of_a_path_with_quotes_parse(names_so, tmp_path):
    import dlx

    odd = tmp_path / 'a"""b\\'
    odd.mkdir()
    so = odd / "names.so"
    so.write_bytes(names_so.read_bytes())
    from dlx._sig import stubs

    text = stubs(dlx.load(so))
    assert ast.get_docstring(ast.parse(text)).startswith("Stubs for the dlx kernels of ")
    assert textwrap.dedent(text).count("\ndef ") == 5
