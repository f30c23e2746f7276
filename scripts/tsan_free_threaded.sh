#!/usr/bin/env bash
# `make tsan`'s second part (issue 23): tests/python/threads/threads_stress.py under a free-threaded
# CPython built with ThreadSanitizer, with dlx, its fixtures and test kernels built with
# clang -fsanitize=thread against it. A race TSan sees in dlx's code (or anything the
# suppressions CPython ships do not cover) stops the run with a report: exit 66.
#
#   bash scripts/tsan_free_threaded.sh BUILD_DIR VENV_DIR [ROUNDS]
#
# The interpreter is built once per machine (scripts/free_threaded_python.sh tsan, ~10
# minutes on 2 cores); none can be made: said, skipped. numpy comes from its free-threaded
# wheel, which is not instrumented: races inside numpy are not looked for.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$1 venv=$2 rounds=${3:-20}
py=$(bash "$root/scripts/free_threaded_python.sh" tsan)
if [ -z "$py" ]; then
  echo "tsan: the stress test under a ThreadSanitizer free-threaded CPython: skipped (none could be made)"
  exit 0
fi
prefix=$(cd "$(dirname "$py")/.." && pwd)
mkdir -p "$build"
cat "$prefix/share/tsan-suppressions.txt" "$root/tests/python/threads/tsan-suppressions.txt" \
  >"$build/tsan-suppressions.txt"
export TSAN_OPTIONS="halt_on_error=1:exitcode=66:second_deadlock_stack=1:suppressions=$build/tsan-suppressions.txt"
req=$root/scripts/ft-requirements.txt
if [ ! -x "$venv/bin/python" ] || ! cmp -s "$req" "$venv/.dlx-requirements"; then
  rm -rf "$venv"
  setarch -R "$py" -m venv "$venv"
  setarch -R "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req" \
    2> >(grep -v 'is ignored: it is neither' >&2)
  cp "$req" "$venv/.dlx-requirements"
fi
setarch -R cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ -DPython3_EXECUTABLE="$venv/bin/python" -DDLX_SANITIZE=thread \
  -DDLX_BUILD_C_TESTS=OFF >/dev/null  # (make tsan runs the C side from build-tsan/)
setarch -R cmake --build "$build" -j2 >/dev/null
echo "tsan: tests/python/threads/threads_stress.py, 8 threads x $rounds rounds, under $(setarch -R "$venv/bin/python" -c "import sys; print(sys.version.split()[0])") (free-threaded, ThreadSanitizer)"
cd "$root"
PYTHONPATH="$build/python:$build/fixtures" DLX_BUILD_DIR="$build" \
  setarch -R timeout 1200 "$venv/bin/python" tests/python/threads/threads_stress.py "$build" "$rounds"
