#!/usr/bin/env bash
# Installs what dlx needs from Debian's archive, only when something is missing.
# Idempotent: a machine that has everything runs no apt-get at all.
# The second environment, .venv (scripts/setup_venv.sh), is made by `make venv`.
set -euo pipefail
# ninja-build: tvm-ffi's load_inline (venv tests, bench); clang + libclang-rt-14-dev: fuzzing
pkgs=(cmake make gcc g++ python3-dev python3-numpy python3-pytest python3-torch libtorch-dev pybind11-dev
      python3-venv pkg-config python3-build libattr1
      libcmocka-dev ninja-build clang libclang-rt-14-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  sudo_cmd=()
  [ "$(id -u)" = 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi
