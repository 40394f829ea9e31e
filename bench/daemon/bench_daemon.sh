#!/usr/bin/env bash
# Benchmark of gpumux's real path on the stand-in driver (not a test; numbers depend on the
# machine). Every comparison runs its two sides in turns (bare, gpumux, bare, gpumux, ...) and
# takes the median of the repeats' ratios, so that a noisy machine's drift cancels.
#   1. high-priority p99 request latency with a saturating low-priority neighbour, divided by
#      the same client alone: under gpumux (daemon, policy $POLICY) and without it (the
#      stand-in's default time slicing between processes); notice-to-grant in the daemon;
#   2. a high-priority client alone (1 kernel per request, 1 ms apart, NALONE requests: 1,000, so
#      that its p99 is the 10th slowest rather than one of 3), with and without gpumux,
#      at kernel lengths 5, 50 and 500 µs: launch-to-end latency p50/p99, the overhead in % and
#      the µs added per kernel (medians over REPS pairs of runs);
#   3. the maximum launch rate of one client (zero-length kernels, a sync every 64, RATE_MS of
#      launching; 64 over the median time of a batch of 64 launches and its sync; beside it the
#      sustained rate, all launches over the whole run) on the bare
#      stand-in and through the interposer's passthrough and queue policies and the daemon's,
#      each as a ratio to a bare run of its own right next to it (before it in odd rounds, after
#      it in even ones; median over RATE_REPS rounds, 9, or 5 with QUICK=1); beside them the bare
#      client with one more thread that only sleeps (bare_threaded: what a process with threads,
#      as every one through the interposer is, pays in the stand-in's own launch) and the daemon's
#      rate over it;
#   4. daemon CPU per kernel: the run time of gpumuxd's threads (/proc/PID/task/*/schedstat, ns)
#      from the moment NC connected clients start to the moment all have seen their last kernel
#      end (they stay connected until then: departures are not counted), while they launch
#      kernels of 1e6/TARGET µs back to back (so the GPU sets TARGET kernels/s in all when the
#      path keeps up), divided by the kernels launched in
#      it; TARGET 10k, 100k and 500k kernels/s, NC 1, 8 and 64. The rate reached is printed
#      beside each figure, marked when it falls short of the target. The same clients run on the
#      bare stand-in too: the rate the client side reaches without gpumux. The daemon's sleeps per
#      kernel come from its status ("loop"). The clients' run time and sleeps (voluntary context
#      switches) per kernel, each client's own from its first launch to its last kernel's end (not
#      its waits for the others to start or end), are printed beside it, with the bare run's, and
#      the daemon's share of a core: what limits the rate reached. With more than one client
#      the stand-in's waits sleep (GPUMUX_STANDIN_FAST=0): 8 or 64 clients spinning would take
#      the cores from the daemon being measured.
# The stand-in runs with GPUMUX_STANDIN_FAST=1 (docs/standin.md) but for those clients.
# Usage: bench_daemon.sh BUILD_DIR [POLICY]   Prints a table, then one JSON line.
#   QUICK=1: fewer requests, repeats and shorter windows (~1/3 of the time).
#   CPU_ONLY=1: part 4 alone (its table and a JSON line of its figures); TARGETS="100000" and
#   CLIENTS="1 8 64" choose its runs; GPUMUXD_BEFORE=path: another gpumuxd (an earlier build) run in
#   turns with this one at each point, its figures beside ("before"), to compare builds in one run;
#   its clients go through the `gpumux` beside it (and so that build's interposer) when there is one.
#   BASE=OTHER_BUILD_DIR: the launch rate (3) also through that build's interposer and daemon
#   ("daemon_base", on this build's stand-in), in the same rounds: a change's before and after
#   side by side (launch_rate_vs_bare.daemon_base in the JSON).
set -eu
B=$(cd "$1" && pwd) POLICY=${2:-fikit}
C=$B/tests/e2e/e2e_client G=$B/gpumux D=$B/gpumuxd
W=$(mktemp -d /tmp/gmx-bench-daemon.XXXXXX)
DPID=
# Every gpumuxd started, also those started in a process substitution's subshell (whose DPID
# the main shell never sees), is stopped on exit, whatever failed: only those still running as
# gpumuxd (a PID of one that stopped may be another process's by now). errexit is off here, so
# that one already stopped does not end the cleanup (and the bench) with status 1, leaving $W.
cleanup() {
    set +e
    local p
    for p in $(cat "$W/daemon.pids" 2>/dev/null); do
        [ "$(cat /proc/"$p"/comm 2>/dev/null)" = gpumuxd ] && kill "$p" 2>/dev/null
    done
    rm -rf "$W"
}
trap cleanup EXIT
export GPUMUX_REAL_LIBCUDA=$B/standin/libcuda.so.1 GPUMUX_STANDIN_FAST=1
if [ "${QUICK:-0}" = 1 ]; then
    NREQ=100 NALONE=300 REPS=3 RATE_MS=150 CPU_MS=300 RATE_REPS=5
