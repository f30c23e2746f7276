"""Kernels written in C++ (issue 7, item 7): an exception thrown inside a DLX_KERNEL must
reach Python as a RuntimeError naming the kernel and what(), never terminate the process."""
import os
import shutil
import subprocess

import pytest

import dlx
from conftest import run_python

SOURCE = r"""
#include <dlx/dlx.h>
#include <stdexcept>
#include <vector>

DLX_KERNEL(throws_runtime_error) {
  (void)call;
  throw std::runtime_error("boom from C++");
}

DLX_KERNEL(throws_bad_alloc) {
  std::vector<char> v;
  v.reserve(v.max_size());  // std::length_error or std::bad_alloc
  return dlx_return_int(call, (int64_t)v.size());
}

DLX_KERNEL(throws_int) {
  (void)call;
  throw 42;
}

DLX_KERNEL(plain) {
  int64_t v;
  if (dlx_arg_int(call, 0, &v)) return -1;
  return dlx_return_int(call, v * 2);
}

DLX_KERNEL(fails_normally) { return dlx_error(call, "ValueError", "a plain error"); }
"""


@pytest.fixture(scope="module")
def cxx_lib(tmp_path_factory):
    cxx = shutil.which(os.environ.get("CXX") or "c++")
    if not cxx:
        pytest.skip("no C++ compiler")
    d = tmp_path_factory.mktemp("cxx")
    src, out = d / "k.cc", d / "k.so"
    src.write_text(SOURCE)
    subprocess.run([cxx, "-std=c++17", "-O1", "-shared", "-fPIC", "-Wall", "-Wextra", "-Werror",
                    "-I", dlx.include_dir(), str(src), "-o", str(out)], check=True)
    return out


@pytest.mark.parametrize("kernel, what", [
    ("throws_runtime_error", "boom from C++"),
    ("throws_bad_alloc", ""),
    ("throws_int", "not a std::exception")])
def test_exception_becomes_runtime_error(cxx_lib, kernel, what):
    # In a child: before the fix the process died in std::terminate.
    r = run_python("import dlx, sys\n"
                   f"lib = dlx.load({str(cxx_lib)!r})\n"
                   "try:\n"
                   f"    lib.{kernel}()\n"
                   "except RuntimeError as e:\n"
                   "    print('RuntimeError:', e)\n"
                   "print('alive', lib.plain(21))\n", check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.splitlines()
    assert lines[0].startswith("RuntimeError:") and kernel in lines[0] and what in lines[0], lines
    assert lines[-1] == "alive 42"


def test_cxx_kernels_behave_like_c_ones(cxx_lib):
    lib = dlx.load(cxx_lib)
    assert lib.plain(4) == 8
    with pytest.raises(ValueError, match="a plain error"):
        lib.fails_normally()
