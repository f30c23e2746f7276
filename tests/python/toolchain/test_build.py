"""dlx.build / dlx.load_inline / python -m dlx build (issue 12): C, C++ and CUDA sources
compiled into the trusted cache, keyed by every header they include, rebuilt when
anything changes (or the library was tampered with), built once by concurrent processes,
and loaded warm without running a compiler.

Compiler processes are counted with a wrapper compiler (CC=wrapper) that appends one
line per run to a log and then runs the real compiler."""
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import pytest

from conftest import run_python

import dlx

ADD = r"""
#include <dlx/dlx.h>
DLX_KERNEL(add) {
  int64_t a, b;
  if (dlx_arg_int(call, 0, &a) || dlx_arg_int(call, 1, &b)) return -1;
  return dlx_return_int(call, a + b);
}
"""


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    """A fresh cache folder for this test, for this process and its children."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("DLX_CACHE_DIR", str(folder))
    return folder


def wrapper(tmp_path, real="cc", before="", name="cc-wrap"):
    """A compiler that logs each run (one line: its arguments) to <tmp>/<name>.log, runs
    `before` (shell) when compiling (-c), then execs the real compiler."""
    log = tmp_path / f"{name}.log"
    w = tmp_path / name
    w.write_text("#!/bin/sh\n"
                 f'echo "$*" >> "{log}"\n'
                 f'case " $* " in *" -c "*) {before} ;; esac\n'
                 f'exec {real} "$@"\n')
    w.chmod(0o755)
    return w, log


def runs(log, what="-c "):
    """How many compile runs (or, with what='', any runs) the log holds."""
    if not log.exists():
        return 0
    return sum(1 for line in log.read_text().splitlines() if what in f"{line} ")


def test_load_inline_c_builds_once_and_loads_warm(tmp_path, cache, monkeypatch):
    cc, log = wrapper(tmp_path)
    monkeypatch.setenv("CC", str(cc))
    lib = dlx.load_inline(ADD, name="adder")
    assert lib.add(2, 3) == 5
    assert runs(log) == 1 and runs(log, "--version") == 1 and runs(log, "-shared") == 1
    cold_runs = runs(log, "")
    built = pathlib.Path(lib.path)
    assert built.parent == cache / "kernels" and built.name.startswith("libadder-")
    # the same text in this process: the same library, no compiler
    assert dlx.load_inline(ADD, name="adder") is lib
    # and in a fresh process: one stat-and-hash pass, no compiler process at all
    r = run_python(f"import dlx; print(dlx.load_inline({ADD!r}, name='adder').add(40, 2))",
                   env={"CC": str(cc)})
    assert r.stdout.strip() == "42"
    assert runs(log, "") == cold_runs  # still only the first build's runs
    # an edited source is another build
    assert dlx.load_inline(ADD.replace("a + b", "a - b"), name="adder").add(2, 3) == -1
    assert runs(log) == 2


def test_warm_path_starts_no_process_at_all(tmp_path, cache):
    """strace -f counts every execve of a warm load_inline: only the interpreter's own."""
    strace = shutil.which("strace")
    if not strace:
        pytest.skip("strace is not installed")
    with open("/proc/self/status") as f:  # under strace (fresh-deps) or gdb: no second tracer
        tracer = next(int(line.split()[1]) for line in f if line.startswith("TracerPid:"))
    if tracer:
        pytest.skip(f"this process is traced already (by pid {tracer}): strace cannot attach")
    dlx.load_inline(ADD, name="warm")
    env = dict(os.environ, PYTHONPATH=os.environ.get("PYTHONPATH", ""))
    from conftest import PYPATH

    env["PYTHONPATH"] = PYPATH
    out = tmp_path / "trace"
    code = f"import dlx; assert dlx.load_inline({ADD!r}, name='warm').add(1, 1) == 2"
    subprocess.run([strace, "-f", "-qq", "-e", "trace=execve,clone,clone3,fork,vfork", "-o",
                    str(out), sys.executable, "-c", code], env=env, check=True, timeout=120)
    trace = out.read_text()
    execs = [line for line in trace.splitlines() if "execve(" in line]
    assert len(execs) == 1, trace  # python itself


def test_build_returns_a_path_and_dlx_load_checks_it(tmp_path, cache):
    src = tmp_path / "mul.c"
    src.write_text(ADD.replace("DLX_KERNEL(add)", "DLX_KERNEL(mul)").replace("a + b", "a * b"))
    path = dlx.build(src)
    assert os.path.basename(path).startswith("libmul-") and path.endswith(".so")
    assert dlx.build(str(src)) == path
    lib = dlx.load(path)
    assert lib.mul(6, 7) == 42
    assert lib.path == path


