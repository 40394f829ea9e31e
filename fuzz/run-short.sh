#!/usr/bin/env bash
# Builds the fuzz targets (trace importers, templates parser, workload reader, fatbin parser,
# gpumuxd's message handling) with clang and runs each for a
# short while (CI).
# Usage: fuzz/run-short.sh [seconds-per-target]   (default 20)
# The committed corpus is only read: new inputs go to a scratch copy.
set -euo pipefail
secs=${1:-20}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${GMX_FUZZ_BUILD:-$root/build-fuzz}
command -v clang >/dev/null || { echo "run-short.sh: clang is needed for libFuzzer" >&2; exit 1; }
cmake -S "$root" -B "$build" -DCMAKE_C_COMPILER=clang -DGMX_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
targets=(trace_auto trace_kineto trace_orion trace_vidur templates workload fatbin daemon)
cmake --build "$build" -j2 --target "${targets[@]/#/fuzz_}" >/dev/null
scratch=$(mktemp -d); trap 'rm -rf "$scratch"' EXIT
status=0
for t in "${targets[@]}"; do
  mkdir -p "$scratch/$t"
  cp "$root/fuzz/corpus/${t#trace_}/"* "$scratch/$t/"
  echo "== fuzz_$t for ${secs}s"
  if ! "$build/fuzz_$t" -max_total_time="$secs" -max_len=65536 -rss_limit_mb=1024 \
      -artifact_prefix="$scratch/$t-" -print_final_stats=1 "$scratch/$t" 2>"$scratch/$t.log"; then
    tail -40 "$scratch/$t.log"
    mkdir -p "$root/build-fuzz-artifacts" && cp "$scratch/$t-"* "$root/build-fuzz-artifacts/" 2>/dev/null || true
    echo "fuzz_$t found a failure (inputs kept in build-fuzz-artifacts/)"
    status=1
  else
    grep -E "stat::number_of_executed_units|cov:" "$scratch/$t.log" | tail -2
  fi
done
exit $status
