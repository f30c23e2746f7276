#!/usr/bin/env bash
# Prints the newest CPython 3.12+ interpreter on this machine that runs (on PATH, or one of
# pyenv's versions, whose shims refuse a version that is not selected), or nothing.
# DLX_NEWER_PYTHON, when set, is taken as it is.
set -uo pipefail
if [ -n "${DLX_NEWER_PYTHON:-}" ]; then echo "$DLX_NEWER_PYTHON"; exit 0; fi
cands=()
for minor in 14 13 12; do
  cands+=("$(command -v "python3.$minor" 2>/dev/null)")
  # pyenv's, highest patch release first (a glob sorts 3.13.10 before 3.13.9)
  while IFS= read -r p; do cands+=("$p"); done < <(
    ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3."$minor".*/bin/python3."$minor" 2>/dev/null |
    sort -rV)
done
for p in "${cands[@]}"; do
  [ -n "$p" ] && [ -x "$p" ] && "$p" -c 'import sys, venv; assert sys.version_info >= (3, 12)' \
    2>/dev/null && { echo "$p"; exit 0; }
done
exit 0