else
    NREQ=300 NALONE=1000 REPS=5 RATE_MS=300 CPU_MS=1000 RATE_REPS=9
fi
HP="--kernels hp:200 --count $NREQ --gap-us 1000"
LP="--kernels lpa:500,lpb:600 --count 100000 --sync-every 32"
HZ=$(getconf CLK_TCK)
# 64 clients and the bench's own status requests: more than the default max_clients (32).
printf '[daemon]\nmax_clients = 100\nmax_clients_per_user = 100\n' >"$W/gpumuxd.ini"

TARGETS=${TARGETS:-10000 100000 500000} CLIENTS=${CLIENTS:-1 8 64} DB=${GPUMUXD_BEFORE:-}
med() { sort -g | awk '{v[NR] = $1} END {if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
calc() { echo "$1" | bc -l; }

# p50/p99 of (kernel end - launch) for a client's log and the stand-in log, in µs.
lat() { # dir name
    local pid; pid=$(sed -n 's/^pid=//p' "$1/$2.out")
    sed -n 's/^launch .* t_ns=//p' "$1/$2.out" >"$1/l"
    grep " pid=$pid .*kind=kernel" "$1/standin.log" | sed 's/.*end_ns=\([0-9]*\) .*/\1/' | sort -n >"$1/e"
    paste -d' ' "$1/l" "$1/e" | awk '{print ($2 - $1) / 1000}' | sort -n |
        awk '{v[NR] = $1} END {printf "%.1f %.1f\n", v[int(NR * 0.5) + 1], v[int(NR * 0.99) + 1]}'
}

start_daemon() { # dir [gpumuxd]
    # Its stdout is not the caller's: a daemon left running must not hold a substitution's pipe.
    "${2:-$D}" --foreground --config "$W/gpumuxd.ini" --runtime-dir "$1" --policy "$POLICY" >/dev/null 2>"$1/daemon.log" &
    DPID=$!
    echo "$DPID" >>"$W/daemon.pids"
    for _ in $(seq 100); do GPUMUX_RUNTIME_DIR=$1 "$G" status >/dev/null 2>&1 && break; sleep 0.05; done
}
stop_daemon() { kill "$DPID"; wait "$DPID" 2>/dev/null || true; DPID=; }

# Sets the stand-in (and the daemon's runtime directory) for one run in DIR.
use_dir() { mkdir -p "$1"; export GPUMUX_STANDIN_DIR=$1 GPUMUX_STANDIN_LOG=${2:-} GPUMUX_RUNTIME_DIR=$1; }

# run MODE(direct|gpumux) WITH_LP DIR [HP ARGS]: one latency measurement, prints p50 p99.
run() {
    local mode=$1 withlp=$2 dir=$W/$3 hp=${4:-$HP} lpid=
    use_dir "$dir" "$dir/standin.log"
    # The HP client connects (an event record) before its first timed request, on both sides:
    # the requests measure the path, not the interposer's one-time connection to the daemon.
    touch "$dir/go"
    hp="$hp --start-when $dir/go"
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

mrow() { tr ' ' '\n' <<<"$1" | grep . | med; } # median of a space-separated list
if [ "${CPU_ONLY:-0}" != 1 ]; then
# 1. HP beside LP.
read -r a50 a99 < <(run direct 0 alone)
read -r s50 s99 < <(run direct 1 shared)
read -r ga50 ga99 < <(run gpumux 0 galone)
n50=$(jq '.hp_grant_latency_us.p50' "$W/galone/status.json")
n99=$(jq '.hp_grant_latency_us.p99' "$W/galone/status.json")
read -r gs50 gs99 < <(run gpumux 1 gshared)

# 2. HP alone at 5/50/500 µs, bare and gpumux in turns; per pair: overhead % and µs added.
declare -A hb50 hb99 hg50 hg99 op50 op99 add50
for r in $(seq "$REPS"); do
    for k in 5 50 500; do
        a="--kernels hp:$k --count $NALONE --gap-us 1000"
        if [ $((r % 2)) = 1 ]; then # bare first in odd rounds, gpumux first in even ones
            read -r b50 b99 < <(run direct 0 "hpb$k-$r" "$a")
            read -r g50 g99 < <(run gpumux 0 "hpg$k-$r" "$a")
        else
            read -r g50 g99 < <(run gpumux 0 "hpg$k-$r" "$a")
            read -r b50 b99 < <(run direct 0 "hpb$k-$r" "$a")
        fi
        hb50[$k]+="$b50 " hb99[$k]+="$b99 " hg50[$k]+="$g50 " hg99[$k]+="$g99 "
        op50[$k]+="$(calc "100 * ($g50 - $b50) / $b50") " op99[$k]+="$(calc "100 * ($g99 - $b99) / $b99") "
        add50[$k]+="$(calc "$g50 - $b50") "
    done
done

# 3. Launch rate of one client: MODE bare|passthrough|queue|daemon; prints launches/s.
rate_run() {
    local mode=$1 dir=$W/rate-$1-$2
    use_dir "$dir"
    local args="--out $dir/c.out --kernels r:0 --sync-every 64 --quiet 1 --count 100000000 --for-ms $RATE_MS"
    case $mode in
    bare) LD_LIBRARY_PATH=$B/standin "$C" $args ;;
    bare_threaded) LD_LIBRARY_PATH=$B/standin "$C" $args --idle-thread 1 ;;
    passthrough | queue) GPUMUX_SHIM_POLICY=$mode LD_LIBRARY_PATH=$B/shim "$C" $args ;;
    daemon)
        start_daemon "$dir"
        "$G" run --priority 3 --name rate -- "$C" $args
        stop_daemon ;;
    daemon_base)
        start_daemon "$dir" "$BASE/gpumuxd"
        "$BASE/gpumux" run --priority 3 --name rate -- "$C" $args
        stop_daemon ;;
    esac
    # 64 launches over the median time of a batch of 64 and its synchronisation (e2e_client):
    # a run preempted now and then by other work on the machine hardly moves it. Beside it, the
    # sustained rate: all launches over the run's whole time (stalls included, such as waits for
    # room in the daemon's ring when the daemon reads slower than the client reports).
    sed -n 's/^rate launches=\([0-9]*\) ns=\([0-9]*\) batch_ns=\([0-9]*\)/\1 \2 \3/p' "$dir/c.out" |
        awk '{printf "%.0f %.0f\n", 64 / ($3 / 1e9), $1 / ($2 / 1e9)}'
}
declare -A rate ratio srate sratio last
# bare_threaded: the bare client with one more thread that only sleeps. A single-threaded process
# takes glibc's mutexes with plain stores, one with a second thread with locked instructions, as
# every process through the interposer (its connection thread and dispatcher) and on the real
# driver does; the daemon's rate over it ("launch_rate_vs_bare_threaded", each round's daemon
# ratio over its bare_threaded ratio, median over rounds) compares like with like, beside the
# single-threaded reference the issue names.
RMODES="bare_threaded passthrough queue daemon"
declare -a dvt=()
[ -n "${BASE:-}" ] && BASE=$(cd "$BASE" && pwd) RMODES+=" daemon_base"
for r in $(seq "$RATE_REPS"); do
    # Each path is paired with a bare run of its own, right before it in odd rounds and right
    # after it in even ones, and divided by that one: this machine changes speed for seconds at a
    # time (the bare stand-in at 4.5M or 7.3M launches/s from one second to the next), so a bare
    # run several runs away may have met another speed than the path it is compared with.
    for m in $RMODES; do
        if [ $((r % 2)) = 1 ]; then
            read -r xb yb < <(rate_run bare "$r-$m")
            read -r xm ym < <(rate_run "$m" "$r")
        else
            read -r xm ym < <(rate_run "$m" "$r")
            read -r xb yb < <(rate_run bare "$r-$m")
        fi
        rate[bare]+="$xb " srate[bare]+="$yb "
        last[$m]=$(calc "$xm / $xb")
        rate[$m]+="$xm " ratio[$m]+="${last[$m]} "
        srate[$m]+="$ym " sratio[$m]+="$(calc "$ym / $yb") "
    done
    dvt+=("$(calc "${last[daemon]} / ${last[bare_threaded]}")")
