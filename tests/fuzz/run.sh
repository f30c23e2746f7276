#!/usr/bin/env bash
# Runs every libFuzzer target built in BUILD for SECONDS each, one after the other,
# from its committed seed corpus (tests/fuzz/corpus/NAME, never written to: new
# inputs go to BUILD/corpus/NAME). A crash leaves BUILD/crashes/NAME/crash-* and
# fails the run; add that input to the seed corpus with the fix so it is replayed.
#   usage: tests/fuzz/run.sh BUILD SECONDS
set -euo pipefail
build=${1:?build folder}
seconds=${2:?seconds per target}
here=$(cd "$(dirname "$0")" && pwd)
failed=()
for src in "$here"/fuzz_*.c; do
  name=$(basename "$src" .c)
  seeds="$here/corpus/${name#fuzz_}"
  [ -d "$seeds" ] || { echo "fuzz: $name has no seed corpus ($seeds)" >&2; exit 1; }
  mkdir -p "$build/corpus/$name" "$build/crashes/$name"
  echo "fuzz: $name for ${seconds}s" >&2
  start=$SECONDS
  if ! "$build/$name" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
       -max_len=65536 -print_final_stats=1 -artifact_prefix="$build/crashes/$name/" \
       "$build/corpus/$name" "$seeds" >"$build/$name.log" 2>&1; then
    tail -n 60 "$build/$name.log" >&2
    failed+=("$name")
  fi
  echo "fuzz: $name done in $((SECONDS - start))s ($(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$build/$name.log" | grep -o '[0-9]*$' || echo '?') runs)" >&2
done
if ((${#failed[@]})); then
  echo "fuzz: FAILED: ${failed[*]} (inputs in $build/crashes/)" >&2
  exit 1
fi
