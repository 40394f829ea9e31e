#!/usr/bin/env bash
# msched's slice rule: without a fixed slice each turn's slice is picked (and reported); a
# per-task latency_target_ms caps it at the target over the runnable tasks; --mem-slice-ms S
# keeps one fixed slice S.
# usage: slice_rule.sh GPUMUX
set -u
G=$1 W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
command -v jq >/dev/null || { echo "SKIPPED: jq not installed (scripts/deps installs it)"; exit 77; }
cat >"$W/free.ini" <<'INI'
[scenario]
device = rtx5080
duration_s = 3
warmup_s = 2
[task llama]
workload = llm-decode
model = llama3-8b-int8
count = 3
INI
sed 's/^count = 3$/count = 3\nlatency_target_ms = 600/' "$W/free.ini" >"$W/target.ini"
sim() { "$G" sim "$@" --mem msched --json || { echo "FAIL: gpumux sim $*"; exit 1; }; }
a=$(sim "$W/free.ini") || exit 1
[ "$(jq '.msched.slice_rule' <<<"$a")" = true ] || { echo "FAIL: no slice rule without a fixed slice"; exit 1; }
hi=$(jq '.msched.slice_max_ms' <<<"$a")
awk -v h="$hi" 'BEGIN{exit !(h > 200 && h <= 2000)}' || { echo "FAIL: free slices up to $hi ms (expected 200..2000: three 8 GB decoders on 16 GB)"; exit 1; }
b=$(sim "$W/target.ini") || exit 1
hb=$(jq '.msched.slice_max_ms' <<<"$b")
awk -v h="$hb" 'BEGIN{exit !(h <= 200.0001)}' || { echo "FAIL: a 600 ms target over 3 tasks allows 200 ms slices, got $hb ms"; exit 1; }
c=$(sim "$W/free.ini" --mem-slice-ms 300) || exit 1
[ "$(jq '.msched.slice_rule' <<<"$c")" = false ] || { echo "FAIL: --mem-slice-ms 300 did not fix the slice"; exit 1; }
echo "ok: free slices up to $hi ms, with a 600 ms target up to $hb ms; --mem-slice-ms fixes the slice"