done
fi

# 4. Daemon CPU per kernel: TARGET kernels/s in all, NC clients; prints
# "kernels/s us/kernel kernels cpu_ms sleeps_per_kernel client_us_per_kernel client_sleeps_per_kernel
# daemon_pct_of_a_core". The daemon's CPU is the sum of its
# threads' run time (/proc/PID/task/*/schedstat, in ns) from the moment every client is connected
# and waiting to the moment every one has launched its last kernel and seen it end (--end-when:
# they stay connected until then, so their departures and profile saves are not counted).
cpu_ns() { cat /proc/"$1"/task/*/schedstat | awk '{s += $1} END {printf "%d\n", s}'; }
clients_at() { # dir line count: waits until count clients wrote line (60 s at most; 1 then)
    for _ in $(seq 1200); do
        [ "$(cat "$1"/r*.out 2>/dev/null | grep -c "^$2\$")" -ge "$3" ] && return 0
        sleep 0.05
    done
    echo "bench_daemon: after 60 s only $(cat "$1"/r*.out 2>/dev/null | grep -c "^$2\$") of $3 clients wrote '$2' (see $1/r*.out)" >&2
    return 1
}
# The clients' rate: all launches over the longest client's own time from first launch to last
# end; beside it the clients' CPU time (ns) and sleeps in those times, each client's own count
# (e2e_client's rate line: not its waits for the go and end files, which poll every millisecond:
# counted from the bench's window, 64 clients waiting for the others to start or end added
# tens of thousands of wake-ups to a run, and more per kernel the fewer kernels a run launched).
rate_of() { cat "$1"/r*.out | sed -n "s/^rate launches=\([0-9]*\) ns=\([0-9]*\) .*cpu_ns=\([0-9]*\) sleeps=\([0-9]*\).*/\1 \2 \3 \4/p" |
    awk '{n += $1; c += $3; v += $4; if ($2 > t) t = $2} END {printf "%.0f %d %.0f %d\n", n / (t / 1e9), n, c, v}'; }
