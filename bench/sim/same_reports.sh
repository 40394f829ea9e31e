#!/usr/bin/env bash
# Two gpumux binaries give the same `gpumux sim --json` reports, byte for byte, on every run the
# simulator's tests make: sim_ideal_bound's sweep (every MSched scenario, slices 2 to 2000 ms,
# inmem, ideal, um and the msched modes: 640 runs) and every other scenario (scenarios/, tests/)
# under the default and the memory modes ideal, msched, msched-switch, msched-wholealloc and
# gpumux, sim_one_alone's cases under every scheduler, and --compare on the MSched mixes.
# For a change meant to make the simulator faster and nothing else; prints each run that differs
# and the CPU seconds (user) each binary took. Takes a few minutes per binary.
# usage: bench/sim/same_reports.sh OLD_GPUMUX NEW_GPUMUX [SHARED_DIR (default ../shared)]
set -u
A=$1 B=$2 SRC=$(cd "$(dirname "$0")/../.." && pwd)
SHARED=${3:-$SRC/../shared}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cd "$SRC" || exit 1
n=0 d=0
# One run under both binaries: output (stdout, stderr, exit status) compared, user time added up.
one() {
	local x y
	x=$( { /usr/bin/time -f %U -a -o "$W/a.t" "$A" sim "$@" --json 2>&1; echo "rc=$?"; } )
	y=$( { /usr/bin/time -f %U -a -o "$W/b.t" "$B" sim "$@" --json 2>&1; echo "rc=$?"; } )
	n=$((n + 1))
	[ "$x" = "$y" ] || { d=$((d + 1)); echo "DIFF: gpumux sim $* --json"; }
}
for f in scenarios/msched/*.ini; do
	for S in 2 20 200 1000 2000; do
		for m in inmem ideal um; do one "$f" --mem $m --sched timeline --slice-ms $S --warmup 2 --duration 3; done
		for m in msched msched-wholealloc msched-serial msched-fifo msched-switch; do
			one "$f" --mem $m --mem-slice-ms $S --warmup 2 --duration 3
		done
	done
	one "$f" --mem gpumux --sched gpumux --warmup 1 --duration 2
	one "$f" --compare --warmup 1 --duration 2
done
T=$(realpath -m "$SHARED/traces/kineto/worker0.1623143089861.pt.trace.json.gz")
inis=$(find scenarios tests -name '*.ini' | grep -v '^scenarios/msched/' | sort)
if [ -f "$T" ]; then
	printf '[scenario]\nname = one-trace\ndevice = v100\nduration_s = 10\n[task train]\nworkload = trace\nfile = %s\n' "$T" >"$W/trace.ini"
	inis="$inis $W/trace.ini"
fi
for f in $inis; do
	one "$f" --warmup 1 --duration 2
	for m in ideal msched msched-switch msched-wholealloc gpumux; do one "$f" --mem $m --warmup 1 --duration 2; done
done
scheds=$("$B" sim --help | sed -n 's/.*--sched NAME *scheduler: \([a-z|]*\).*/\1/p' | tr '|' ' ')
for c in "scenarios/msched/c-150.ini --only llama --duration 2" "scenarios/msched/b-150.ini --only resnet152 --duration 2"; do
	# shellcheck disable=SC2086
	for s in $scheds; do one $c --sched "$s" --mem inmem; done
done
ua=$(awk '{s += $1} END {printf "%.1f", s}' "$W/a.t") ub=$(awk '{s += $1} END {printf "%.1f", s}' "$W/b.t")
echo "$n runs, $d differ; user CPU: $A ${ua} s, $B ${ub} s"
[ "$d" = 0 ]