def test_cxx_compiles_with_the_cxx_compiler_and_links_its_runtime(tmp_path, cache, monkeypatch):
    cxx, log = wrapper(tmp_path, real="c++", name="cxx-wrap")
    monkeypatch.setenv("CXX", str(cxx))
    src = tmp_path / "words.cpp"
    src.write_text(textwrap.dedent(r"""
        #include <dlx/dlx.h>
        #include <string>
        #include <vector>
        #include <stdexcept>
        static std::vector<std::string> words = {"zero", "one", "two"};
        DLX_KERNEL(word_len) {
          int64_t i;
          if (dlx_arg_int(call, 0, &i)) return -1;
          try {
            return dlx_return_int(call, (int64_t)words.at((size_t)i).size());
          } catch (const std::out_of_range &) {
            return dlx_error(call, "IndexError", "no word %lld", (long long)i);
          }
        }
        """))
    lib = dlx.load(dlx.build([src]))
    assert lib.word_len(2) == 3
    with pytest.raises(IndexError, match="no word 7"):
        lib.word_len(7)
    assert runs(log) == 1  # compiled by $CXX
    assert any(line.startswith("-shared") for line in log.read_text().splitlines())  # linked too


@pytest.fixture(scope="module")
def nvcc():
    if "libasan" in os.environ.get("LD_PRELOAD", ""):
        pytest.skip("nvcc's own tools crash with the ASan runtime preloaded (make sanitize)")
    for cand in (os.path.join(os.environ.get("CUDA_HOME", "/nonexistent"), "bin", "nvcc"),
                 "/usr/local/cuda/bin/nvcc", shutil.which("nvcc") or ""):
        if cand and os.access(cand, os.X_OK):
            return cand
    pytest.skip("no nvcc")


def test_cuda_and_c_sources_in_one_library(tmp_path, cache, nvcc, capfd):
    (tmp_path / "bonus.h").write_text("#define BONUS 100\n")
    cu = tmp_path / "scale.cu"
    cu.write_text(textwrap.dedent(r"""
        #include <dlx/dlx.h>
        #include "bonus.h"
        __global__ void twice(float *x) { x[threadIdx.x] *= 2; }  // compiled, never launched
        DLX_KERNEL(host_side) {  // runs on the CPU: no GPU here
          int64_t a;
          if (dlx_arg_int(call, 0, &a)) return -1;
          return dlx_return_int(call, a + BONUS);
        }
        """))
    c = tmp_path / "plain.c"
    c.write_text(ADD)
    path = dlx.build([cu, c], name="mixed", include_dirs=[tmp_path], verbose=True)
    err = capfd.readouterr().err
    assert "nvcc" in err and "-Xcompiler -fPIC" in err
    # cuda_arch=None without a GPU: one default architecture plus PTX, and it says so
    assert "sm_75 plus PTX" in err and "no GPU could be asked" in err
    lib = dlx.load(path)
    assert lib.host_side(1) == 101 and lib.add(1, 2) == 3


def test_compile_error_is_a_build_error_with_command_and_log(cache):
    bad = "#include <dlx/dlx.h>\nDLX_KERNEL(broken) { return undefined_thing; }\n"
    with pytest.raises(dlx.BuildError) as e:
        dlx.load_inline(bad, name="broken")
    assert isinstance(e.value, RuntimeError)
    msg = str(e.value)
    assert "building broken failed" in msg and "exited with status" in msg
    assert "command: " in msg and " -c " in msg  # the command that failed
    assert "undefined_thing" in msg and "error" in msg  # its first errors
    assert "undefined_thing" in e.value.log and e.value.command in msg


@pytest.mark.parametrize("var,lang,package", [("CC", "c", "gcc"), ("CXX", "c++", "g++")])
def test_missing_compiler_names_it_and_its_package(cache, monkeypatch, var, lang, package):
    monkeypatch.setenv(var, "/nonexistent/dlx-no-such-compiler")
    with pytest.raises(dlx.BuildError) as e:
        dlx.load_inline(ADD, language=lang, name="nocc")
    msg = str(e.value)
    assert "/nonexistent/dlx-no-such-compiler" in msg
    assert f"Debian package {package}" in msg and var in msg


