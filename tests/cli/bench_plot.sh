#!/usr/bin/env bash
# gpumux bench --plot DIR: the benchmark writes its chart as SVG and PNG into DIR (created when
# missing) and prints the same JSON as without --plot. Runs `bench replay` (the shipped traces,
# a few seconds). Usage: bench_plot.sh GPUMUX SOURCE_DIR TRACES_DIR OUT_DIR
set -u
G=$1 S=$2 T=$3 D=$4
[ -d "$T" ] || { echo "SKIPPED: no traces at $T"; exit 77; }
rm -rf "$D" && mkdir -p "$D"
fail() { echo "FAIL: $*"; exit 1; }
"$G" bench replay --json --scenarios "$S/scenarios" --traces "$T" >"$D/plain.json" || fail "bench replay failed"
"$G" bench replay --json --scenarios "$S/scenarios" --traces "$T" --plot "$D/charts" >"$D/plot.json" 2>"$D/err" ||
	fail "bench replay --plot: $(cat "$D/err")"
cmp -s "$D/plain.json" "$D/plot.json" || fail "--plot changed the benchmark's output"
[ -s "$D/charts/replay-span.svg" ] || fail "no SVG chart"
grep -q '<svg' "$D/charts/replay-span.svg" || fail "the SVG chart is not SVG"
head -c 8 "$D/charts/replay-span.png" | od -An -tx1 | grep -q '89 50 4e 47 0d 0a 1a 0a' || fail "the PNG chart is not PNG"
echo "ok: bench replay --plot wrote replay-span.svg and .png; the JSON is unchanged"