cpu_run() { # target clients [gpumuxd]
    local target=$1 nc=$2 dir=$W/cpu-$1-$2${3:+-before} pids= t0 t1 s0 s1 w0 w1 kus fast=1 g=$G
    [ "$nc" -gt 1 ] && fast=0 # many waiting clients would spin on 2 cores: they sleep instead
    # The earlier build's clients run through its own `gpumux run`, so its interposer (next to
    # it) too: a change to either side shows in the comparison.
    [ -n "${3:-}" ] && [ -x "$(dirname "$3")/gpumux" ] && g=$(dirname "$3")/gpumux
    use_dir "$dir"
    start_daemon "$dir" "${3:-}"
    kus=$(calc "1000000 / $target")
    for i in $(seq "$nc"); do
        GPUMUX_STANDIN_FAST=$fast "$g" run --priority 3 --name "rate$i" -- "$C" --out "$dir/r$i.out" --kernels "r:$kus" \
            --count 100000000 --for-ms "$CPU_MS" --sync-every 64 --quiet 1 --start-when "$dir/go" --end-when "$dir/end" &
        pids="$pids $!"
    done
    # Every client connected (its first event record went through the daemon), then go.
    clients_at "$dir" ready "$nc" || { kill $pids 2>/dev/null; return 1; }
    s0=$("$G" status --json | jq .loop.sleeps)
    t0=$(cpu_ns "$DPID") w0=$(date +%s%N)
    touch "$dir/go"
    clients_at "$dir" waiting "$nc" || { kill $pids 2>/dev/null; return 1; }
    t1=$(cpu_ns "$DPID") w1=$(date +%s%N)
    s1=$("$G" status --json | jq .loop.sleeps)
    touch "$dir/end"
    wait $pids
    stop_daemon
    read -r rt n dc dv < <(rate_of "$dir")
    awk -v r="$rt" -v n="$n" -v dt="$((t1 - t0))" -v ds="$((s1 - s0))" -v dc="$dc" -v dv="$dv" -v dw="$((w1 - w0))" \
        'BEGIN {printf "%s %.3f %d %.1f %.3f %.2f %.2f %.1f\n", r, dt / 1000 / n, n, dt / 1e6, ds / n, dc / 1000 / n, dv / n, 100 * dt / dw}'
}
# The same clients on the bare stand-in (no interposer, no daemon): the rate the client side
# reaches by itself. Prints kernels/s, the clients' µs of run time and sleeps per kernel (as cpu_run's).
bare_run() {
    local target=$1 nc=$2 dir=$W/bare-$1-$2 pids= rt n dc dv kus fast=1
    [ "$nc" -gt 1 ] && fast=0
    use_dir "$dir"
    kus=$(calc "1000000 / $target")
    for i in $(seq "$nc"); do
        GPUMUX_STANDIN_FAST=$fast LD_LIBRARY_PATH=$B/standin "$C" --out "$dir/r$i.out" --kernels "r:$kus" \
            --count 100000000 --for-ms "$CPU_MS" --sync-every 64 --quiet 1 --start-when "$dir/go" --end-when "$dir/end" &
        pids="$pids $!"
    done
    clients_at "$dir" ready "$nc" || { kill $pids 2>/dev/null; return 1; }
    touch "$dir/go"
    clients_at "$dir" waiting "$nc" || { kill $pids 2>/dev/null; return 1; }
    touch "$dir/end"
    wait $pids
    read -r rt n dc dv < <(rate_of "$dir")
    awk -v r="$rt" -v n="$n" -v dc="$dc" -v dv="$dv" 'BEGIN {printf "%s %.2f %.2f\n", r, dc / 1000 / n, dv / n}'
}
declare -A crate cus ckern cms cslp cbare ccl cvs cshare bcl bvs pcrate pcus pcms pcslp pccl pcvs pcshare
before_run() { # target clients: the GPUMUXD_BEFORE daemon at the same point
    read -r "pcrate[$1-$2]" "pcus[$1-$2]" _ "pcms[$1-$2]" "pcslp[$1-$2]" "pccl[$1-$2]" "pcvs[$1-$2]" "pcshare[$1-$2]" < <(cpu_run "$1" "$2" "$DB")
}
turn=0
for t in $TARGETS; do
    for nc in $CLIENTS; do
        turn=$((turn + 1))
        [ -n "$DB" ] && [ $((turn % 2)) = 1 ] && before_run "$t" "$nc" # in turns: neither build always first
        read -r "crate[$t-$nc]" "cus[$t-$nc]" "ckern[$t-$nc]" "cms[$t-$nc]" "cslp[$t-$nc]" "ccl[$t-$nc]" "cvs[$t-$nc]" \
            "cshare[$t-$nc]" < <(cpu_run "$t" "$nc")
        [ -n "$DB" ] && [ $((turn % 2)) = 0 ] && before_run "$t" "$nc"
        read -r "cbare[$t-$nc]" "bcl[$t-$nc]" "bvs[$t-$nc]" < <(bare_run "$t" "$nc")
    done
