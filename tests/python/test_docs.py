"""The examples in README.md and docs/*.md work as shown: every code block marked with a
`<!-- doc-test: ... -->` comment on the line before it is run (docs/development.md lists
the markers). C files are compiled with the real compiler and loaded by the Python blocks
that follow; CUDA files are compiled with nvcc (no GPU needed); blocks that need a GPU are
compiled as Python only."""
import ast
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from conftest import PYPATH, ROOT

DOCS = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
MARKER = re.compile(r"^<!-- doc-test: (.*?) -->\s*$")
FENCE = re.compile(r"^```(\w*)\s*$")
EXPECT = re.compile(r"^(?P<code>\S.*?)\s+# (?P<kind>[A-Z]\w*(?:Error|Exception)): (?P<text>.+)$")


def blocks(doc):
    """[(line, action, args, text)] of the doc's marked blocks, in order."""
    lines = doc.read_text().splitlines()
    out = []
    for i, line in enumerate(lines):
        m = MARKER.match(line)
        if not m:
            continue
        assert i + 1 < len(lines) and FENCE.match(lines[i + 1]), \
            f"{doc.name}:{i + 1}: a doc-test marker must be followed by a ``` block"
        end = next(j for j in range(i + 2, len(lines)) if lines[j].startswith("```"))
        action, *args = m.group(1).split()
        out.append((i + 2, action, args, "\n".join(lines[i + 2:end]) + "\n"))
    return out


CASES = [(doc, *b) for doc in DOCS for b in blocks(doc)]


def test_the_docs_carry_their_markers():
    marked = {doc.name for doc, *_ in CASES}
    assert {"README.md", "guide.md", "signatures.md"} <= marked
    assert {a for _, _, a, _, _ in CASES} <= {"file", "sh", "python", "python-syntax"}


@pytest.fixture(scope="session")
def doc_dirs(tmp_path_factory):
    """One folder per document (its blocks build on each other, in order), and a bin folder
    whose `python` is the interpreter under test."""
    root = tmp_path_factory.mktemp("docs")
    bin_dir = root / "bin"
    bin_dir.mkdir()
    # a script, not a link: a venv's interpreter finds its venv only by the path it is run as.
    # Under `make sanitize` only the interpreter gets the sanitizer's LD_PRELOAD: a compiler
    # the docs run (nvcc) crashes with it.
    preload = os.environ.get("LD_PRELOAD", "")
    (bin_dir / "python").write_text(
        "#!/bin/sh\n" + (f"LD_PRELOAD='{preload}'; export LD_PRELOAD\n" if preload else "") +
        f'exec "{sys.executable}" "$@"\n')
    (bin_dir / "python").chmod(0o755)
    dirs = {}

    def get(doc):
        if doc.name not in dirs:
            dirs[doc.name] = root / doc.stem
            dirs[doc.name].mkdir()
        return dirs[doc.name]

    get.env = dict(os.environ, PYTHONPATH=PYPATH,
                   PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    get.env.pop("LD_PRELOAD", None)
    get.python = str(bin_dir / "python")
    return get


def _run(cmd, folder, env, **kw):
    r = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True, timeout=300,
                       **kw)
    assert r.returncode == 0, f"{cmd} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
    return r


def _expectations(code):
    """A line `expr  # SomeError: text` becomes a check that expr raises SomeError with
    text in its message."""
    out = []
    for line in code.splitlines():
        m = EXPECT.match(line)
        if m:
            try:
                ast.parse(m.group("code"))
            except SyntaxError:
                m = None
        if not m:
            out.append(line)
            continue
        kind, text = m.group("kind"), m.group("text")
        out += ["try:", f"    {m.group('code')}", f"except {kind} as _doc_e:",
                f"    assert {text!r} in str(_doc_e), (str(_doc_e), {text!r})",
                "else:", f"    raise AssertionError('no {kind}: ' + {text!r})"]
    return "\n".join(out) + "\n"


def _torch_version():
    """(major, minor) of this interpreter's torch, asked in a child (importing torch here
    would slow every other test of the session)."""
    r = subprocess.run([sys.executable, "-c", "import torch; print(torch.__version__)"],
                       capture_output=True, text=True, timeout=300)
    parts = r.stdout.strip().split("+")[0].split(".")[:2] if r.returncode == 0 else []
    return tuple(int("".join(c for c in p if c.isdigit()) or 0) for p in parts) or None


def _compile_file(path, folder, env):
    import dlx

    if path.suffix == ".c":
        _run(["cc", "-std=c11", "-c", "-fPIC", "-Wall", "-Wextra", "-Werror", *dlx.cflags().split(),
              str(path), "-o", os.devnull], folder, env)
    elif path.suffix == ".cu":
        nvcc = shutil.which("nvcc") or next(
            (str(p) for p in (pathlib.Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "bin" /
                              "nvcc",) if p.exists()), None)
        if nvcc is None:
            pytest.skip("nvcc is not installed: the CUDA example is not compiled")
        _run([nvcc, "-c", "-Xcompiler", "-fPIC", f"-I{dlx.include_dir()}", str(path), "-o",
              os.devnull], folder, env)


@pytest.mark.parametrize("doc,line,action,args,text", CASES,
                         ids=[f"{d.name}:{n}:{a}" for d, n, a, _, _ in CASES])
def test_doc_block(doc, line, action, args, text, doc_dirs):
    folder, env = doc_dirs(doc), doc_dirs.env
    if action == "file":
        path = folder / args[0]
        path.write_text(text)
        _compile_file(path, folder, env)
    elif action == "sh":
        for need in (a.split("=", 1)[1] for a in args if a.startswith("needs=")):
            if shutil.which(need) is None:
                pytest.skip(f"{need} is not installed")
        _run(["bash", "-e", "-c", text], folder, env)
    elif action == "python-syntax":
        compile(text, f"{doc.name}:{line}", "exec")
    elif action == "python":
        for need in (a.split("=", 1)[1] for a in args if a.startswith("needs=torch-")):
            want = tuple(int(p) for p in need.split("-", 1)[1].split("."))
            torch_spec = __import__("importlib.util").util.find_spec("torch")
            have = _torch_version() if torch_spec else None
            if have is None or have < want:
                pytest.skip(f"the example needs torch {need.split('-', 1)[1]} or newer")
        for module in ("torch", "numpy", "dask", "distributed", "jax"):
            if re.search(rf"^\s*import .*\b{module}\b", text, re.M) and \
                    __import__("importlib.util").util.find_spec(module) is None:
                pytest.skip(f"the example imports {module}, which this interpreter lacks")
        code = _expectations(text)
        compile(code, f"{doc.name}:{line}", "exec")
        _run([doc_dirs.python, "-c", code], folder, env, stdin=subprocess.DEVNULL)
