"""dlx.build's inputs under change and odd names (issue 25, items 5 and 8): a library is
cached only when it was compiled from exactly the bytes its key holds, and every path a
compiler can be given (spaces, newlines, '#', '$') round-trips through the build.

A source or header that changes while it is compiled is made deterministic with a
wrapper compiler (CC=wrapper) that rewrites it around the real compiler's run, once."""
import os
import pathlib

import pytest

from conftest import run_python

import dlx

VALUE = "#include <dlx/dlx.h>\n{include}DLX_KERNEL(value) {{ return dlx_return_int(call, {v}); }}\n"


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("DLX_CACHE_DIR", str(folder))
    return folder


def changing_cc(tmp_path, before="", after=""):
    """A compiler that, on its first compile (-c) only, runs `before` (shell), the real
    compiler, then `after`; every other run is the real compiler's."""
    trigger = tmp_path / "trigger"
    trigger.write_text("")
    w = tmp_path / "cc-change"
    w.write_text("#!/bin/sh\n"
                 f'case " $* " in *" -c "*) ;; *) exec cc "$@" ;; esac\n'
                 f'if [ -e "{trigger}" ]; then\n'
                 f'  rm -f "{trigger}"\n'
                 f"  {before or ':'}\n"
                 '  cc "$@"; rc=$?\n'
                 f"  {after or ':'}\n"
                 "  exit $rc\n"
                 "fi\n"
                 'exec cc "$@"\n')
    w.chmod(0o755)
    return w


def value_of(path):
    """The kernel's value, from a fresh process (nothing of this one's loads in the way)."""
    r = run_python(f"import dlx; print(dlx.load({str(path)!r}).value())")
    return int(r.stdout.strip())


def q(p):
    return "'" + str(p).replace("'", "'\\''") + "'"


@pytest.mark.parametrize("case", ["rewritten before it is read", "rewritten and put back",
                                  "empty mid-write"])
def test_source_changed_during_the_compile_is_not_cached(tmp_path, cache, monkeypatch, case):
    src, a, b = tmp_path / "k.c", tmp_path / "a.c", tmp_path / "b.c"
    a.write_text(VALUE.format(include="", v=1))
    b.write_text(VALUE.format(include="", v=2))
    src.write_text(a.read_text())
    before, after = {
        "rewritten before it is read": (f"cp {q(b)} {q(src)}", ""),
        "rewritten and put back": (f"cp {q(b)} {q(src)}", f"cp {q(a)} {q(src)}"),
        "empty mid-write": (f": > {q(src)}", f"cp {q(a)} {q(src)}"),
    }[case]
    monkeypatch.setenv("CC", str(changing_cc(tmp_path, before, after)))
    with pytest.raises(dlx.BuildError, match="changed while it was being compiled") as e:
        dlx.build(src, name="k")
    assert str(src) in str(e.value)
    assert not list((cache / "kernels").glob("*.so")), "nothing is published"
    # the source as it is now (A) builds and gives A's value, now and warm
    src.write_text(a.read_text())
    assert value_of(dlx.build(src, name="k")) == 1
    assert value_of(dlx.build(src, name="k")) == 1


def test_header_changed_after_the_compile_read_it_is_not_cached(tmp_path, cache, monkeypatch):
    inc = tmp_path / "inc"
    inc.mkdir()
    h = inc / "v.h"
    h.write_text("#define V 1\n")
    hb = tmp_path / "v2.h"
    hb.write_text("#define V 2\n")
    src = tmp_path / "k.c"
    src.write_text(VALUE.format(include='#include "v.h"\n', v="V"))
    # the compiler reads V 1; the header holds V 2 when dlx hashes it
    monkeypatch.setenv("CC", str(changing_cc(tmp_path, after=f"cp {q(hb)} {q(h)}")))
    with pytest.raises(dlx.BuildError, match="changed while it was being compiled") as e:
        dlx.build(src, name="k", include_dirs=[inc])
    assert str(h) in str(e.value)
    # built again, from what the header holds now
    assert value_of(dlx.build(src, name="k", include_dirs=[inc])) == 2
    assert value_of(dlx.build(src, name="k", include_dirs=[inc])) == 2


