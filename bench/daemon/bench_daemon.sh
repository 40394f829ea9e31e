#!/usr/bin/env bash
# Benchmark of gpumuxd on the stand-in driver (not a test; numbers depend on the machine).
#   1. high-priority p99 request latency with a saturating low-priority neighbour, divided by
#      the same client alone: under gpumux (daemon, policy $POLICY) and without it (the
#      stand-in's default time slicing between processes);
#   2. latency the daemon path adds: notice-to-grant in the daemon (median, p99) and the
#      end-to-end request latency of the client alone under gpumux minus without it;
#   3. daemon CPU while clients launch 10k kernels per second in all (KERNEL_US=30: ~20k).
# Usage: bench_daemon.sh BUILD_DIR [POLICY]   Prints a table, then one JSON line.
set -eu
B=$(cd "$1" && pwd) POLICY=${2:-fikit}
C=$B/tests/e2e/e2e_client G=$B/gpumux D=$B/gpumuxd
W=$(mktemp -d /tmp/gmx-bench-daemon.XXXXXX)
trap 'kill $DPID 2>/dev/null || true; rm -rf "$W"' EXIT
DPID=
export GPUMUX_REAL_LIBCUDA=$B/standin/libcuda.so.1
HP="--kernels hp:200 --count 300 --gap-us 1000"
LP="--kernels lpa:500,lpb:600 --count 100000 --sync-every 32"

# p50/p99 of (kernel end - launch) for a client's log and the stand-in log, in µs.
lat() { # dir name
    local pid; pid=$(sed -n 's/^pid=//p' "$1/$2.out")
    sed -n 's/^launch .* t_ns=//p' "$1/$2.out" >"$1/l"
    grep " pid=$pid .*kind=kernel" "$1/standin.log" | sed 's/.*end_ns=\([0-9]*\) .*/\1/' | sort -n >"$1/e"
    paste -d' ' "$1/l" "$1/e" | awk '{print ($2 - $1) / 1000}' | sort -n |
        awk '{v[NR] = $1} END {printf "%.1f %.1f\n", v[int(NR * 0.5) + 1], v[int(NR * 0.99) + 1]}'
}

# run MODE(direct|gpumux) WITH_LP DIR: one measurement.
run() {
    local mode=$1 withlp=$2 dir=$W/$3
    mkdir -p "$dir"
    export GPUMUX_STANDIN_DIR=$dir GPUMUX_STANDIN_LOG=$dir/standin.log GPUMUX_RUNTIME_DIR=$dir
    local pre=() lpid=
    if [ "$mode" = gpumux ]; then
        "$D" --foreground --runtime-dir "$dir" --policy "$POLICY" 2>"$dir/daemon.log" &
        DPID=$!
        for _ in $(seq 100); do "$G" status >/dev/null 2>&1 && break; sleep 0.05; done
    fi
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
        "$G" run --priority 0 --name hp -- "$C" --out "$dir/hp.out" $HP
        "$G" status --json >"$dir/status.json"
    else
        LD_LIBRARY_PATH=$B/standin "$C" --out "$dir/hp.out" $HP
    fi
    [ -n "$lpid" ] && { kill -9 "$lpid"; wait "$lpid" 2>/dev/null || true; }
    [ -n "$DPID" ] && { kill "$DPID"; wait "$DPID" 2>/dev/null || true; DPID=; }
    lat "$dir" hp
}

read -r a50 a99 < <(run direct 0 alone)
read -r s50 s99 < <(run direct 1 shared)
read -r ga50 ga99 < <(run gpumux 0 galone)
n50=$(jq '.hp_grant_latency_us.p50' "$W/galone/status.json")
n99=$(jq '.hp_grant_latency_us.p99' "$W/galone/status.json")
read -r gs50 gs99 < <(run gpumux 1 gshared)

# Daemon CPU at 10k kernels/s: CLIENTS clients (default 2: one client on the stand-in tops
# out near 7k/s) launching 100 µs kernels back to back, so the simulated GPU, busy all the
# time, sets the rate at 10k/s. KERNEL_US=30 measures near 20k/s instead.
dir=$W/cpu; mkdir -p "$dir"
export GPUMUX_STANDIN_DIR=$dir GPUMUX_STANDIN_LOG= GPUMUX_RUNTIME_DIR=$dir
"$D" --foreground --runtime-dir "$dir" --policy "$POLICY" 2>"$dir/daemon.log" &
DPID=$!
for _ in $(seq 100); do "$G" status >/dev/null 2>&1 && break; sleep 0.05; done
tck=$(getconf CLK_TCK)
cpu0=$(awk '{print $14 + $15}' /proc/$DPID/stat); t0=$(date +%s.%N)
NC=${CLIENTS:-2} PER=15000 pids=
for i in $(seq "$NC"); do
    "$G" run --priority 3 --name "rate$i" -- "$C" --out "$dir/rate$i.out" --kernels "r:${KERNEL_US:-100}" \
        --count $PER --sync-every 64 &
    pids="$pids $!"
done
wait $pids
t1=$(date +%s.%N); cpu1=$(awk '{print $14 + $15}' /proc/$DPID/stat)
kill "$DPID"; wait "$DPID" 2>/dev/null || true; DPID=
rate=$(echo "$NC * $PER / ($t1 - $t0)" | bc -l)
cpu=$(echo "100 * ($cpu1 - $cpu0) / $tck / ($t1 - $t0)" | bc -l)

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
printf '{"bench":"daemon","policy":"%s","hp_p99_ratio_gpumux":%.3f,"hp_p99_ratio_default":%.3f,"hp_alone_us":{"p50":%.1f,"p99":%.1f},"hp_shared_us":{"p50":%.1f,"p99":%.1f},"hp_alone_gpumux_us":{"p50":%.1f,"p99":%.1f},"hp_shared_gpumux_us":{"p50":%.1f,"p99":%.1f},"notice_to_grant_us":{"p50":%.1f,"p99":%.1f},"kernels_per_s":%.0f,"daemon_cpu_pct":%.1f}\n' \
    "$POLICY" "$r_gmx" "$r_def" "$a50" "$a99" "$s50" "$s99" "$ga50" "$ga99" "$gs50" "$gs99" "$n50" "$n99" "$rate" "$cpu"
