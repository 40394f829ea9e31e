#!/usr/bin/env bash
# Benchmark of gpumuxd on the stand-in driver (not a test; numbers depend on the machine).
#   1. high-priority p99 request latency with a saturating low-priority neighbour, divided by
#      the same client alone: under gpumux (daemon, policy $POLICY) and without it (the
#      stand-in's default time slicing between processes);
#   2. latency the daemon path adds: notice-to-grant in the daemon (median, p99) and the
#      end-to-end request latency of the client alone under gpumux minus without it;
#   3. daemon CPU while clients launch 10k kernels per second in all (KERNEL_US=30: ~20k);
#   4. a high-priority client alone, with and without gpumux, at kernel lengths 5, 50 and
#      500 µs: launch-to-end latency p50/p99 and the overhead in % (and µs per 5 µs kernel);
#   5. the maximum launch rate of one client (zero-length kernels, a sync every 64) on the bare
#      stand-in and through the interposer's passthrough and queue policies and the daemon;
#   6. daemon CPU per kernel (all its threads, /proc/PID/task/*/schedstat) at 10k and 100k
#      kernels/s in all with 1, 8 and 64 clients: kernels of 1e6/RATE µs launched back to back
#      keep the simulated GPU busy, so the GPU sets the rate when the path keeps up; the rate
#      reached is printed beside each figure.
# The stand-in runs with GPUMUX_STANDIN_FAST=1 throughout (docs/standin.md).
# Usage: bench_daemon.sh BUILD_DIR [POLICY]   Prints a table, then one JSON line.
#   QUICK=1: fewer requests and shorter rate runs (~1/3 of the time).
set -eu
B=$(cd "$1" && pwd) POLICY=${2:-fikit}
C=$B/tests/e2e/e2e_client G=$B/gpumux D=$B/gpumuxd
W=$(mktemp -d /tmp/gmx-bench-daemon.XXXXXX)
trap 'kill $DPID 2>/dev/null || true; rm -rf "$W"' EXIT
DPID=
export GPUMUX_REAL_LIBCUDA=$B/standin/libcuda.so.1 GPUMUX_STANDIN_FAST=1
if [ "${QUICK:-0}" = 1 ]; then NREQ=100 NRATE=50000 NRATE_D=5000 SECS=0.3; else NREQ=300 NRATE=200000 NRATE_D=20000 SECS=1; fi
HP="--kernels hp:200 --count $NREQ --gap-us 1000"
LP="--kernels lpa:500,lpb:600 --count 100000 --sync-every 32"
SLOTS=32 # the stand-in's process slots (standin/engine.h SI_SLOTS)

# p50/p99 of (kernel end - launch) for a client's log and the stand-in log, in µs.
lat() { # dir name
    local pid; pid=$(sed -n 's/^pid=//p' "$1/$2.out")
    sed -n 's/^launch .* t_ns=//p' "$1/$2.out" >"$1/l"
    grep " pid=$pid .*kind=kernel" "$1/standin.log" | sed 's/.*end_ns=\([0-9]*\) .*/\1/' | sort -n >"$1/e"
    paste -d' ' "$1/l" "$1/e" | awk '{print ($2 - $1) / 1000}' | sort -n |
        awk '{v[NR] = $1} END {printf "%.1f %.1f\n", v[int(NR * 0.5) + 1], v[int(NR * 0.99) + 1]}'
}

start_daemon() { # dir
    "$D" --foreground --runtime-dir "$1" --policy "$POLICY" 2>"$1/daemon.log" &
    DPID=$!
    for _ in $(seq 100); do "$G" status >/dev/null 2>&1 && break; sleep 0.05; done
}
stop_daemon() { kill "$DPID"; wait "$DPID" 2>/dev/null || true; DPID=; }