done

# ---- table ----
if [ "${CPU_ONLY:-0}" != 1 ]; then
r_def=$(calc "$s99 / $a99") r_gmx=$(calc "$gs99 / $ga99")
printf '%-44s %10s %10s\n' "high-priority request latency (µs)" p50 p99
printf '%-44s %10.1f %10.1f\n' "alone, no gpumux" "$a50" "$a99"
printf '%-44s %10.1f %10.1f\n' "with LP, no gpumux (stand-in time slicing)" "$s50" "$s99"
printf '%-44s %10.1f %10.1f\n' "alone, gpumux ($POLICY)" "$ga50" "$ga99"
printf '%-44s %10.1f %10.1f\n' "with LP, gpumux ($POLICY)" "$gs50" "$gs99"
printf '%-44s %21.2f\n' "p99 shared/alone, no gpumux" "$r_def"
printf '%-44s %21.2f\n' "p99 shared/alone, gpumux" "$r_gmx"
printf '%-44s %10.1f %10.1f\n' "notice-to-grant in the daemon (µs)" "$n50" "$n99"
echo
printf '%-22s %9s %9s %9s %9s %9s %9s %12s\n' "HP alone (µs), $REPS pairs" "bare p50" "p99" "gmx p50" "p99" "+% p50" "+% p99" "+µs/kernel"
for k in 5 50 500; do
    printf '%-22s %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %12.1f\n' "$k µs kernels" "$(mrow "${hb50[$k]}")" \
        "$(mrow "${hb99[$k]}")" "$(mrow "${hg50[$k]}")" "$(mrow "${hg99[$k]}")" "$(mrow "${op50[$k]}")" \
        "$(mrow "${op99[$k]}")" "$(mrow "${add50[$k]}")"
