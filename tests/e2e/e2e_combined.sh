#!/usr/bin/env bash
# The combined policy on the real path (issue 15, docs/combined.md, docs/daemon.md): gpumuxd
# with `policy = gpumux` keeps a high-priority (HP) client at its latency beside two
# low-priority (LP) clients whose allocations together exceed the stand-in's device memory.
# Usage: e2e_combined.sh BUILD_DIR E2E_CLIENT RUN_DIR
#
# The device: 64 MB (stand-in and daemon alike). HP: 16 MB managed, 1 ms kernels, each request
# one kernel and a synchronisation, 4 ms apart. LP: two clients of 40 MB managed each (80 MB
# together: they cannot both be resident), 500 us kernels back to back, each writing a pattern
# into its buffer first and reading it back at the end.
# The LP clients launch at nice 10 (e2e_client --nice), as batch work beside a service is: the HP
# latency measured is the GPU policy's, not that of five processes sharing two loaded cores. Their
# setup (40 MB of pattern written) and read-back run at the test's level where the system lets
# them go back (root): at nice 10 on a loaded machine they took tens of seconds each.
#
# 1. HP alone, before and after step 2: its p99 request latency (launch to kernel end, the first
#    WARM requests left out: its memory comes in then), the larger of the two (a loaded machine
#    moves p99s by milliseconds; both runs see the load the shared run saw).
# 2. HP beside the two LP clients: its p99 at most 2 x alone + 2 ms. The 2 ms leave room for a
#    loaded 2-core machine and for what the policy lets an HP request wait for (one LP kernel
#    of 0.5 ms, one migration piece of 4 MiB, 0.17 ms); an HP request that waits for an LP time
#    slice (50 ms), for its own pages to come back behind the LP clients' migrations, or for its
#    grant behind LP evictions exceeds it. GMX_E2E_COMBINED_POLICY=timeslice runs the same test
#    under timeslice, which fails it (p99 75 ms); so it did with the protection of HP's memory
#    turned off (15-24 ms with 20 ms slices; at load average 21 once only by the check that
#    HP's memory is never evicted) and with grants always queued behind evictions (26 ms).
#    Beside it, a count that a slow machine moves far less: at most 2 LP kernels start while
#    one HP request waits (one granted
#    to each LP client, 1 in flight each, before HP came; 0 measured; timeslice: 122). Both LP
#    clients run kernels while HP runs, complete in launch order and read their pattern
#    back intact; no kernel of any client ran slowed by a fault; the stand-in never found its
#    memory full; under gpumux HP's memory was never evicted and every migration order is one
#    piece (4 MB) at most.
# 2b. LP throughput: the LP clients' kernels/s while HP ran, and the same clients alone under the
#    same daemon for as long (printed for docs/combined.md; not a bound).
# 2c. Two LP clients whose memory fits (4 MB each): the one whose turn it is holds a lease
#    bounded by HP's predicted gap, revoked when HP launches: LP kernels go under leases, and
#    at most 2 LP kernels start while one HP request waits (one leased before the client reads
#    the revoke, one granted before HP came); LP kernels/s beside HP and alone printed.
# 3. An LP client killed (SIGKILL) while migrations are under way: the daemon releases it, HP
#    and the other LP finish, and the daemon's books are back to zero.
set -u
SCEN=combined B=$1 CLIENT=$2 R=$3
. "$(dirname "$0")/e2e_lib.sh"

POLICY=${GMX_E2E_COMBINED_POLICY:-gpumux}
export GPUMUX_STANDIN_MEM_MB=64
CONF=("policy = $POLICY" "device_memory_mb = 64" "slice_us = 50000" "inflight = 1" "piece_us = 200")
HPK=1000 HPGAP=4000 HPN=150 WARM=10 LPK=500 LPMB=40 HPMB=16 PIECE=$((4 << 20))