# run MODE(direct|gpumux) WITH_LP DIR [HP ARGS]: one measurement.
run() {
    local mode=$1 withlp=$2 dir=$W/$3 hp=${4:-$HP}
    mkdir -p "$dir"
    export GPUMUX_STANDIN_DIR=$dir GPUMUX_STANDIN_LOG=$dir/standin.log GPUMUX_RUNTIME_DIR=$dir
    local lpid=
    [ "$mode" = gpumux ] && start_daemon "$dir"
    if [ "$withlp" = 1 ]; then
        if [ "$mode" = gpumux ]; then
            "$G" run --priority 7 --name lp -- "$C" --out "$dir/lp.out" $LP &
        else
            LD_LIBRARY_PATH=$B/standin "$C" --out "$dir/lp.out" $LP &
        fi
        lpid=$!
        sleep 0.2
    fi
    if [ "$mode" = gpumux ]; then
        "$G" run --priority 0 --name hp -- "$C" --out "$dir/hp.out" $hp
        "$G" status --json >"$dir/status.json"
    else
        LD_LIBRARY_PATH=$B/standin "$C" --out "$dir/hp.out" $hp
    fi
    [ -n "$lpid" ] && { kill -9 "$lpid"; wait "$lpid" 2>/dev/null || true; }
    [ -n "$DPID" ] && stop_daemon
    lat "$dir" hp
}

read -r a50 a99 < <(run direct 0 alone)
read -r s50 s99 < <(run direct 1 shared)
read -r ga50 ga99 < <(run gpumux 0 galone)
n50=$(jq '.hp_grant_latency_us.p50' "$W/galone/status.json")
n99=$(jq '.hp_grant_latency_us.p99' "$W/galone/status.json")
read -r gs50 gs99 < <(run gpumux 1 gshared)

# 4. HP alone at 5/50/500 µs, with and without gpumux.
declare -A hb50 hb99 hg50 hg99
for k in 5 50 500; do
    read -r "hb50[$k]" "hb99[$k]" < <(run direct 0 "hpb$k" "--kernels hp:$k --count $NREQ --gap-us 1000")
    read -r "hg50[$k]" "hg99[$k]" < <(run gpumux 0 "hpg$k" "--kernels hp:$k --count $NREQ --gap-us 1000")
done
pct() { echo "100 * ($1 - $2) / $2" | bc -l; }

# Nanoseconds of CPU used so far by every thread of process $1.
cpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {printf "%.0f\n", s}'; }

# 5. Maximum launch rate of one client: MODE bare|passthrough|queue|daemon; prints launches/s.
rate_run() {
    local mode=$1 dir=$W/rate-$1 n=$NRATE
    mkdir -p "$dir"
    export GPUMUX_STANDIN_DIR=$dir GPUMUX_STANDIN_LOG= GPUMUX_RUNTIME_DIR=$dir
    local args="--out $dir/c.out --kernels r:0 --sync-every 64 --quiet 1"
    case $mode in
    bare) LD_LIBRARY_PATH=$B/standin "$C" $args --count $n ;;
    passthrough | queue) GPUMUX_SHIM_POLICY=$mode LD_LIBRARY_PATH=$B/shim "$C" $args --count $n ;;
    daemon)
        start_daemon "$dir"
        "$G" run --priority 3 --name rate -- "$C" $args --count $NRATE_D
        stop_daemon ;;
    esac
    sed -n 's/^rate launches=\([0-9]*\) ns=\([0-9]*\)/\1 \2/p' "$dir/c.out" | awk '{printf "%.0f\n", $1 / ($2 / 1e9)}'
}
# The best of 3 runs each (the daemon: one run, it is two orders of magnitude slower).
best() { sort -n | tail -1; }
r_bare=$(for _ in 1 2 3; do rate_run bare; done | best)
r_pt=$(for _ in 1 2 3; do rate_run passthrough; done | best)
r_q=$(for _ in 1 2 3; do rate_run queue; done | best)
r_d=$(rate_run daemon)

