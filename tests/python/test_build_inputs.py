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
