#!/usr/bin/env bash
# gpumux bench msched exits non-zero and names the run when one fails (here: a broken
# micro-200.ini among tiny stand-ins for the shipped scenarios), and still prints the rest.
set -u
G=$1 W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL: $*"; echo "--- stderr"; cat "$W/err"; exit 1; }
mkdir "$W/msched"
for s in a-150 b-150 c-150 d-150 d-200 micro-100 micro-300; do
	printf '[scenario]\nduration_s = 0.01\nmem_slice_ms = 1\n[task a]\nworkload = vector-add\nfootprint = 12M\n' >"$W/msched/$s.ini"
done
printf '[scenario]\nduration_s = 0.01\nbogus_key = 1\n[task a]\nworkload = vector-add\n' >"$W/msched/micro-200.ini"
"$G" bench msched --quick --json --scenarios "$W" >"$W/out" 2>"$W/err"; rc=$?
[ $rc = 1 ] || fail "exit $rc, expected 1"
grep -q "micro-200.ini:3: unknown key 'bogus_key'" "$W/err" || fail "the failing file is not named"
grep -q "1 run failed: micro-200 " "$W/err" || fail "no summary naming micro-200"
grep -q '"failed":\["micro-200"\]' "$W/out" || fail "the JSON does not list the failed run"
grep -q '"pct":300' "$W/out" || fail "the runs after the failure are missing"
"$G" bench frob 2>"$W/err"; rc=$?
[ $rc = 2 ] || fail "bench frob: exit $rc, expected 2"
grep -q "expected calibrate, msched, frontier, fikit, speed, replay, combined)" "$W/err" || fail "bench frob does not list every benchmark"
echo "ok: a failed run is named and the exit status is 1"