# 6. Daemon CPU per kernel: TARGET kernels/s in all, NC clients; prints "kernels/s us/kernel"
# (or "- -" when NC exceeds the stand-in's process slots).
cpu_run() {
    local target=$1 nc=$2 dir=$W/cpu-$1-$2
    if [ "$nc" -gt $((SLOTS - 1)) ]; then echo "- -"; return; fi
    mkdir -p "$dir"
    export GPUMUX_STANDIN_DIR=$dir GPUMUX_STANDIN_LOG= GPUMUX_RUNTIME_DIR=$dir
    start_daemon "$dir"
    local kus per pids= c0 c1
    kus=$(echo "1000000 / $target" | bc -l)
    per=$(echo "$target * $SECS / $nc" | bc); [ "$per" -ge 64 ] || per=64
    c0=$(cpu_ns "$DPID")
    for i in $(seq "$nc"); do
        "$G" run --priority 3 --name "rate$i" -- "$C" --out "$dir/r$i.out" --kernels "r:$kus" \
            --count "$per" --sync-every 64 --quiet 1 &
        pids="$pids $!"
    done
    wait $pids
    c1=$(cpu_ns "$DPID")
    stop_daemon
    # The rate: all launches over the longest client's own time from first launch to last end.
    cat "$dir"/r*.out | sed -n "s/^rate launches=\([0-9]*\) ns=\([0-9]*\)/\1 \2/p" |
        awk '{n += $1; if ($2 > t) t = $2} END {printf "%.0f ", n / (t / 1e9)}'
    echo "($c1 - $c0) / 1000 / ($nc * $per)" | bc -l | awk '{printf "%.2f\n", $1}'
}
declare -A crate cus
for t in 10000 100000; do
    for nc in 1 8 64; do read -r "crate[$t-$nc]" "cus[$t-$nc]" < <(cpu_run "$t" "$nc"); done
done

# 3. (kept) daemon CPU at 10k kernels/s with CLIENTS clients of KERNEL_US µs kernels.
dir=$W/cpu; mkdir -p "$dir"
export GPUMUX_STANDIN_DIR=$dir GPUMUX_STANDIN_LOG= GPUMUX_RUNTIME_DIR=$dir
start_daemon "$dir"
c0=$(cpu_ns "$DPID"); t0=$(date +%s.%N)
NC=${CLIENTS:-2} PER=$(echo "15000 * $SECS / 1" | bc) pids=
for i in $(seq "$NC"); do
    "$G" run --priority 3 --name "rate$i" -- "$C" --out "$dir/rate$i.out" --kernels "r:${KERNEL_US:-100}" \
        --count $PER --sync-every 64 --quiet 1 &
    pids="$pids $!"
done
wait $pids
t1=$(date +%s.%N); c1=$(cpu_ns "$DPID")
stop_daemon
rate=$(echo "$NC * $PER / ($t1 - $t0)" | bc -l)
cpu=$(echo "100 * ($c1 - $c0) / 1000000000 / ($t1 - $t0)" | bc -l)

r_def=$(echo "$s99 / $a99" | bc -l); r_gmx=$(echo "$gs99 / $ga99" | bc -l)
printf '%-44s %10s %10s\n' "high-priority request latency (µs)" p50 p99
printf '%-44s %10.1f %10.1f\n' "alone, no gpumux" "$a50" "$a99"
printf '%-44s %10.1f %10.1f\n' "with LP, no gpumux (stand-in time slicing)" "$s50" "$s99"
printf '%-44s %10.1f %10.1f\n' "alone, gpumux ($POLICY)" "$ga50" "$ga99"
printf '%-44s %10.1f %10.1f\n' "with LP, gpumux ($POLICY)" "$gs50" "$gs99"
printf '%-44s %21.2f\n' "p99 shared/alone, no gpumux" "$r_def"
printf '%-44s %21.2f\n' "p99 shared/alone, gpumux" "$r_gmx"
printf '%-44s %10.1f %10.1f\n' "notice-to-grant in the daemon (µs)" "$n50" "$n99"
printf '%-44s %10.1f %10.1f\n' "added end-to-end, alone (µs)" "$(echo "$ga50 - $a50" | bc -l)" "$(echo "$ga99 - $a99" | bc -l)"
printf '%-44s %21.0f\n' "kernels/s in the CPU run" "$rate"
printf '%-44s %20.1f%%\n' "daemon CPU (one core = 100%)" "$cpu"
echo
printf '%-30s %9s %9s %9s %9s %9s %9s\n' "HP alone, launch to end (µs)" "bare p50" "p99" "gmx p50" "p99" "+% p50" "+% p99"
for k in 5 50 500; do
    printf '%-30s %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f\n' "$k µs kernels" "${hb50[$k]}" "${hb99[$k]}" "${hg50[$k]}" \
        "${hg99[$k]}" "$(pct "${hg50[$k]}" "${hb50[$k]}")" "$(pct "${hg99[$k]}" "${hb99[$k]}")"
