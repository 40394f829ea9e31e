#!/usr/bin/env bash
# Builds the fuzz targets (trace importers, templates parser, workload reader, fatbin parser,
# gpumuxd's message handling) with clang and runs each for a
# short while (CI), two targets at a time.
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
# One target: its run, its report; 1 when it found a failure.
fuzz_one() {
  local t=$1
  mkdir -p "$scratch/$t"
  cp "$root/fuzz/corpus/${t#trace_}/"* "$scratch/$t/"
  if ! "$build/fuzz_$t" -max_total_time="$secs" -max_len=65536 -rss_limit_mb=1024 \
      -artifact_prefix="$scratch/$t-" -print_final_stats=1 "$scratch/$t" 2>"$scratch/$t.log"; then
    { echo "== fuzz_$t for ${secs}s"; tail -40 "$scratch/$t.log"; } >"$scratch/$t.report"
    mkdir -p "$root/build-fuzz-artifacts" && cp "$scratch/$t-"* "$root/build-fuzz-artifacts/" 2>/dev/null || true
    echo "fuzz_$t found a failure (inputs kept in build-fuzz-artifacts/)" >>"$scratch/$t.report"
    return 1
  fi
  { echo "== fuzz_$t for ${secs}s"; grep -E "stat::number_of_executed_units|cov:" "$scratch/$t.log" | tail -2; } >"$scratch/$t.report"
}
# Two targets at a time (each its full ${secs}s on a core of its own), reports in target order.
status=0
for ((i = 0; i < ${#targets[@]}; i += 2)); do
  pids=()
  for t in "${targets[@]:i:2}"; do fuzz_one "$t" & pids+=($!); done
  for p in "${pids[@]}"; do wait "$p" || status=1; done
  for t in "${targets[@]:i:2}"; do cat "$scratch/$t.report"; done
done
exit $status