done
echo
printf '%-30s %12s %9s %12s %9s   %s\n' "launch rate, one client" "launches/s" "vs bare" "sustained/s" "vs bare" "(medians of $RATE_REPS rounds; each ratio to the bare run beside it)"
printf '%-30s %12.0f %9.3f %12.0f %9.3f\n' "bare stand-in" "$(mrow "${rate[bare]}")" 1 "$(mrow "${srate[bare]}")" 1
for m in $RMODES; do
    printf '%-30s %12.0f %9.3f %12.0f %9.3f\n' "$m$([ $m = daemon ] && echo " ($POLICY)")$([ $m = daemon_base ] && echo " (BASE)")$([ $m = bare_threaded ] && echo " (+1 idle)")" "$(mrow "${rate[$m]}")" "$(mrow "${ratio[$m]}")" \
        "$(mrow "${srate[$m]}")" "$(mrow "${sratio[$m]}")"
done
printf '%-30s %12s %9.3f   %s\n' "daemon vs bare_threaded" "" "$(mrow "${dvt[*]}")" "(each round's daemon ratio over its bare_threaded ratio)"
fi
echo
printf '%-16s %8s %10s %10s %9s %8s %9s %7s %10s %13s %13s  %s\n' "daemon CPU" clients "kernels/s" "µs/kernel" "kernels" "cpu ms" "sleeps/k" "% core" "bare k/s" "clients µs/k" "client slp/k" "(clients: gpumux / bare)"
for t in $TARGETS; do
    for nc in $CLIENTS; do
        short=$([ "${crate[$t-$nc]}" -lt $((t * 9 / 10)) ] && echo "  target not reached: ${crate[$t-$nc]}/s (bare stand-in: ${cbare[$t-$nc]}/s)" || true)
        printf '%-16s %8s %10s %10s %9s %8s %9s %7s %10s %13s %13s  %s\n' "target $t/s" "$nc" "${crate[$t-$nc]}" "${cus[$t-$nc]}" \
            "${ckern[$t-$nc]}" "${cms[$t-$nc]}" "${cslp[$t-$nc]}" "${cshare[$t-$nc]}" "${cbare[$t-$nc]}" \
            "${ccl[$t-$nc]} / ${bcl[$t-$nc]}" "${cvs[$t-$nc]} / ${bvs[$t-$nc]}" "$short"
        [ -n "$DB" ] && printf '%-16s %8s %10s %10s %9s %8s %9s %7s %10s %13s %13s\n' "  before" "$nc" "${pcrate[$t-$nc]}" "${pcus[$t-$nc]}" \
            "" "${pcms[$t-$nc]}" "${pcslp[$t-$nc]}" "${pcshare[$t-$nc]}" "" "${pccl[$t-$nc]}" "${pcvs[$t-$nc]}"
    done
