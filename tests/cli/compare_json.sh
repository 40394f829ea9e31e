#!/usr/bin/env bash
# gpumux sim --compare --json prints one JSON object (one report per run: inmem and um at the
# native slice; inmem, um, ideal and msched at msched's slice), no table.
set -u
G=$1 W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL: $*"; echo "--- stdout"; cat "$W/out"; exit 1; }
printf '[scenario]\nduration_s = 0.05\n[task a]\nworkload = vector-add\nfootprint = 12M\n' >"$W/s.ini"
"$G" sim "$W/s.ini" --compare --json >"$W/out" || fail "exit $?"
[ "$(wc -l <"$W/out")" = 1 ] || fail "expected one line"
head -c 1 "$W/out" | grep -q '{' || fail "not a JSON object"
for m in inmem um ideal msched; do
	grep -q "\"mem\":\"$m\"" "$W/out" || fail "no report for $m"
done
grep -q '"runs":\[' "$W/out" || fail "no runs array"
if command -v jq >/dev/null; then
	[ "$(jq '.runs | length' "$W/out")" = 6 ] || fail "jq: runs is not 6 reports"
	[ "$(jq '[.runs[] | select(.mem == "inmem")] | length' "$W/out")" = 2 ] || fail "jq: not two inmem references"
fi
echo "ok: --compare --json is one JSON object"