# latencies NAME: NAME's request latencies in us (launch to its kernel's end), warm-up left out.
latencies() {
    local pid
    pid=$(pid_of "$1")
    sed -n 's/^launch .* t_ns=//p' "$R/$1.out" >"$R/$1.launch"
    grep " pid=$pid .*kind=kernel" "$R/standin.log" | sed 's/start_ns=\([0-9]*\) end_ns=\([0-9]*\) .*/\1 \2/' |
        sort -n | cut -d' ' -f2 >"$R/$1.end"
    paste -d' ' "$R/$1.launch" "$R/$1.end" | awk -v w=$WARM 'NR > w && NF == 2 { printf "%d\n", ($2 - $1) / 1000 }' \
        >"$R/$1.lat"
}

# p99 FILE: the 99th percentile (nearest rank) of the numbers in FILE.
p99() { sort -n "$1" | awk '{ v[NR] = $1 } END { k = int(NR * 0.99 + 0.999); if (k < 1) k = 1; print v[k] + 0 }'; }

# waited_behind HP LP...: the most kernels of the LP clients that started on the device while
# one request of HP waited (from HP's clock before its call to its kernel's start). A loaded
# machine that delays every process alike hardly moves it (the LP clients run at nice 10); HP
# alone held up between its clock reading and its call would let LP kernels start meanwhile.
waited_behind() {
    local hp=$1 pid n
    shift
    pid=$(pid_of "$hp")
    grep " pid=$pid .*kind=kernel" "$R/standin.log" | sed 's/^start_ns=\([0-9]*\) .*/\1/' | sort -n >"$R/$hp.start"
    for n in "$@"; do pid=$(pid_of "$n"); grep " pid=$pid .*kind=kernel" "$R/standin.log"; done |
        sed 's/^start_ns=\([0-9]*\) .*/\1/' | sort -n >"$R/$hp.lpstart"
    # The worst request's index, wait and LP start offsets go to $R/$hp.worst (for a failure's message).
    paste -d' ' "$R/$hp.launch" "$R/$hp.start" | awk -v f="$R/$hp.lpstart" -v w="$R/$hp.worst" '
        BEGIN { while ((getline x < f) > 0) lp[n++] = x }
        NF == 2 { c = 0; s = ""; for (i = 0; i < n; i++) if (lp[i] > $1 && lp[i] < $2) { c++; s = s sprintf(" +%d", (lp[i] - $1) / 1000) }
            if (c > m) { m = c; d = sprintf("request %d waited %d us; LP kernels started at%s us", NR - 1, ($2 - $1) / 1000, s) } }
        END { print m + 0; print (d ? d : "none") > w }'
}

# nominal NAME US: every kernel of NAME ran for exactly US us (none slowed by a demand fault).
nominal() {
    local pid slow
    pid=$(pid_of "$1")
    slow=$(grep " pid=$pid .*kind=kernel" "$R/standin.log" | grep -vc "dur_ns=$(($2 * 1000))$")
    [ "$slow" -eq 0 ] || fail "$1: $slow kernels ran with their memory away (demand faults)"
}

# alone NAME: HP alone, its p99 in $R/NAME.p99.
alone() {
    start_daemon "${CONF[@]}"
    client $1 0 --oversubscribe -- --kernels hp:$HPK --count $HPN --gap-us $HPGAP --alloc-mb $HPMB
    wait "$(eval echo \$PID_$1)"
    stop_daemon
    check_order $1
    latencies $1
    p99 "$R/$1.lat" >"$R/$1.p99"
    echo "HP alone ($1): p99 $(cat "$R/$1.p99") us over $(wc -l <"$R/$1.lat") requests"
}

# --- 1. HP alone
alone alone

# --- 2. HP beside two LP clients of 40 MB each on 64 MB
start_daemon "${CONF[@]}"
rm -f "$R/go" "$R/hpdone"
client hp 0 --oversubscribe -- --kernels hp:$HPK --count $HPN --gap-us $HPGAP --alloc-mb $HPMB --start-when "$R/go"
for n in la lb; do
    client $n 7 --oversubscribe -- --nice 10 --kernels $n:$LPK --count 1000000 --sync-every 4 --alloc-mb $LPMB --verify 1 \
        --start-when "$R/go" --until "$R/hpdone"