def test_editing_an_included_header_rebuilds(tmp_path, cache, monkeypatch):
    cc, log = wrapper(tmp_path)
    monkeypatch.setenv("CC", str(cc))
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "value.h").write_text("#define VALUE 1\n")
    (inc / "outer.h").write_text('#include "value.h"\n')  # included through another header
    src = "#include <dlx/dlx.h>\n#include \"outer.h\"\n" \
          "DLX_KERNEL(value) { return dlx_return_int(call, VALUE); }\n"
    assert dlx.load_inline(src, name="hdr", include_dirs=[inc]).value() == 1
    assert dlx.load_inline(src, name="hdr", include_dirs=[inc]).value() == 1
    assert runs(log) == 1
    (inc / "value.h").write_text("#define VALUE 2\n")
    assert dlx.load_inline(src, name="hdr", include_dirs=[inc]).value() == 2
    assert runs(log) == 2
    # flags are in the key too
    assert dlx.load_inline(src, name="hdr", include_dirs=[inc], cflags=["-DX=1"]).value() == 2
    assert runs(log) == 3


def test_tampered_library_is_rebuilt_not_loaded(tmp_path, cache, monkeypatch):
    cc, log = wrapper(tmp_path)
    monkeypatch.setenv("CC", str(cc))
    path = pathlib.Path(dlx.load_inline(ADD, name="tamper").path)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # inside the sealed bytes
    # a new file over the name: this process has the old one mapped
    (tmp_path / "evil.so").write_bytes(bytes(data))
    (tmp_path / "evil.so").chmod(0o755)
    os.replace(tmp_path / "evil.so", path)
    # dlx.load refuses it, by the seal; cache list says so
    with pytest.raises(ImportError, match="seal"):
        dlx.load(path)
    r = run_python("from dlx.__main__ import main; main(['cache', 'list'])")
    assert f"{path.name}  {path.stat().st_size} bytes  refused: " in r.stdout, r.stdout
    assert "seal" in r.stdout
    # a fresh process rebuilds it rather than loading it
    r = run_python(f"import dlx; print(dlx.load_inline({ADD!r}, name='tamper').add(2, 2))",
                   env={"CC": str(cc)})
    assert r.stdout.strip() == "4"
    assert runs(log) == 2
    assert dlx.load(path).add(1, 1) == 2  # whole again


def test_four_processes_build_once(tmp_path, cache):
    # the compile is slow, so the others find the lock held and wait for it
    cc, log = wrapper(tmp_path, before="sleep 2")
    code = f"import dlx; print(dlx.load_inline({ADD!r}, name='race').add(20, 22))"
    from conftest import PYPATH

    env = dict(os.environ, PYTHONPATH=PYPATH, CC=str(cc))
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(4)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, outs
    assert [o.strip() for o, _ in outs] == ["42"] * 4
    assert runs(log) == 1
    waits = [e.count("waiting for another build of") for _, e in outs]
    assert max(waits) == 1 and sum(waits) >= 1, outs  # said once by each that waited


def test_hung_compiler_obeys_build_timeout(tmp_path, cache):
    cc, log = wrapper(tmp_path, before="sleep 60")
    r = run_python(f"import dlx\ntry:\n dlx.load_inline({ADD!r}, name='slow')\n"
                   "except dlx.BuildError as e:\n print('BuildError', e)\n",
                   env={"CC": str(cc), "DLX_BUILD_TIMEOUT": "1.5"}, timeout=60)
    assert "BuildError" in r.stdout and "timed out" in r.stdout
    assert "DLX_BUILD_TIMEOUT" in r.stdout
    # a progress line while it ran past a second
    assert r.stderr.count("dlx: building slow") == 1, r.stderr
    assert not list((cache / "kernels").glob(".work-*"))  # its work folder is gone


def test_bad_arguments_are_clear_errors(tmp_path, cache):
    with pytest.raises(ValueError, match="not usable in a file name"):
        dlx.load_inline(ADD, name="../evil")
    with pytest.raises(ValueError, match="unknown language"):
        dlx.load_inline(ADD, language="fortran")
    with pytest.raises(TypeError, match="unexpected keyword"):
        dlx.load_inline(ADD, optimise=True)
    with pytest.raises(TypeError, match="source must be a str"):
        dlx.load_inline(b"int x;")
    with pytest.raises(FileNotFoundError):
        dlx.build(tmp_path / "missing.c")
    odd = tmp_path / "kernel.f90"
    odd.write_text("")
    with pytest.raises(ValueError, match="cannot tell the language"):
        dlx.build(odd)
    with pytest.raises(ValueError, match="not an architecture"):
        dlx.load_inline(ADD, language="cuda", cuda_arch="volta")
    with pytest.raises(TypeError, match="cflags"):
        dlx.load_inline(ADD, cflags=3)