done

# ---- JSON ----
if [ "${CPU_ONLY:-0}" = 1 ]; then # part 4 alone: its figures, and the other build's beside
    j= jb=
    for t in $TARGETS; do
        for nc in $CLIENTS; do
            j+=$(printf '"%s-%s":{"kernels_per_s":%s,"us_per_kernel":%s,"sleeps_per_kernel":%s,"daemon_pct_of_a_core":%s,"client_cpu_us_per_kernel":%s,"bare_kernels_per_s":%s},' "$t" "$nc" \
                "${crate[$t-$nc]}" "${cus[$t-$nc]}" "${cslp[$t-$nc]}" "${cshare[$t-$nc]}" "${ccl[$t-$nc]}" "${cbare[$t-$nc]}")
            [ -n "$DB" ] && jb+=$(printf '"%s-%s":{"kernels_per_s":%s,"us_per_kernel":%s,"sleeps_per_kernel":%s,"daemon_pct_of_a_core":%s,"client_cpu_us_per_kernel":%s,"client_sleeps_per_kernel":%s},' "$t" "$nc" \
                "${pcrate[$t-$nc]}" "${pcus[$t-$nc]}" "${pcslp[$t-$nc]}" "${pcshare[$t-$nc]}" "${pccl[$t-$nc]}" "${pcvs[$t-$nc]}")
        done
    done
    printf '{"bench":"daemon_cpu","policy":"%s","daemon_cpu_by_target_clients":{%s},"before":{%s}}\n' "$POLICY" "${j%,}" "${jb%,}"
    exit 0
fi
hp_json= hp_abs=
for k in 5 50 500; do
    hp_json+=$(printf '"%sus":{"p50":%.1f,"p99":%.1f},' "$k" "$(mrow "${op50[$k]}")" "$(mrow "${op99[$k]}")")
    hp_abs+=$(printf '"%sus":{"bare_p50":%.1f,"bare_p99":%.1f,"gpumux_p50":%.1f,"gpumux_p99":%.1f,"added_us_p50":%.1f},' "$k" \
        "$(mrow "${hb50[$k]}")" "$(mrow "${hb99[$k]}")" "$(mrow "${hg50[$k]}")" "$(mrow "${hg99[$k]}")" "$(mrow "${add50[$k]}")")
done
cpu_json=
for t in 10000 100000 500000; do
    cpu_json+="\"$t\":{"
    for nc in 1 8 64; do
        cpu_json+=$(printf '"%s":{"kernels_per_s":%s,"us_per_kernel":%s,"kernels":%s,"cpu_ms":%s,"sleeps_per_kernel":%s,"daemon_pct_of_a_core":%s,"bare_kernels_per_s":%s,"client_cpu_us_per_kernel":%s,"client_sleeps_per_kernel":%s,"bare_client_cpu_us_per_kernel":%s,"bare_client_sleeps_per_kernel":%s,"reached":%s},' "$nc" \
            "${crate[$t-$nc]}" "${cus[$t-$nc]}" "${ckern[$t-$nc]}" "${cms[$t-$nc]}" "${cslp[$t-$nc]}" "${cshare[$t-$nc]}" "${cbare[$t-$nc]}" \
            "${ccl[$t-$nc]}" "${cvs[$t-$nc]}" "${bcl[$t-$nc]}" "${bvs[$t-$nc]}" \
            "$([ "${crate[$t-$nc]}" -ge $((t * 9 / 10)) ] && echo true || echo false)")
    done
    cpu_json="${cpu_json%,}},"