done
go hp la lb
wait $PID_hp
"$G" status --json >"$R/status2lp.json" # the LP clients' leased releases, while they still run
touch "$R/hpdone"
wait $PID_la $PID_lb
"$G" status --json >"$R/status.json"
stop_daemon
alone alone2
ALONE=$(cat "$R/alone.p99" "$R/alone2.p99" | sort -n | tail -1)
check_order hp
latencies hp
SHARED=$(p99 "$R/hp.lat")
BOUND=$((2 * ALONE + 2000))
WAITK2=$(waited_behind hp la lb)
echo "policy $POLICY: HP beside two LP clients: p99 $SHARED us (alone $ALONE us, bound $BOUND us); at most $WAITK2 LP kernels started while an HP request waited"
[ "$SHARED" -le "$BOUND" ] || fail "HP p99 $SHARED us beside the LP clients exceeds 2 x alone ($ALONE us) + 2 ms"
[ "$WAITK2" -le 2 ] || fail "$WAITK2 LP kernels started while one HP request waited (at most 2: one granted to each LP client before HP came): $(cat "$R/hp.worst")"
hp_first=$(head -1 "$R/hp.launch") hp_last=$(tail -1 "$R/hp.end")
for n in la lb; do
    check_order $n
    grep -q "^verified $LPMB MB" "$R/$n.out" || fail "$n did not read its pattern back intact: $(tail -2 "$R/$n.out")"
    pid=$(pid_of $n)
    during=$(grep " pid=$pid .*kind=kernel" "$R/standin.log" |
        awk -v a="$hp_first" -v b="$hp_last" '{ split($1, s, "="); if (s[2] > a && s[2] < b) c++ } END { print c + 0 }')
    leased=$(jq --arg n "$n" '[.clients[] | select(.name == $n) | .leased] | add // 0' "$R/status2lp.json")
    echo "$n: $(grep -c '^launch ' "$R/$n.out") kernels, $during while HP ran, $leased under leases; $(grep -c 'migrate load' "$R/$n.shim") loads, $(grep -c 'migrate evict' "$R/$n.shim") evictions"
    [ "$during" -ge 20 ] || fail "$n ran only $during kernels while HP ran: LP work was not let into HP's gaps"
done
for n in hp la lb; do
    k=$LPK; [ $n = hp ] && k=$HPK
    nominal $n $k
done
full=$(grep -c "kind=memfull" "$R/standin.log")
[ "$full" -eq 0 ] || fail "the stand-in found its memory full $full times: $(grep -m1 kind=memfull "$R/standin.log")"
ev=$(jq .migration.evicted_bytes "$R/status.json")
echo "daemon: $(jq -c .migration "$R/status.json")"
[ "$ev" -gt 0 ] || fail "80 MB of LP memory on 64 MB evicted nothing: the test no longer oversubscribes"
if [ "$POLICY" = gpumux ]; then
    hp_ev=$(grep -c "migrate evict" "$R/hp.shim")
    [ "$hp_ev" -eq 0 ] || fail "HP's memory was evicted $hp_ev times for LP work"
    big=$(cat "$R"/h*.shim "$R"/l*.shim | sed -n 's/.*daemon: migrate [a-z]* ptr=[0-9a-fx]* len=\([0-9]*\).*/\1/p' |
        sort -n | tail -1)
    echo "largest migration order: $((${big:-0} >> 10)) KiB (piece $((PIECE >> 10)) KiB)"
    [ "${big:-0}" -le $PIECE ] || fail "a migration order of $big bytes exceeds the piece ($PIECE bytes)"
fi

# --- 2b. LP throughput in HP's gaps: kernels/s the two LP clients ran while HP ran, against the
#    same two LP clients alone under the same daemon for as long (figures, not a bound: the
#    machine's load moves them; docs/combined.md quotes them).
WIN=$((hp_last - hp_first))
SHARED_K=0
for n in la lb; do
    pid=$(pid_of $n)
    SHARED_K=$((SHARED_K + $(grep " pid=$pid .*kind=kernel" "$R/standin.log" |
        awk -v a="$hp_first" -v b="$hp_last" '{ split($1, s, "="); if (s[2] > a && s[2] < b) c++ } END { print c + 0 }')))
