#!/usr/bin/env bash
# gpumux bench combined --json: the shape ../shared/checks/combined reads, on a small scenario
# (an HP service beside two LP tasks whose memory exceeds the device), and every shipped
# scenarios/combined file loads and runs.
set -u
G=$1 S=$2 W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
command -v jq >/dev/null || { echo "SKIPPED: jq not installed"; exit 77; }
mkdir "$W/combined"
cat >"$W/combined/small.ini" <<'INI'
[scenario]
name = small
device = rtx5080
capacity_gb = 1
duration_s = 0.5
[task hp]
workload = vector-add
footprint = 192M
priority = 0
arrival = poisson
rate = 50
[task lp0]
workload = vector-add
footprint = 600M
priority = 5
[task lp1]
workload = vector-add
footprint = 600M
priority = 5
INI
# A single LP task whose memory exceeds the device beside a small service: its alone run must be
# planned as it is beside HP (it was not: LP beside HP made 136% of LP alone).
cat >"$W/combined/train.ini" <<'INI'
[scenario]
name = train
device = rtx5080
capacity_gb = 1
duration_s = 1
[task hp]
workload = vector-add
footprint = 192M
priority = 0
arrival = poisson
rate = 50
[task lp]
workload = matmul
n = 1024
footprint = 1536M
priority = 5
INI
out=$("$G" bench combined --json --scenarios "$W") || { echo "FAIL: bench combined --json failed"; exit 1; }
jq -e '.scenarios | length == 2' <<<"$out" >/dev/null || { echo "FAIL: expected two scenarios: $out"; exit 1; }
for p in gpumux xsched-um; do
	jq -e --arg p "$p" '.scenarios[0] | .name == "small" and ([.policies[] | select(.policy == $p)
		| (.hp_p99_s, .hp_alone_p99_s, .lp_units_per_s, .lp_alone_units_per_s) | numbers] | length == 4)' \
		<<<"$out" >/dev/null || { echo "FAIL: no complete $p row: $out"; exit 1; }
done
# LP beside HP never above LP alone under the same policy: the alone run is the reference (it was
# 172% when an LP turn cut the other LP task's kernel waiting for its pages, docs/combined.md).
jq -e '[.scenarios[].policies[] | select(.policy == "gpumux") | .lp_units_per_s <= .lp_alone_units_per_s] | all' \
	<<<"$out" >/dev/null || { echo "FAIL: gpumux LP beside HP above LP alone: $out"; exit 1; }
# The paper's testcase T (an RT ResNet152 service beside 12 GiB of ResNet152 training) on its real
# sizes, in short windows: its rows are complete and gpumux's LP beside HP stays at or below LP alone.
mkdir -p "$W/t/combined"
sed -e 's/^warmup_s = .*/warmup_s = 1/' -e 's/^duration_s = .*/duration_s = 4/' \
	"$S/scenarios/combined/paper-resnet152-train.ini" >"$W/t/combined/paper-resnet152-train.ini"
out=$("$G" bench combined --json --scenarios "$W/t") || { echo "FAIL: bench combined on paper-resnet152-train failed"; exit 1; }
jq -e '.scenarios[0].name == "paper-resnet152-train" and ([.scenarios[0].policies[] | select(.policy == "gpumux" or
	.policy == "xsched-um") | (.hp_p99_s, .hp_alone_p99_s, .lp_units_per_s, .lp_alone_units_per_s) | numbers]
	| length == 8)' <<<"$out" >/dev/null || { echo "FAIL: paper-resnet152-train rows incomplete: $out"; exit 1; }
jq -e '[.scenarios[0].policies[] | select(.policy == "gpumux") | .lp_units_per_s > 0 and
	.lp_units_per_s <= .lp_alone_units_per_s] | all' <<<"$out" >/dev/null ||
	{ echo "FAIL: paper-resnet152-train: gpumux LP beside HP above LP alone (or none): $out"; exit 1; }
for f in "$S"/scenarios/combined/*.ini; do
	"$G" sim "$f" --sched gpumux --mem gpumux --warmup 0 --duration 0.05 >/dev/null ||
		{ echo "FAIL: $f does not run"; exit 1; }
done
echo "ok: bench combined --json has the checked shape; paper-resnet152-train within LP alone; every scenarios/combined file runs"
