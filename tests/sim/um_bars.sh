#!/usr/bin/env bash
# um against the MSched paper's bars on the DNN mixes (docs/simulator.md, calibration): under
# the scenario's native schedule, um keeps within 1.5x of the paper's share of in-HBM
# throughput on b-150, b-300 and c-300 (full windows: steady state), and B's share is flat
# across pressure as the paper's 7.4 / 7.5% are (within 15%): each request sweeps its whole
# footprint (PyTorch inference with autograd on). ../shared/checks/fidelity covers all 15 bars.
# usage: um_bars.sh GPUMUX SCENARIO_DIR
set -u
G=$1 D=$2
command -v jq >/dev/null || { echo "SKIPPED: jq not installed (scripts/deps installs it)"; exit 77; }
run() { "$G" sim "$@" --json || { echo "FAIL: gpumux sim $*"; exit 1; }; }
share() { jq -n --argjson a "$1" --argjson b "$2" \
  '[$a.tasks[] as $t | ($b.tasks[] | select(.name==$t.name) | .throughput_per_s) as $r | select($r>0) | $t.throughput_per_s/$r] | add/length'; }
declare -A PAPER=([b-150]=7.4 [b-300]=7.5 [c-300]=5.9)
declare -A GOT
bad=""
for s in b-150 b-300 c-300; do
  f=$D/msched/$s.ini
  inm=$(run "$f" --mem inmem) || exit 1
  um=$(run "$f" --mem um) || exit 1
  GOT[$s]=$(share "$um" "$inm") || exit 1
  r=$(awk -v a="${GOT[$s]}" -v p="${PAPER[$s]}" 'BEGIN{printf "%.3f", 100*a/p}')
  echo "$s: um keeps $(awk -v a="${GOT[$s]}" 'BEGIN{printf "%.2f", 100*a}')% of inmem (paper ${PAPER[$s]}%, ratio $r)"
  awk -v r="$r" 'BEGIN{exit !(r >= 1/1.5 && r <= 1.5)}' || bad="$bad $s:ratio=$r"
done
flat=$(awk -v a="${GOT[b-150]}" -v b="${GOT[b-300]}" 'BEGIN{printf "%.3f", b/a}')
awk -v f="$flat" 'BEGIN{exit !(f >= 0.85 && f <= 1.15)}' || bad="$bad b-300/b-150=$flat"
[ -z "$bad" ] || { echo "FAIL:$bad"; exit 1; }
echo "ok: b-300 / b-150 = $flat"
