#!/usr/bin/env bash
# The ideal is the physical limit: under the same schedule and slice, no memory policy (um,
# msched and its ablations) keeps more of inmem than ideal does, on every shipped MSched
# scenario, over a slice sweep (GMX_IDEAL_SLICES, default 2 20 200 1000 2000 ms; short runs: 2 s
# warm-up, 3 s measured; a policy may pass the limit by up to 2% there: in a 3 s window a task's
# last unit, counted by its fraction done, moves a share by that much when turns shift by a
# kernel; ../shared/checks/fidelity holds full windows to 0.5%).
# GMX_IDEAL_ONLY="a-150 ..." limits the scenarios (the sanitizer build checks memory, not
# figures, and runs two at one slice; the release build runs all).
# usage: ideal_bound.sh GPUMUX SCENARIO_DIR
set -u
G=$1 D=$2
command -v jq >/dev/null || { echo "SKIPPED: jq not installed (scripts/deps installs it)"; exit 77; }
run() { "$G" sim "$@" --warmup ${GMX_IDEAL_WARMUP:-2} --duration ${GMX_IDEAL_DURATION:-3} --json || { echo "FAIL: gpumux sim $*"; exit 1; }; }
# mean over tasks of throughput(a) / throughput(b)
share() { jq -n --argjson a "$1" --argjson b "$2" \
  '[$a.tasks[] as $t | ($b.tasks[] | select(.name==$t.name) | .throughput_per_s) as $r | select($r>0) | $t.throughput_per_s/$r] | add/length'; }
bad="" n=0
for f in "$D"/msched/*.ini; do
  s=$(basename "$f" .ini)
  [ -z "${GMX_IDEAL_ONLY:-}" ] || [[ " $GMX_IDEAL_ONLY " == *" $s "* ]] || continue
  for S in ${GMX_IDEAL_SLICES:-2 20 200 1000 2000}; do
    inm=$(run "$f" --mem inmem --sched timeline --slice-ms $S) || exit 1
    idl=$(share "$(run "$f" --mem ideal --sched timeline --slice-ms $S)" "$inm") || exit 1
    for m in um msched msched-wholealloc msched-serial msched-fifo; do
      if [ $m = um ]; then r=$(run "$f" --mem um --sched timeline --slice-ms $S) || exit 1
      else r=$(run "$f" --mem $m --mem-slice-ms $S) || exit 1; fi
      x=$(share "$r" "$inm")
      n=$((n + 1))
      awk -v x="$x" -v i="$idl" 'BEGIN{exit !(x <= i * 1.02 + 1e-9)}' || bad="$bad $s@${S}ms:$m=$x>ideal=$idl"
    done
  done
done
[ -z "$bad" ] || { echo "FAIL: a policy exceeds the ideal:$bad"; exit 1; }
echo "ok: $n policy runs, none above the ideal at its slice"