done
start_daemon "${CONF[@]}"
rm -f "$R/go" "$R/hpdone"
for n in ma mb; do
    client $n 7 --oversubscribe -- --nice 10 --kernels $n:$LPK --count 1000000 --sync-every 4 --alloc-mb $LPMB --verify 1 \
        --start-when "$R/go" --until "$R/hpdone"
done
go ma mb
sleep "$(awk -v w=$WIN 'BEGIN { printf "%.3f", w / 1e9 + 0.5 }')"
"$G" status --json >"$R/status2b.json"
touch "$R/hpdone"
wait $PID_ma $PID_mb
stop_daemon
starts=$(for n in ma mb; do pid=$(pid_of $n); grep " pid=$pid .*kind=kernel" "$R/standin.log"; done |
    sed 's/^start_ns=\([0-9]*\) .*/\1/' | sort -n)
t0=$(echo "$starts" | head -1)
ALONE_K=$(echo "$starts" | awk -v a="${t0:-0}" -v w=$WIN '$1 >= a && $1 < a + w { c++ } END { print c + 0 }')
rate() { awk -v k=$1 -v w=$WIN 'BEGIN { printf "%.0f", k / (w / 1e9) }'; }
LEASED_LA=$(jq '[.clients[] | select(.name == "la" or .name == "lb") | .leased] | add // 0' "$R/status2lp.json")
LEASED_MA=$(jq '[.clients[] | select(.name == "ma" or .name == "mb") | .leased] | add // 0' "$R/status2b.json")
echo "LP throughput: $(rate $SHARED_K) kernels/s beside HP ($SHARED_K in $((WIN / 1000000)) ms), $(rate $ALONE_K) kernels/s alone ($ALONE_K in as long): $(awk -v s=$SHARED_K -v a=$ALONE_K 'BEGIN { printf "%.0f", a ? 100 * s / a : 0 }')% of alone; released under leases: $LEASED_LA beside HP (until HP ended), $LEASED_MA alone (until they were stopped)"
for n in ma mb; do check_order $n; done

# --- 2c. LP clients whose memory fits (no --oversubscribe, 4 MB each): under gpumux the one
#    whose turn it is releases under a lease bounded by HP's predicted gap, revoked when HP
#    launches. HP keeps the same bound; the LP kernels/s beside HP and alone are printed.
# lp_rate NAME...: kernels/s of the named clients over $WIN from their first kernel, and how many
# they released under a lease (the daemon's status, before it stops).
lp_count() {
    local a=$1 b=$2; shift 2
    for n in "$@"; do pid=$(pid_of $n); grep " pid=$pid .*kind=kernel" "$R/standin.log"; done |
        awk -v a="$a" -v b="$b" '{ split($1, s, "="); if (s[2] > a && s[2] < b) c++ } END { print c + 0 }'
}
start_daemon "${CONF[@]}"
rm -f "$R/go" "$R/hpdone"
client hp3 0 --oversubscribe -- --kernels hp:$HPK --count $HPN --gap-us $HPGAP --alloc-mb $HPMB --start-when "$R/go"
for n in fa fb; do
    client $n 7 -- --nice 10 --kernels $n:$LPK --count 1000000 --sync-every 4 --alloc-mb 4 --start-when "$R/go" --until "$R/hpdone"
