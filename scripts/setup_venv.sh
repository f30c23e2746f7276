#!/usr/bin/env bash
# Creates .venv, the second test environment: today's frameworks (torch 2.13 with its
# native exchange table, numpy 2, JAX, tvm-ffi) under the machine's default python3,
# beside Debian's /usr/bin/python3 (torch 1.13, numpy 1.24).
#
# Idempotent and quick: the venv holds a stamp with the hash of the pinned requirements;
# when it matches and the venv's interpreter runs, nothing else happens.
# Usage: scripts/setup_venv.sh [VENV_DIR]   (default: .venv beside this repo's root)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${1:-$root/.venv}
req=$root/scripts/venv-requirements.txt
base=${DLX_VENV_PYTHON:-python3}
stamp=$venv/.dlx-requirements.sha256
want=$(sha256sum "$req" | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" = "$want" ] && "$venv/bin/python" -c '' 2>/dev/null; then
  exit 0
fi
if ! "$venv/bin/python" -c '' 2>/dev/null; then  # absent, or its base interpreter is gone
  echo "setup: creating $venv from $(command -v "$base") ($("$base" --version))" >&2
  "$base" -m venv --clear "$venv"
fi
echo "setup: installing $req into $venv (torch comes from the local CPU wheel)" >&2
# (pip warns about every package the machine's local indexes lack: not news)
"$venv/bin/python" -m pip install -q -r "$req" 2> >(grep -v 'is ignored: it is neither' >&2)
echo "$want" >"$stamp"
