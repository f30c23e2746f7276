#!/usr/bin/env bash
# Creates .venv, the second test environment: today's frameworks (torch 2.13 with its
# native exchange table, numpy 2, JAX, tvm-ffi) under the machine's default python3,
# beside Debian's /usr/bin/python3 (torch 1.13, numpy 1.24), and dlx installed into it.
#
# 1. The frameworks, pinned in scripts/venv-requirements.txt. The venv holds a stamp with
#    the hash of that file; when it matches and the venv's interpreter runs, pip is not run.
# 2. dlx from this tree, installed with pip (scikit-build-core, the wheel users get). Its
#    CMake build is BUILD_DIR (build-venv/), with the test kernels and fixtures on, so one
#    compile serves the install and the venv's tests (not the C tests: build/ runs those).
#    pip runs only when a file of the tree that the build reads is newer than
#    BUILD_DIR/.dlx-installed (or the venv was made anew).
# Usage: scripts/setup_venv.sh [VENV_DIR [BUILD_DIR [REQUIREMENTS]]]
#   (default: .venv, build-venv, scripts/venv-requirements.txt; the base interpreter is
#   DLX_VENV_PYTHON, default python3: `make test-python-newer` makes .venv-newer this way)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${1:-$root/.venv}
build=${2:-$root/build-venv}
req=${3:-$root/scripts/venv-requirements.txt}
base=${DLX_VENV_PYTHON:-python3}
stamp=$venv/.dlx-requirements.sha256
# (pip warns about every package the machine's local indexes lack: not news)
quiet_pip() { "$venv/bin/python" -m pip "$@" 2> >(grep -v 'is ignored: it is neither' >&2); }

# A venv made from another interpreter than the base asked for now (DLX_VENV_PYTHON changed,
# a newer CPython appeared) is made anew, and so is its build, compiled for the old one.
ident='import sys; print(sys.base_prefix, sys.version)'
if [ -x "$venv/bin/python" ] &&
   [ "$("$venv/bin/python" -c "$ident" 2>/dev/null)" != "$("$base" -c "$ident")" ]; then
  echo "setup: $venv was made from another interpreter than $base: making it anew" >&2
  rm -rf "$venv" "$build"
fi
want=$(sha256sum "$req" | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] || ! "$venv/bin/python" -c '' 2>/dev/null; then
  if ! "$venv/bin/python" -c '' 2>/dev/null; then  # absent, or its base interpreter is gone
    echo "setup: creating $venv from $(command -v "$base") ($("$base" --version))" >&2
    "$base" -m venv --clear "$venv"
  fi
  echo "setup: installing $req into $venv$(grep -q '^torch==' "$req" &&
    echo ' (torch comes from the local CPU wheel)')" >&2
  quiet_pip install -q --disable-pip-version-check -r "$req"
  echo "$want" >"$stamp"
fi

# 3. dlx's torch addon for the venv's torch, built ahead into dlx's cache (DLX_CACHE_DIR,
#    else ~/.cache/dlx): where torch ships its own table, dlx.torch.install() takes the addon
#    by default only when the cache holds it, and never compiles on a call. A cached addon
#    is only loaded (a second); an interpreter without torch (.venv-newer) skips it.
build_addon() {
  if "$venv/bin/python" -c 'import torch' 2>/dev/null; then
    "$venv/bin/python" -m dlx build-addon >/dev/null ||
      echo "setup: python -m dlx build-addon failed (above); torch's own table serves" >&2
  fi
}

installed=$build/.dlx-installed
inputs=("$root/CMakeLists.txt" "$root/pyproject.toml" "$stamp" "$root/include" "$root/src"
        "$root/python" "$root/cmake" "$root/tests/kernels" "$root/tests/fixtures" "$root/examples")
if [ -f "$installed" ] && [ -z "$(find "${inputs[@]}" -type f -newer "$installed" \
                                 -not -name '*.pyc' -print -quit)" ]; then
  build_addon
  exit 0
fi
# A build folder configured by hand (make's generator) cannot be reused by pip's (Ninja).
if [ -f "$build/CMakeCache.txt" ] && ! grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' "$build/CMakeCache.txt"; then
  rm -rf "$build"
fi
echo "setup: installing dlx from $root into $venv (build: $build)" >&2
rm -f "$venv"/lib/python*/site-packages/dlx-build.pth  # how older setups linked a build
mkdir -p "$build"
touch "$installed.next"  # a file edited during the build is newer than the stamp
CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} quiet_pip install -q \
  --disable-pip-version-check --no-build-isolation --no-deps \
  --config-settings=build-dir="$build" --config-settings=cmake.define.DLX_BUILD_TESTS=ON \
  --config-settings=cmake.define.DLX_BUILD_C_TESTS=OFF "$root"
mv "$installed.next" "$installed"
build_addon