done
printf '{"bench":"daemon","policy":"%s","reps":%d,"launch_rate_rounds":%d,"hp_p99_ratio_gpumux":%.3f,"hp_p99_ratio_default":%.3f,"hp_alone_us":{"p50":%.1f,"p99":%.1f},"hp_shared_us":{"p50":%.1f,"p99":%.1f},"hp_alone_gpumux_us":{"p50":%.1f,"p99":%.1f},"hp_shared_gpumux_us":{"p50":%.1f,"p99":%.1f},"notice_to_grant_us":{"p50":%.1f,"p99":%.1f},' \
    "$POLICY" "$REPS" "$RATE_REPS" "$r_gmx" "$r_def" "$a50" "$a99" "$s50" "$s99" "$ga50" "$ga99" "$gs50" "$gs99" "$n50" "$n99"
printf '"hp_alone_overhead_pct":{%s},"hp_alone_latency_us":{%s},"hp_alone_added_us_per_kernel_5us":%.2f,' \
    "${hp_json%,}" "${hp_abs%,}" "$(mrow "${add50[5]}")"
printf '"launch_rate_per_s":{"bare":%.0f,"passthrough":%.0f,"queue":%.0f,"daemon":%.0f},' "$(mrow "${rate[bare]}")" \
    "$(mrow "${rate[passthrough]}")" "$(mrow "${rate[queue]}")" "$(mrow "${rate[daemon]}")"
printf '"launch_rate_vs_bare":{"passthrough":%.3f,"queue":%.3f,"daemon":%.3f,"bare_threaded":%.3f%s},' "$(mrow "${ratio[passthrough]}")" \
    "$(mrow "${ratio[queue]}")" "$(mrow "${ratio[daemon]}")" "$(mrow "${ratio[bare_threaded]}")" \
    "$([ -n "${BASE:-}" ] && printf ',"daemon_base":%.3f' "$(mrow "${ratio[daemon_base]}")")"
printf '"launch_rate_vs_bare_threaded":{"daemon":%.3f},' "$(mrow "${dvt[*]}")"
# The sustained rate: all launches over the run's whole time, stalls included.
printf '"launch_rate_sustained_vs_bare":{"passthrough":%.3f,"queue":%.3f,"daemon":%.3f},' "$(mrow "${sratio[passthrough]}")" \
    "$(mrow "${sratio[queue]}")" "$(mrow "${sratio[daemon]}")"
# The CPU per kernel at 100k/s is measured at the rate the clients reached: labelled with that
# rate and the bare stand-in's with the same clients (the client side's own ceiling).
note="target reached"
for nc in 1 8 64; do
    [ "${crate[100000-$nc]}" -lt 90000 ] && note="not every run reached 100k kernels/s: each figure is the daemon's CPU per kernel at the rate reached (daemon_cpu_us_per_kernel_at); bare_kernels_per_s is the same clients' rate on the bare stand-in without gpumux"
done
at_json=
for nc in 1 8 64; do
    at_json+=$(printf '"%s":{"kernels_per_s":%s,"bare_kernels_per_s":%s,"daemon_pct_of_a_core":%s,"client_cpu_us_per_kernel":%s,"bare_client_cpu_us_per_kernel":%s},' "$nc" \
        "${crate[100000-$nc]}" "${cbare[100000-$nc]}" "${cshare[100000-$nc]}" "${ccl[100000-$nc]}" "${bcl[100000-$nc]}")
done
printf '"daemon_cpu":{%s},"daemon_cpu_us_per_kernel":{"1":%s,"8":%s,"64":%s},"daemon_cpu_us_per_kernel_at":{%s},"daemon_cpu_us_per_kernel_note":"%s"}\n' \
    "${cpu_json%,}" "${cus[100000-1]}" "${cus[100000-8]}" "${cus[100000-64]}" "${at_json%,}" "$note"
