#!/usr/bin/env bash
# The install test (make test-install): dlx as a user gets it. Builds the wheel with the
# interpreter's own pip, installs it into a fresh venv (system site packages, so the
# interpreter's numpy and torch are seen), and from a temporary folder outside the tree,
# with no PYTHONPATH, builds examples/saxpy.c three ways (cc with `python -m dlx --cflags`,
# a CMake project using find_package(dlx) and dlx_add_kernels, pkg-config), plus
# examples/saxpy_cuda.cu through CMake when a CUDA compiler is there, and checks each
# library from numpy and torch (check.py).
# Usage: bash tests/install/run.sh [PYTHON] [WORKDIR]   (default: python3, build/install-test)
# WORKDIR keeps the wheel's CMake build and the torch addon cache between runs, so a rerun
# only recompiles what changed; the venv is made anew every run.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
PY=${1:-python3}
top=${2:-$src/build/install-test}
mkdir -p "$top"
top=$(cd "$top" && pwd)
unset PYTHONPATH DLX_BUILD_DIR DLX_BACKEND DLX_DISABLE_TORCH_ADDON DLX_TORCH_TABLE
step() { printf 'install test: %s\n' "$*"; }

rm -rf "$top/venv" "$top/dist" "$top/build-cache"
step "venv from $PY ($("$PY" -c 'import sys; print(sys.version.split()[0])'))"
"$PY" -m venv --system-site-packages "$top/venv"
vpy=$top/venv/bin/python
# The build backend from PyPI (pip's cache after the first run); the wheel is built against
# the interpreter's own numpy, so --no-build-isolation (python -m build --wheel and plain
# `pip install .` use an isolated build environment instead).
"$vpy" -m pip install -q --disable-pip-version-check "scikit-build-core>=0.10" 2>&1 |
  grep -v 'is ignored: it is neither a file nor a directory' || true
step "wheel"
"$vpy" -m pip wheel -q --disable-pip-version-check --no-build-isolation --no-deps \
  --config-settings=build-dir="$top/wheel-build" -w "$top/dist" "$src"
"$vpy" -m pip install -q --disable-pip-version-check --no-deps "$top"/dist/dlx-*.whl

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$src/examples/saxpy.c" "$src/examples/saxpy_cuda.cu" "$src/tests/install/check.py" "$work/"
cd "$work"
# Nothing of the source tree may be importable from here.
"$vpy" - <<'PY'
import os, sys
import dlx
assert os.path.abspath(dlx.__file__).startswith(sys.prefix + os.sep), (dlx.__file__, sys.prefix)
assert "torch" not in sys.modules, "import dlx imported torch"
print(f"install test: dlx from {os.path.dirname(dlx.__file__)}")
PY

step "cc \$(python -m dlx --cflags)"
mkdir cc
cc -shared -fPIC -Wall -Wextra -Werror $("$vpy" -m dlx --cflags) saxpy.c -o cc/saxpy.so

step "pkg-config --cflags dlx"
mkdir pc
PKG_CONFIG_PATH=$("$vpy" -m dlx --pkgconfig-dir) pkg-config --exists --print-errors dlx
cc -shared -fPIC -Wall -Wextra -Werror \
  $(PKG_CONFIG_PATH=$("$vpy" -m dlx --pkgconfig-dir) pkg-config --cflags dlx) saxpy.c -o pc/saxpy.so

step "CMake: find_package(dlx CONFIG) + dlx_add_kernels"
mkdir -p proj
cp saxpy.c saxpy_cuda.cu proj/
# helper.c: a non-static function the library must not export (hidden visibility).
printf 'int dlx_install_test_helper(void) { return 7; }\n' > proj/helper.c
cat > proj/CMakeLists.txt <<'CMAKE'
cmake_minimum_required(VERSION 3.18)
project(dlx_install_test LANGUAGES C)
find_package(dlx 0.1 CONFIG REQUIRED)
dlx_add_kernels(saxpy SOURCES saxpy.c helper.c)
include(CheckLanguage)
check_language(CUDA)
if(CMAKE_CUDA_COMPILER)
  enable_language(CUDA)
  dlx_add_kernels(saxpy_cuda SOURCES saxpy_cuda.cu)
endif()
CMAKE
cmake -S proj -B proj/build -DCMAKE_PREFIX_PATH="$("$vpy" -m dlx --cmake-dir)" >proj/configure.log ||
  { cat proj/configure.log; exit 1; }
cmake --build proj/build -j2 >proj/build.log || { cat proj/build.log; exit 1; }
if nm -D --defined-only proj/build/saxpy.so | grep -q dlx_install_test_helper; then
  echo "install test: dlx_add_kernels did not hide a non-kernel symbol" >&2
  exit 1
fi
step "python -m dlx build (the installed package compiles, headers from inside it)"
mkdir built
DLX_CACHE_DIR=$top/build-cache "$vpy" -m dlx build saxpy.c -o built/saxpy.so --cflags "-Wall -Werror"

cuda=()
if [ -f proj/build/saxpy_cuda.so ]; then cuda=(--cuda proj/build/saxpy_cuda.so); fi

step "load and call (check.py)"
DLX_CACHE_DIR=$top/addon-cache "$vpy" check.py cc/saxpy.so pc/saxpy.so proj/build/saxpy.so built/saxpy.so "${cuda[@]}"
step "passed"