def test_command_line_build_and_cache_list_clean(tmp_path, cache):
    src = tmp_path / "cli.c"
    src.write_text(ADD.replace("a + b", "a + b + EXTRA"))
    out = tmp_path / "out.so"
    r = run_python("import sys; from dlx.__main__ import main; "
                   f"sys.exit(main(['build', {str(src)!r}, '-o', {str(out)!r}, "
                   "'--cflags', '-DEXTRA=10']))")
    assert r.stdout.strip() == str(out)
    assert dlx.load(out).add(1, 2) == 13
    r = run_python("from dlx.__main__ import main; main(['cache', 'list'])")
    assert str(src) in r.stdout and "libcli-" in r.stdout and " ok" in r.stdout, r.stdout
    bad = tmp_path / "bad.c"
    bad.write_text("int f( {")
    r = run_python(f"import sys; from dlx.__main__ import main; sys.exit(main(['build', {str(bad)!r}]))",
                   check=False)
    assert r.returncode == 1 and "building bad failed" in r.stderr
    r = run_python("from dlx.__main__ import main; main(['cache', 'clean'])")
    assert "removed" in r.stdout
    assert not list((cache / "kernels").iterdir())


def test_doctor_names_the_compilers(monkeypatch):
    r = run_python("from dlx.__main__ import main; main(['doctor'])",
                   env={"CC": "/nonexistent/dlx-cc", "DLX_DISABLE_TORCH_ADDON": "1"})
    assert "dlx.build c: /nonexistent/dlx-cc -> NOT FOUND (install the Debian package gcc)" \
        in r.stdout, r.stdout
    assert "dlx.build c++: " in r.stdout and "dlx.build cuda: " in r.stdout


def test_waiting_for_a_held_lock_says_so_once_and_gives_up(cache):
    import fcntl

    lib = pathlib.Path(dlx.load_inline(ADD, name="held").path)
    lib.unlink()  # so the next load_inline must build, under the lock
    (lock,) = (cache / "kernels").glob("held-*.lock")
    with open(lock, "w") as held:  # another process's build in progress
        fcntl.flock(held, fcntl.LOCK_EX)
        r = run_python(f"import dlx\ntry:\n dlx.load_inline({ADD!r}, name='held')\n"
                       "except dlx.BuildError as e:\n print('BuildError', e)\n",
                       env={"DLX_BUILD_TIMEOUT": "1.5"}, timeout=60)
    assert r.stderr.count("waiting for another build of") == 1, r.stderr
    assert "BuildError" in r.stdout and "gave up after 1.5 s" in r.stdout
    assert "DLX_BUILD_TIMEOUT" in r.stdout
    assert not lib.exists()  # it never compiled


def test_a_header_newly_shadowing_an_included_one_rebuilds(tmp_path, cache, monkeypatch):
    """`#include "value.h"` found in the second -I folder; a value.h added later to the
    first folder (or next to the source) is what the compiler would now read: the warm
    check must notice although no file it hashed changed."""
    cc, log = wrapper(tmp_path)
    monkeypatch.setenv("CC", str(cc))
    first, second, srcdir = tmp_path / "first", tmp_path / "second", tmp_path / "src"
    for d in (first, second, srcdir):
        d.mkdir()
    (second / "value.h").write_text("#define VALUE 1\n")
    (second / "outer.h").write_text("#include <sub/deep.h>\n")
    (second / "sub").mkdir()
    (second / "sub" / "deep.h").write_text('#include "value.h"\n')
    src = srcdir / "k.c"
    src.write_text("#include <dlx/dlx.h>\n#include \"outer.h\"\n"
                   "DLX_KERNEL(value) { return dlx_return_int(call, VALUE); }\n")

    def value():
        return dlx.load(dlx.build([src], name="shadow", include_dirs=[first, second])).value()

    assert value() == 1 and value() == 1
    assert runs(log) == 1
    (first / "value.h").write_text("#define VALUE 2\n")  # shadows second/value.h
    assert value() == 2
    assert runs(log) == 2
    (first / "sub").mkdir()
    (first / "sub" / "deep.h").write_text("#define VALUE 3\n")  # shadows second/sub/deep.h
    assert value() == 3
    assert runs(log) == 3
    (srcdir / "outer.h").write_text("#define VALUE 4\n")  # the source's folder comes first
    assert value() == 4
    assert runs(log) == 4
    assert value() == 4 and runs(log) == 4  # and warm again