done
echo
printf '%-30s %12s %9s\n' "launch rate, one client" "launches/s" "vs bare"
for m in bare:$r_bare passthrough:$r_pt queue:$r_q "daemon ($POLICY):$r_d"; do
    printf '%-30s %12.0f %9.3f\n' "${m%:*}" "${m##*:}" "$(echo "${m##*:} / $r_bare" | bc -l)"
done
echo
printf '%-30s %12s %12s %12s\n' "daemon CPU per kernel" "clients" "kernels/s" "µs/kernel"
for t in 10000 100000; do
    for nc in 1 8 64; do
        if [ "${cus[$t-$nc]}" = - ]; then
            printf '%-30s %12s %12s %12s\n' "target $t/s" "$nc" "-" "not run: the stand-in has $SLOTS process slots"
        else
            printf '%-30s %12s %12s %12s%s\n' "target $t/s" "$nc" "${crate[$t-$nc]}" "${cus[$t-$nc]}" \
                "$([ "${crate[$t-$nc]}" -lt $((t * 9 / 10)) ] && echo "  (target not reached)" || true)"
        fi
    done
done
jnum() { [ "$1" = - ] && echo null || echo "$1"; }
hp_json=$(for k in 5 50 500; do printf '"%sus":{"p50":%.1f,"p99":%.1f},' "$k" "$(pct "${hg50[$k]}" "${hb50[$k]}")" "$(pct "${hg99[$k]}" "${hb99[$k]}")"; done)
hp_abs=$(for k in 5 50 500; do printf '"%sus":{"bare_p50":%.1f,"bare_p99":%.1f,"gpumux_p50":%.1f,"gpumux_p99":%.1f},' "$k" "${hb50[$k]}" "${hb99[$k]}" "${hg50[$k]}" "${hg99[$k]}"; done)
cpu_json=$(for t in 10000 100000; do printf '"%s":{' "$t"; for nc in 1 8 64; do printf '"%s":{"kernels_per_s":%s,"us_per_kernel":%s}' "$nc" "$(jnum "${crate[$t-$nc]}")" "$(jnum "${cus[$t-$nc]}")"; [ $nc = 64 ] || printf ','; done; printf '},'; done)
printf '{"bench":"daemon","policy":"%s","hp_p99_ratio_gpumux":%.3f,"hp_p99_ratio_default":%.3f,"hp_alone_us":{"p50":%.1f,"p99":%.1f},"hp_shared_us":{"p50":%.1f,"p99":%.1f},"hp_alone_gpumux_us":{"p50":%.1f,"p99":%.1f},"hp_shared_gpumux_us":{"p50":%.1f,"p99":%.1f},"notice_to_grant_us":{"p50":%.1f,"p99":%.1f},"kernels_per_s":%.0f,"daemon_cpu_pct":%.1f,' \
    "$POLICY" "$r_gmx" "$r_def" "$a50" "$a99" "$s50" "$s99" "$ga50" "$ga99" "$gs50" "$gs99" "$n50" "$n99" "$rate" "$cpu"
printf '"hp_alone_overhead_pct":{%s},"hp_alone_latency_us":{%s},"hp_alone_added_us_per_kernel_5us":%.2f,' "${hp_json%,}" "${hp_abs%,}" "$(echo "${hg50[5]} - ${hb50[5]}" | bc -l)"
printf '"launch_rate_per_s":{"bare":%s,"passthrough":%s,"queue":%s,"daemon":%s},' "$r_bare" "$r_pt" "$r_q" "$r_d"
printf '"launch_rate_vs_bare":{"passthrough":%.3f,"queue":%.3f,"daemon":%.3f},' "$(echo "$r_pt / $r_bare" | bc -l)" "$(echo "$r_q / $r_bare" | bc -l)" "$(echo "$r_d / $r_bare" | bc -l)"
printf '"daemon_cpu":{%s},"daemon_cpu_us_per_kernel":{"1":%s,"8":%s,"64":%s}}\n' "${cpu_json%,}" "$(jnum "${cus[100000-1]}")" "$(jnum "${cus[100000-8]}")" "$(jnum "${cus[100000-64]}")"
