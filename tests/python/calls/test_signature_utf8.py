"""A declared signature's str default that is not UTF-8 (issue 25, item 9): the library
is refused at dlx.load with an ImportError naming the kernel and the column, like every
malformed signature, and `python -m dlx stubs` says so in one line (no traceback)."""
import pytest

from conftest import run_python

import dlx

# C escapes: the bytes reach the library as they are
BAD = {
    "a lone 0xff": r"\xff",
    "a cut sequence": r"ab\xc3",
    "a surrogate": r"\xed\xa0\x80",
    "an overlong '/'": r"\xc0\xaf",
}
KERNEL = ('#include <dlx/dlx.h>\n'
          'DLX_KERNEL(pick, "mode: str = \'{text}\' -> int") {{ return dlx_return_int(call, 1); }}\n')


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DLX_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.parametrize("case", list(BAD))
def test_a_str_default_that_is_not_utf8_is_an_import_error_with_the_column(tmp_path, cache,
                                                                          case):
    src = tmp_path / "pick.c"
    src.write_text(KERNEL.format(text=BAD[case]))
    path = dlx.build(src, name="pick")
    column = len("mode: str = '") + 1 + (2 if case == "a cut sequence" else 0)
    with pytest.raises(ImportError) as e:
        dlx.load(path)
    msg = str(e.value)
    assert "kernel 'pick'" in msg and f"malformed signature at column {column}" in msg, msg
    assert "must be UTF-8" in msg
    r = run_python(f"import sys; from dlx.__main__ import main; sys.exit(main(['stubs', {path!r}]))",
                   check=False)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert f"column {column}" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_a_utf8_str_default_reaches_python_whole(tmp_path, cache):
    src = tmp_path / "pick.c"
    src.write_text(KERNEL.format(text="caf\u00e9 \u20ac \U0001f600"))
    lib = dlx.load(dlx.build(src, name="pick"))
    assert lib.pick.__signature__.parameters["mode"].default == "caf\u00e9 \u20ac \U0001f600"
    assert lib.pick() == 1


def test_refused_libraries_never_stand_in_for_a_later_one(tmp_path, cache):
    """A library refused at load stays known to the dynamic loader under its descriptor's
    name (/proc/self/fd/N); after many, a later library must still be itself, not one of
    them (the loader hands back whatever it knows by a name)."""
    bad, good = tmp_path / "bad.c", tmp_path / "good.c"
    bad.write_text(KERNEL.format(text=BAD["a lone 0xff"]))
    good.write_text(KERNEL.format(text="fine"))
    bad_path, good_path = dlx.build(bad, name="pick"), dlx.build(good, name="pick")
    r = run_python(f"""
import os, shutil, dlx
folder = os.path.dirname({bad_path!r})
for i in range(40):  # each refused, each leaving its descriptor's name behind
    copy = os.path.join(folder, f"libpick-copy{{i}}.so")
    shutil.copy({bad_path!r}, copy)
    try:
        dlx.load(copy)
    except ImportError as e:
        assert "must be UTF-8" in str(e), e
    else:
        raise AssertionError("a refused library loaded")
lib = dlx.load({good_path!r})
print(lib.pick.__signature__.parameters["mode"].default, lib.pick())
""")
    assert r.stdout.split() == ["fine", "1"], r.stdout
