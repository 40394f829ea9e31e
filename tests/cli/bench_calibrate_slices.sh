#!/usr/bin/env bash
# bench calibrate measures msched's pipelining gain and whole-allocation bytes at the scenarios'
# own slice, at 200 ms and at the slices msched's rule picks: every row in the table, every array
# in the JSON (tiny scenarios).
set -u
G=$1 W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
command -v jq >/dev/null || { echo "SKIPPED: jq not installed (scripts/deps installs it)"; exit 77; }
mkdir "$W/msched"
for s in a-150 b-150 c-150 d-150 micro-150; do
	printf '[scenario]\nduration_s = 0.01\nmem_slice_ms = 1000\n[task a]\nworkload = vector-add\nfootprint = 12M\n' >"$W/msched/$s.ini"
done
"$G" bench calibrate --quick --scenarios "$W" >"$W/out" 2>"$W/err" || { echo "FAIL: bench calibrate: $(head -c 300 "$W/err")"; exit 1; }
for what in "micro 150%: pipelined / serial migration, 1 s" "micro 150%: pipelined / serial migration, 200 ms" \
	"D 150%: whole-allocation bytes / templates, 1 s" "D 150%: whole-allocation bytes / templates, 200 ms" \
	"micro 150%: pipelined / serial migration, rule" "D 150%: whole-allocation bytes / templates, rule"; do
	grep -qF "$what" "$W/out" || { echo "FAIL: no row '$what'"; cat "$W/out"; exit 1; }
done
tail -n 1 "$W/out" >"$W/json"
for k in micro_pipeline_gain_150_200_300 micro_pipeline_gain_200ms_150_200_300 \
	d_wholealloc_bytes_ratio_150_200_300 d_wholealloc_bytes_ratio_200ms_150_200_300 \
	micro_pipeline_gain_rule_150_200_300 d_wholealloc_bytes_ratio_rule_150_200_300 micro_rule_slice_ms_150_200_300; do
	n=$(jq ".$k | length" "$W/json") || { echo "FAIL: the last line is not JSON"; exit 1; }
	[ "$n" = 3 ] || { echo "FAIL: $k has $n entries, expected 3"; exit 1; }
	v=$(jq ".$k[0]" "$W/json")
	# a gain is measured (> 0); nothing moves on these tiny scenarios, so the bytes ratio may be 0
	case $k in micro_*) awk -v v="$v" 'BEGIN{exit !(v > 0)}' || { echo "FAIL: $k[0] = $v, expected a measured ratio"; exit 1; } ;; esac
done
echo "ok: calibrate reports msched's figures at 1 s, at 200 ms and at the rule's slices"