def test_a_header_written_before_the_build_is_cached(tmp_path, cache, monkeypatch):
    # the guard above must not refuse a header saved just before dlx.build runs
    inc = tmp_path / "inc"
    inc.mkdir()
    src = tmp_path / "k.c"
    src.write_text(VALUE.format(include='#include "v.h"\n', v="V"))
    for v in (1, 2, 3):
        (inc / "v.h").write_text(f"#define V {v}\n")
        assert value_of(dlx.build(src, name="k", include_dirs=[inc])) == v


# ---- item 8: arguments and paths ----------------------------------------------------

SRC = VALUE.format(include="", v=7)


@pytest.mark.parametrize("option", ["cflags", "ldflags", "include_dirs", "libraries"])
def test_a_nul_byte_in_a_word_is_a_value_error(tmp_path, cache, option):
    word = {"include_dirs": str(tmp_path) + "\0/x", "libraries": "m\0x"}.get(option, "-DX=1\0y")
    for value in ([word], (word,)):
        with pytest.raises(ValueError, match=rf"{option}\[0\] holds a NUL byte"):
            dlx.load_inline(SRC, name="nul", **{option: value})
    assert not (cache / "kernels").exists() or not list((cache / "kernels").glob("*.so"))


def test_a_source_that_is_not_a_path_is_a_type_error_naming_it(tmp_path, cache):
    good = tmp_path / "k.c"
    good.write_text(SRC)
    with pytest.raises(TypeError, match=r"sources\[1\] must be a str or a path, not int: 3"):
        dlx.build([good, 3])
    with pytest.raises(TypeError, match="sources must be a str or a sequence of str, not int"):
        dlx.build(3)
    with pytest.raises(TypeError, match="not bytes"):
        dlx.build(bytes(good))
    with pytest.raises(ValueError, match=r"sources\[0\] holds a NUL byte"):
        dlx.build([str(good) + "\0.c"])


ODD = ["a b", "nl\nx", "x#y$z", "back\\ slash", "tab\tx", "colon: x", "tr\\ail", "q'uo\"te"]


@pytest.mark.parametrize("odd", ODD, ids=[repr(o) for o in ODD])
def test_odd_paths_round_trip_through_the_build(tmp_path, monkeypatch, odd):
    """The source's folder, an include folder and DLX_CACHE_DIR all hold `odd`: the build
    reads the compiler's dependency file back, keys on every header, loads warm, and
    rebuilds when a header in the odd folder changes."""
    src_dir, inc, cache = tmp_path / odd, tmp_path / ("inc " + odd), tmp_path / ("cache " + odd)
    src_dir.mkdir()
    inc.mkdir()
    monkeypatch.setenv("DLX_CACHE_DIR", str(cache))
    (inc / "v.h").write_text("#define V 7\n")
    (src_dir / "w.h").write_text("#define W 1\n")
    src = src_dir / "k.c"
    src.write_text(VALUE.format(include='#include "v.h"\n#include "w.h"\n', v="V + W"))
    path = dlx.build(src, name="k", include_dirs=[inc])
    assert os.path.dirname(path) == str(cache / "kernels")
    assert value_of(path) == 8
    assert dlx.build(src, name="k", include_dirs=[inc]) == path  # warm
    (src_dir / "w.h").write_text("#define W 2\n")  # a header in the odd folder: rebuilt
    again = dlx.build(src, name="k", include_dirs=[inc])
    assert again != path and value_of(again) == 9
    (inc / "v.h").write_text("#define V 8\n")
    assert value_of(dlx.build(src, name="k", include_dirs=[inc])) == 10
