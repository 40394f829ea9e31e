#!/usr/bin/env bash
# One task alone runs as fast under every scheduler as under exclusive (units, unit latency p50
# and p99 equal to the last digit), and an imported trace alone as its recording (unit latency
# within 1% of the recorded span). The schedulers are read from `gpumux sim --help`, so a new
# one is covered as it is added. Cases: the kineto ResNet-50 training trace (V100) and two
# generator tasks of the MSched mixes (mix C's Llama decoder, mix B's ResNet152).
# CASE (trace, llama or resnet152) takes one of them: CTest runs the three as three tests, side
# by side (under the sanitizers each takes a minute or more); without it, all three.
# GMX_ONE_ALONE_TRACE_SCHEDS limits the schedulers the trace runs under (sanitizer builds, where
# each import of the trace takes seconds; the generator tasks still run under every scheduler).
# usage: one_alone.sh GPUMUX SCENARIO_DIR SHARED_DIR [CASE]
set -u -o pipefail
G=$1 S=$2 SHARED=$3 CASE=${4:-all} W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
command -v jq >/dev/null || { echo "SKIPPED: jq not installed"; exit 77; }
TRACE=$(realpath -m "$SHARED/traces/kineto/worker0.1623143089861.pt.trace.json.gz")
[ -f "$TRACE" ] || { echo "SKIPPED: $TRACE not found"; exit 77; }
scheds=$("$G" sim --help | sed -n 's/.*--sched NAME *scheduler: \([a-z|]*\).*/\1/p' | tr '|' ' ')
[ -n "$scheds" ] || { echo "FAIL: no scheduler list in gpumux sim --help"; exit 1; }
case " $scheds " in *" exclusive "*) ;; *) echo "FAIL: no exclusive in '$scheds'"; exit 1;; esac
printf '[scenario]\nname = one-trace\ndevice = v100\nduration_s = 10\n[task train]\nworkload = trace\nfile = %s\n' \
	"$TRACE" >"$W/trace.ini"
fig() { "$G" sim "$@" --mem inmem --json | jq -c '[.tasks[0].units, .tasks[0].latency_s.p50, .tasks[0].latency_s.p99]'; }
case $CASE in
trace) cases=("$W/trace.ini") ;;
llama) cases=("$S/msched/c-150.ini --only llama --duration 2") ;;
resnet152) cases=("$S/msched/b-150.ini --only resnet152 --duration 2") ;;
all) cases=("$W/trace.ini" "$S/msched/c-150.ini --only llama --duration 2" "$S/msched/b-150.ini --only resnet152 --duration 2") ;;
*) echo "FAIL: unknown case '$CASE' (trace, llama, resnet152 or all)"; exit 1 ;;
esac
fail=0 n=0 ts=""
for c in "${cases[@]}"; do
	# shellcheck disable=SC2086
	ex=$(fig $c --sched exclusive) || { echo "FAIL: $c: exclusive did not run"; exit 1; }
	list=$scheds
	[ "$c" = "$W/trace.ini" ] && list=${GMX_ONE_ALONE_TRACE_SCHEDS:-$scheds}
	for s in $list; do
		# shellcheck disable=SC2086
		r=$(fig $c --sched "$s") || { echo "FAIL: $c: --sched $s did not run"; fail=1; continue; }
		n=$((n + 1))
		[ "$c" = "$W/trace.ini" ] && [ "$s" = timeslice ] && ts=$r # the recording's check below reads it
		[ "$r" = "$ex" ] || { echo "FAIL: ${c##*/}: $s gives [units,p50,p99] $r, exclusive $ex"; fail=1; }
	done
done
if [ "$CASE" = trace ] || [ "$CASE" = all ]; then
	rec=$("$G" trace stats "$TRACE" --json | jq '.span_s')
	[ -n "$ts" ] || ts=$(fig "$W/trace.ini" --sched timeslice) || { echo "FAIL: the trace under timeslice did not run"; exit 1; }
	p50=$(jq '.[1]' <<<"$ts")
	awk -v a="$p50" -v b="$rec" 'BEGIN{exit !(a >= 0.99 * b && a <= 1.01 * b)}' ||
		{ echo "FAIL: the trace alone takes $p50 s a unit, recorded $rec s (not within 1%)"; fail=1; }
	rectxt="; trace alone $p50 s against $rec s recorded"
fi
[ $fail = 0 ] || exit 1
echo "ok ($CASE): $n runs over $(wc -w <<<"$scheds") schedulers equal exclusive${rectxt:-}"