done
go hp3 fa fb
wait $PID_hp3
"$G" status --json >"$R/status2c.json"
touch "$R/hpdone"
wait $PID_fa $PID_fb
stop_daemon
check_order hp3
latencies hp3
SHARED3=$(p99 "$R/hp3.lat")
h3_first=$(head -1 "$R/hp3.launch") h3_last=$(tail -1 "$R/hp3.end")
W3=$((h3_last - h3_first))
K3=$(lp_count "$h3_first" "$h3_last" fa fb)
LEASED=$(jq '[.clients[] | select(.name == "fa" or .name == "fb") | .leased] | add // 0' "$R/status2c.json")
# The most LP kernels that started while one HP request waited (launch to its kernel's start):
# the leased one released before the client read the revoke, and one granted before HP came.
WAITK=$(waited_behind hp3 fa fb)
echo "policy $POLICY: HP beside two LP clients that fit: p99 $SHARED3 us (not a bound here: alone $ALONE us); at most $WAITK LP kernels started while an HP request waited; LP $K3 kernels in $((W3 / 1000000)) ms while HP ran, $LEASED released under leases"
[ "$WAITK" -le 2 ] || fail "$WAITK LP kernels started while one HP request waited (at most 2: one leased before the revoke, one granted before HP came): $(cat "$R/hp3.worst")"
if [ "$POLICY" = gpumux ]; then
    [ "$LEASED" -gt 0 ] || fail "no LP kernel was released under a lease in HP's gaps"
fi
start_daemon "${CONF[@]}"
rm -f "$R/go" "$R/hpdone"
for n in fc fd; do
    client $n 7 -- --nice 10 --kernels $n:$LPK --count 1000000 --sync-every 4 --alloc-mb 4 --start-when "$R/go" --until "$R/hpdone"
done
go fc fd
sleep "$(awk -v w=$W3 'BEGIN { printf "%.3f", w / 1e9 + 0.5 }')"
touch "$R/hpdone"
wait $PID_fc $PID_fd
stop_daemon
t0=$(for n in fc fd; do pid=$(pid_of $n); grep " pid=$pid .*kind=kernel" "$R/standin.log"; done | sed 's/^start_ns=\([0-9]*\) .*/\1/' | sort -n | head -1)
K3A=$(lp_count "$((t0 - 1))" "$((t0 + W3))" fc fd)
echo "LP throughput (memory fits): $(awk -v k=$K3 -v w=$W3 'BEGIN { printf "%.0f", k / (w / 1e9) }') kernels/s beside HP, $(awk -v k=$K3A -v w=$W3 'BEGIN { printf "%.0f", k / (w / 1e9) }') kernels/s alone: $(awk -v s=$K3 -v a=$K3A 'BEGIN { printf "%.0f", a ? 100 * s / a : 0 }')% of alone"
for n in fa fb fc fd; do check_order $n; done

# --- 3. an LP client killed while migrations are under way
start_daemon "${CONF[@]}"
rm -f "$R/go" "$R/hpdone"
client hp2 0 --oversubscribe -- --kernels hp:$HPK --count 100 --gap-us $HPGAP --alloc-mb $HPMB --start-when "$R/go"
for n in lc ld; do
    client $n 7 --oversubscribe -- --nice 10 --kernels $n:$LPK --count 1000000 --sync-every 4 --alloc-mb $LPMB --verify 1 \
        --start-when "$R/go" --until "$R/hpdone"
done
go hp2 lc ld
for _ in $(seq 400); do [ "$(grep -c "daemon: migrate" "$R/lc.shim" 2>/dev/null)" -ge 30 ] && break; sleep 0.01; done
VPID=$(pid_of lc)
kill -9 "$VPID"
echo "killed lc (pid $VPID) after $(grep -c "daemon: migrate" "$R/lc.shim") migration orders"
wait $PID_hp2
touch "$R/hpdone"
wait $PID_ld
check_order hp2
check_order ld
grep -q "^verified $LPMB MB" "$R/ld.out" || fail "ld did not read its pattern back intact"
grep -q "pid $VPID, lc): disconnected; releasing" "$R/daemon.log" || fail "the daemon did not release the killed client"
for _ in $(seq 100); do
    "$G" status --json >"$R/status3.json"
    jq -e '.n_clients == 0' "$R/status3.json" >/dev/null && break
    sleep 0.05
done
jq -e '[.accounts[]] | all(. == 0)' "$R/status3.json" >/dev/null ||
    fail "the daemon's books are not back to zero: $(jq -c .accounts "$R/status3.json")"
echo "after the kill: accounts $(jq -c .accounts "$R/status3.json")"
stop_daemon
finish
