#!/usr/bin/env bash
# The combined policy's LP plan follows a training iteration (docs/combined.md, rule 6): a
# ResNet152 training job (forward, backward in reverse order, optimizer step) whose memory does
# not fit beside an RT ResNet152 service keeps >= 95% of its iterations alone, the service its
# alone p99 (<= 1.2x). Prefetching one window ahead left it at 91% of alone, waiting for pages
# in the forward pass while the link idled through the backward.
# usage: comb_train.sh GPUMUX
set -u
G=$1 W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
command -v jq >/dev/null || { echo "SKIPPED: jq not installed (scripts/deps installs it)"; exit 77; }
cat >"$W/t.ini" <<'INI'
[scenario]
device = rtx5080
capacity_gb = 4.75
duration_s = 2
warmup_s = 1
[task rt]
workload = cnn
model = resnet152
footprint = 1.5G
autograd = 1
priority = 0
arrival = poisson
rate = 0.5
[task be]
workload = cnn
model = resnet152
footprint = 4G
train = 1
priority = 5
INI
sim() { "$G" sim "$W/t.ini" --sched gpumux --mem gpumux --json "$@" || { echo "FAIL: gpumux sim $*"; exit 1; }; }
both=$(sim) || exit 1
be_alone=$(sim --only be | jq '.tasks[0].throughput_per_s') || exit 1
rt_alone=$(sim --only rt | jq '.tasks[0].latency_s.p99') || exit 1
be=$(jq '.tasks[] | select(.name == "be") | .throughput_per_s' <<<"$both")
rt=$(jq '.tasks[] | select(.name == "rt") | .latency_s.p99' <<<"$both")
awk -v b="$be" -v a="$be_alone" 'BEGIN{exit !(b >= 0.95 * a && b <= a)}' ||
	{ echo "FAIL: training beside the service $be iterations/s, alone $be_alone (expected 95..100%)"; exit 1; }
awk -v r="$rt" -v a="$rt_alone" 'BEGIN{exit !(r <= 1.2 * a)}' ||
	{ echo "FAIL: service p99 $rt s beside training, $rt_alone s alone (expected <= 1.2x)"; exit 1; }
echo "ok: training beside the service $be iterations/s ($be_alone alone); service p99 $rt s ($rt_alone s alone)"
