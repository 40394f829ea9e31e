#!/usr/bin/env bash
# Each baseline runs from the command line and keeps its key property (docs/baselines.md):
#  tgs:   under um the service's pages stay resident (nothing migrated into its memory) while
#         the batch job thrashes; under timeslice, the same scenario migrates the service's;
#  reef:  the RT service's p99 stays within 1.2x of its alone p99 beside a busy BE job, which
#         still progresses (a FIKIT pair, inmem; and under um);
#  orion: HP p99 within 1.2x of alone with the BE job progressing; refused under um (spatial
#         sharing is modelled with unlimited memory only).
# Orion's class rule and REEF's no-start-while-RT-waits are pinned in test_baselines.
set -u
G=$1 S=$2 P=$(dirname "$0")/prio-oversub.ini
F=$S/scenarios/fikit/resnet50+resnet50-train.ini
command -v jq >/dev/null || { echo "SKIPPED: jq not installed"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
run() { "$G" sim "$@" --json 2>/tmp/baselines.$$.err || fail "gpumux sim $* failed: $(cat /tmp/baselines.$$.err)"; }
trap 'rm -f /tmp/baselines.$$.err' EXIT
field() { jq -r --arg t "$2" ".tasks[] | select(.name == \$t) | $3" <<<"$1"; }
ge() { awk -v a="$1" -v b="$2" 'BEGIN{exit !(a >= b)}'; }

tgs=$(run "$P" --sched tgs)
ts=$(run "$P" --sched timeslice)
[ "$(field "$tgs" service .memory.h2d_bytes)" = 0 ] || fail "tgs: the service's memory took $(field "$tgs" service .memory.h2d_bytes) bytes in"
ge "$(field "$tgs" batch .memory.h2d_bytes)" 1e9 || fail "tgs: the batch job did not thrash"
ge "$(field "$ts" service .memory.h2d_bytes)" 1e6 || fail "timeslice: the service's memory was not migrated (the tgs check proves nothing)"
echo "tgs: service 0 bytes in, batch $(field "$tgs" batch .memory.h2d_bytes) (timeslice: service $(field "$ts" service .memory.h2d_bytes))"

alone=$(run "$F" --only inference --duration 5)
ap99=$(field "$alone" inference .latency_s.p99)
for p in reef orion; do
	r=$(run "$F" --sched $p --duration 5)
	p99=$(field "$r" inference .latency_s.p99)
	ge "$(awk -v a="$ap99" 'BEGIN{print a * 1.2}')" "$p99" || fail "$p: HP p99 $p99 s over 1.2x alone ($ap99 s)"
	ge "$(field "$r" training .throughput_per_s)" 1 || fail "$p: the BE job stalled"
	echo "$p: HP p99 $p99 s (alone $ap99 s), BE $(field "$r" training .throughput_per_s) units/s"
done

reef=$(run "$P" --sched reef)
ge "$(field "$ts" service .latency_s.p99)" "$(field "$reef" service .latency_s.p99)" ||
	fail "reef under um: service p99 above timeslice's"
ge "$(field "$reef" batch .throughput_per_s)" 0.1 || fail "reef under um: the batch job stalled"
echo "reef under um: service p99 $(field "$reef" service .latency_s.p99) s (timeslice $(field "$ts" service .latency_s.p99) s)"

"$G" sim "$F" --sched orion --mem um --duration 1 >/dev/null 2>&1 && fail "orion ran under um"
echo "ok"
