#!/usr/bin/env bash
# Prints the path of a free-threaded CPython (built --disable-gil), building it once per
# machine when there is none, or prints nothing when none can be made (then `make test`
# says so and skips the .venv-ft run).
#
# Neither Debian 12 nor PyPI ships one. Debian 13 (trixie)'s source package python3.13
# (3.13.5) is reachable with `apt-get source` once a deb-src line for trixie is added: a
# source line only, so no binary package of trixie can ever be installed from it. The build
# dependencies come from Debian 12's binary packages. (3.14 is not in trixie's sources, so
# 3.13t is the newest reachable this way.)
#
# The interpreter lives outside the tree, in DLX_FT_CACHE (default /var/cache/dlx, or
# ~/.cache/dlx without root), shared by every clone on the machine and reused while present;
# a lock (flock) keeps two setups from building at once. Configure without
# --enable-optimizations (PGO would take most of an hour on 2 cores): `nice make -j2`, a few
# minutes. DLX_FT_PYTHON, when set, is taken as it is.
#
# `free_threaded_python.sh tsan`: the same interpreter built with ThreadSanitizer (clang,
# --with-thread-sanitizer) in its own folder, for `make tsan`'s stress run, with CPython's
# own TSan suppressions kept beside it (share/tsan-suppressions.txt). TSan's runtime wants
# a fixed address layout, so everything this interpreter runs goes through `setarch -R`.
#
# `free_threaded_python.sh all`: both, in one step, the plain one first (`make test` needs it
# before `make tsan` needs the other); prints nothing. `.ci/run` starts it in the background
# at the outset so the compiles fill the core the single-threaded test runs leave idle; the
# per-variant locks make a later `make ft`/`make tsan` wait for it and reuse its build.
set -uo pipefail
variant=${1:-}
if [ "$variant" = all ]; then
  bash "$0" >/dev/null
  bash "$0" tsan >/dev/null
  exit 0
fi
if [ -z "$variant" ] && [ -n "${DLX_FT_PYTHON:-}" ]; then echo "$DLX_FT_PYTHON"; exit 0; fi
version=3.13
if [ -w /var/cache ] || [ "$(id -u)" = 0 ]; then cache=${DLX_FT_CACHE:-/var/cache/dlx}
else cache=${DLX_FT_CACHE:-$HOME/.cache/dlx}; fi
name=python$version-ft${variant:+-$variant}
prefix=$cache/$name
py=$prefix/bin/python${version}t
configure_extra=()
run=()
if [ "$variant" = tsan ]; then
  configure_extra=(--with-thread-sanitizer CC=clang CXX=clang++)
  run=(setarch -R)
fi
works() {  # built --disable-gil, with what pip, venv and the tests need
  "${run[@]}" "$py" -c 'import sysconfig, venv, ssl, ctypes; assert sysconfig.get_config_var("Py_GIL_DISABLED")' \
    2>/dev/null
}
if works; then echo "$py"; exit 0; fi

mkdir -p "$cache" || exit 0
log=$cache/$name.log
exec 9>"$cache/$name.lock"
flock 9                              # another setup building: wait for it, then reuse its build
if works; then echo "$py"; exit 0; fi

{
  set -e
  sudo_cmd=()
  [ "$(id -u)" = 0 ] || sudo_cmd=(sudo)
  # What CPython's configure needs from Debian 12 for the modules pip, venv, ctypes and the
  # tests use (ssl for PyPI, zlib/bz2/lzma for wheels, ffi for ctypes, uuid, sqlite).
  deps=(build-essential libssl-dev zlib1g-dev libffi-dev libbz2-dev liblzma-dev libsqlite3-dev
        uuid-dev libexpat1-dev pkg-config)
  [ "$variant" = tsan ] && deps+=(clang)
  missing=()
  for p in "${deps[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  src_list=/etc/apt/sources.list.d/dlx-trixie-src.sources
  if [ ! -f "$src_list" ]; then
    "${sudo_cmd[@]}" tee "$src_list" >/dev/null <<'EOF'
# dlx: sources only (CPython 3.13 for the free-threaded build, scripts/free_threaded_python.sh)
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: trixie
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    "${sudo_cmd[@]}" apt-get update -qq
  fi
  if ((${#missing[@]})); then
    # (waits for another apt: .ci/run may have started this beside setup)
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends \
      -o DPkg::Lock::Timeout=600 -t bookworm "${missing[@]}" >/dev/null
  fi
  work=$cache/src-$name  # each variant its own: the two may be built at once
  rm -rf "$work"; mkdir -p "$work"; cd "$work"
  # The package's upstream tarball (Debian's patches are for its own layout, not needed here).
  apt-get source -qq --download-only "python$version" >/dev/null
  tar -xf python"$version"_*.orig.tar.xz
  cd Python-"$version".*/
  ./configure -q --disable-gil --prefix="$prefix" --with-ensurepip=install \
    "${configure_extra[@]}" >/dev/null
  "${run[@]}" nice make -j2 -s >/dev/null
  "${run[@]}" make -s altinstall >/dev/null
  if [ "$variant" = tsan ]; then
    cp Tools/tsan/suppressions_free_threading.txt "$prefix/share/tsan-suppressions.txt"
  fi
  cd "$cache"; rm -rf "$work"
} >"$log" 2>&1
if works; then echo "$py"
else echo "free_threaded_python.sh: no free-threaded CPython (log: $log)" >&2; fi
exit 0
