#!/usr/bin/env bash
# A run longer than 2 s shows its progress on standard error when that is a terminal (a pty
# from script(1)), and writes nothing there when it is a file.
set -u
G=$1 S=$2 W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
command -v script >/dev/null || { echo "SKIPPED: no script(1) to give the run a terminal"; exit 77; }
run="'$G' sim '$S/scenarios/demo.ini' --mem um --warmup 0 --duration 60 --json"
script -qec "$run >/dev/null" /dev/null >"$W/tty" 2>&1 || { cat "$W/tty"; echo "FAIL: run on a terminal"; exit 1; }
grep -q 'demo: timeslice, um: *[0-9]*% simulated, [0-9]* s' "$W/tty" ||
	{ cat -v "$W/tty"; echo "FAIL: no progress on a terminal"; exit 1; }
sh -c "$run" >/dev/null 2>"$W/err" || { echo "FAIL: run with standard error on a file"; exit 1; }
[ ! -s "$W/err" ] || { cat -v "$W/err"; echo "FAIL: progress written to a file"; exit 1; }
echo "ok: progress on a terminal, none on a file"
