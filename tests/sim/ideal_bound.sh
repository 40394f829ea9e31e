#!/usr/bin/env bash
# The ideal is a proven limit (docs/simulator.md): under the same timeline schedule and slice,
# no memory policy (um, msched, msched-switch and its ablations) keeps more of same-schedule
# inmem than ideal does, on every shipped MSched scenario, over a slice sweep (GMX_IDEAL_SLICES,
# default 2 20 200 1000 2000 ms; short runs: 2 s warm-up, 3 s measured; the bound covers any
# window, so no tolerance beyond rounding).
# GMX_IDEAL_SCALE (default 1) scales the limit: 0.8 seeds a violation, to see the test fail.
# GMX_IDEAL_ONLY="a-150 ..." limits the scenarios (the sanitizer build checks memory, not
# figures, and runs two at one slice; the release build runs all).
# GROUP (a, b, c, d, micro) takes the scenarios of one mix: CTest runs the five groups as five
# tests, side by side; without it, every mix.
# usage: ideal_bound.sh GPUMUX SCENARIO_DIR [GROUP]
set -u
G=$1 D=$2 P=${3:-}
command -v jq >/dev/null || { echo "SKIPPED: jq not installed (scripts/deps installs it)"; exit 77; }
run() { "$G" sim "$@" --warmup ${GMX_IDEAL_WARMUP:-2} --duration ${GMX_IDEAL_DURATION:-3} --json || { echo "FAIL: gpumux sim $*"; exit 1; }; }
# Mean over tasks of throughput / inmem's throughput, for each JSON report on stdin (one line
# each; one jq for all the runs of a scenario at a slice).
shares() { jq -c --argjson b "$1" \
  '[.tasks[] as $t | ($b.tasks[] | select(.name==$t.name) | .throughput_per_s) as $r | select($r>0) | $t.throughput_per_s/$r] | add/length'; }
pols=(um msched msched-wholealloc msched-serial msched-fifo msched-switch)
bad="" n=0 close=0 closest=""
for f in "$D"/msched/${P:+$P-}*.ini; do
  s=$(basename "$f" .ini)
  [ -z "${GMX_IDEAL_ONLY:-}" ] || [[ " $GMX_IDEAL_ONLY " == *" $s "* ]] || continue
  for S in ${GMX_IDEAL_SLICES:-2 20 200 1000 2000}; do
    inm=$(run "$f" --mem inmem --sched timeline --slice-ms $S) || exit 1
    rs=("$(run "$f" --mem ideal --sched timeline --slice-ms $S)") || exit 1
    for m in "${pols[@]}"; do
      if [ $m = um ]; then r=$(run "$f" --mem um --sched timeline --slice-ms $S) || exit 1
      else r=$(run "$f" --mem $m --mem-slice-ms $S) || exit 1; fi
      rs+=("$r")
    done
    mapfile -t sh < <(printf '%s\n' "${rs[@]}" | shares "$inm")
    [ ${#sh[@]} -eq $((${#pols[@]} + 1)) ] || { echo "FAIL: $s@${S}ms: ${#sh[@]} shares of inmem for $((${#pols[@]} + 1)) runs"; exit 1; }
    idl=${sh[0]}
    for k in "${!pols[@]}"; do
      m=${pols[k]} x=${sh[k + 1]}
      n=$((n + 1))
      awk -v x="$x" -v i="$idl" -v f="${GMX_IDEAL_SCALE:-1}" 'BEGIN{exit !(x <= i * f * (1 + 1e-6) + 1e-9)}' ||
        bad="$bad $s@${S}ms:$m=$x>ideal=$idl${GMX_IDEAL_SCALE:+x$GMX_IDEAL_SCALE}"
      r=$(awk -v x="$x" -v i="$idl" 'BEGIN{printf "%.4f", (i > 0) ? x / i : 0}')
      if awk -v r="$r" -v c="$close" 'BEGIN{exit !(r > c)}'; then close=$r closest="$s@${S}ms:$m"; fi
    done
  done
done
[ $n -gt 0 ] || { echo "FAIL: no scenario of group '${P:-any}' in $D/msched (GMX_IDEAL_ONLY=${GMX_IDEAL_ONLY:-})"; exit 1; }
[ -z "$bad" ] || { echo "FAIL: a policy exceeds the ideal:$bad"; exit 1; }
echo "ok: $n policy runs, none above the ideal at its slice; closest $closest at $close of it"
