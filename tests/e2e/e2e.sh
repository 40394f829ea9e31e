#!/usr/bin/env bash
# End-to-end scenarios: gpumuxd + `gpumux run` + the interposer + real client processes on the
# stand-in driver. Usage: e2e.sh SCENARIO BUILD_DIR E2E_CLIENT RUN_DIR
# Assertions read the stand-in's execution log, the clients' launch logs, the daemon's log and
# `gpumux status --json`; none depends on how long anything took.
set -u
SCEN=$1 B=$2 CLIENT=$3 R=$4
. "$(dirname "$0")/e2e_lib.sh"

case $SCEN in
hp_lp)
    # A high-priority client with idle gaps and a saturating low-priority client. Bound for
    # timeslice (docs/daemon.md): while a high-priority kernel waits, at most
    # 2*ceil(slice/lp) + 2*inflight low-priority kernels start (the slice running when it
    # arrived, one that may begin as its notice arrives, in-flight work in the daemon's and
    # the driver's hands). For a policy that preempts at kernel boundaries (fikit): 2*inflight.
    # Low-priority kernels of 2 ms: a daemon descheduled for a ms or two on a loaded machine
    # must not read as a broken bound (with 500 us kernels it did, once in a while).
    SLICE=1000 INFL=2 LPUS=2000
    POLICY=timeslice
    "$D" --help | grep -q fikit && POLICY=fikit
    start_daemon "policy = $POLICY" "slice_us = $SLICE" "inflight = $INFL"
    client lp 7 -- --kernels lpa:$LPUS,lpb:$((LPUS + 100)) --count 600 --sync-every 32
    sleep 0.1
    client hp 0 -- --kernels hp:200 --count 40 --gap-us 2000
    wait $PID_lp $PID_hp
    check_order hp
    check_order lp
    # Each synchronisation with work outstanding reached the policy (on_host_wait).
    waits=$("$G" status --json | jq .host_waits)
    echo "host waits seen by the daemon: $waits"
    [ "$waits" -ge 40 ] || fail "only $waits host waits reached the daemon (hp synchronises after each of its 40 kernels)"
    if [ "$POLICY" = fikit ]; then BOUND=$((2 * INFL)); else BOUND=$((2 * ((SLICE + LPUS - 1) / LPUS) + 2 * INFL)); fi
    worst=$(lp_starts_while_hp_waits)
    echo "policy $POLICY: at most $worst low-priority kernels started while a high-priority kernel waited (bound $BOUND)"
    [ "$worst" -le "$BOUND" ] || fail "$worst low-priority kernels started while a high-priority kernel waited (bound $BOUND)"
    ;;
lease_revoke)
    # Leases (docs/protocol.md): a low-priority client alone is the best priority, so fikit
    # lets it stream kernels under a lease (no notice or grant per kernel). A high-priority
    # client arrives: the low-priority lease is revoked mid-stream, and each high-priority kernel
    # waits at most one low-priority kernel: of the low-priority kernels, at most one starts
    # between a high-priority launch and that kernel's start (inflight = 1: the one running may
    # finish, one more may start if the revoke was not there yet when it did). The low-priority
    # kernels last 10 ms: the revoke has a whole kernel to arrive, and a daemon descheduled for a
    # few ms on a loaded machine (CI runs tests two at a time on two cores) does not count as a
    # second kernel.
    LPUS=10000
    start_daemon "policy = fikit" "inflight = 1"
    client lp 7 -- --kernels lpa:$LPUS,lpb:$((LPUS + 100)) --count 300 --sync-every 16
    leased=0
    for _ in $(seq 200); do
        leased=$("$G" status --json 2>/dev/null | jq '[.clients[] | select(.name == "lp") | .leased] | add // 0')
        [ "$leased" -ge 20 ] && break
        sleep 0.05
    done
    echo "low-priority kernels released under a lease before the high-priority client: $leased"
    [ "$leased" -ge 20 ] || fail "the low-priority client alone released only $leased kernels under a lease"
    client hp 0 -- --kernels hp:100 --count 20 --gap-us 3000
    wait $PID_hp
    st=$("$G" status --json)
    lp_after=$(jq '[.clients[] | select(.name == "lp") | .leased] | add // 0' <<<"$st")
    revokes=$(jq .revokes <<<"$st")
    echo "leases sent $(jq .leases <<<"$st"), revoked $revokes; low-priority leased releases now $lp_after"
    [ "$revokes" -ge 1 ] || fail "no lease was revoked when the high-priority client arrived"
    [ "$(jq .protocol_errors <<<"$st")" = 0 ] || fail "protocol errors: $(grep 'cut off' "$R/daemon.log")"
    wait $PID_lp
    check_order hp
    check_order lp
    worst=$(lp_starts_while_hp_waits)
    echo "at most $worst low-priority kernels started while a high-priority kernel waited (bound 1)"
    [ "$worst" -le 1 ] || fail "$worst low-priority kernels started while a high-priority kernel waited (bound 1)"
    # Each of the 300 launches asked the leased path once, on the way in: released under the
    # lease or sent to the queue for one reason (the bound, the revoke, commands queued before
    # it), never both or twice (a launch the lease did not take is queued, not asked again).
    line=$(grep -h 'queue released' "$R/lp.shim")
    echo "lp: $line"
    num() { sed -n "s/.* $1=\([0-9]*\).*/\1/p" <<<"$line"; }
    ways=$(($(num leased_straight) + $(num diverted_running) + $(num diverted_ring_full) + $(num diverted_behind) +
        $(num diverted_unleased) + $(num diverted_other)))
    [ "$ways" = 300 ] || fail "the low-priority client's 300 launches were counted $ways times on the leased path's ways (expected each once)"
    ;;
lease_deep)
    # The time-sized lease (docs/daemon.md, "Leases"): a client alone whose kernels are short
    # (zero-length here) holds a lease deeper than inflight = 2, sized so that its backlog's
    # predicted time stays within the budget (core's GMX_LEASE_BACKLOG_NS). A high-priority
    # client arrives: the lease is revoked mid-stream, no release ever went beyond the lease in
    # effect (the daemon cuts off a client that does: protocol_errors), and the low-priority GPU
    # time that started while a high-priority kernel waited stays within the budget (50 us).
    # (Counting those kernels would say nothing: zero-length ones also start one after another
    # under fikit's lease of one while the high-priority launch's notice is on its way.)
    # The low-priority client runs until the file lp_stop exists (not a fixed count): a build
    # slowed by sanitizers on a loaded machine once finished its 400,000 kernels before the
    # high-priority client came, and nothing was left to revoke.
    start_daemon "policy = fikit"
    rm -f "$R/lp_stop"
    client lp 7 -- --kernels z:0 --count 1000000000 --sync-every 64 --until "$R/lp_stop"
    deep=0
    for _ in $(seq 200); do
        d=$("$G" status --json 2>/dev/null | jq '[.clients[] | select(.name == "lp") | .lease_inflight] | max // 0')
        [ "$d" -gt "$deep" ] && deep=$d
        [ "$deep" -gt 2 ] && break
        sleep 0.05
    done
    echo "the low-priority client alone: lease bound $deep (inflight = 2)"
    [ "$deep" -gt 2 ] || fail "the client alone with zero-length kernels never held a lease deeper than 2"
    client hp 0 -- --kernels hp:100 --count 20 --gap-us 3000
    wait $PID_hp
    st=$("$G" status --json)
    revokes=$(jq .revokes <<<"$st")
    echo "revoked $revokes; low-priority leased releases $(jq '[.clients[] | select(.name == "lp") | .leased] | add // 0' <<<"$st")"
    [ "$revokes" -ge 1 ] || fail "no lease was revoked when the high-priority client arrived"
    [ "$(jq .protocol_errors <<<"$st")" = 0 ] || fail "protocol errors: $(grep 'cut off' "$R/daemon.log")"
    touch "$R/lp_stop"
    wait "$PID_lp"
    check_order hp
    worst=$(lp_time_while_hp_waits)
    echo "at most $worst ns of low-priority GPU time started while a high-priority kernel waited (bound 50000)"
    [ "$worst" -le 50000 ] || fail "$worst ns of low-priority GPU time started while a high-priority kernel waited (bound 50000)"
    ;;
lease_long)
    # A client alone holds its lease for as long as it runs: 12,000 commands (the interposer's
    # seq table is rebuilt every 4,096) cost one notice, the first, and no grant after it.
    start_daemon "policy = fikit"
    rm -f "$R/end"
    client solo 3 -- --kernels s:1 --count 12000 --sync-every 64 --quiet 1 --end-when "$R/end"
    for _ in $(seq 600); do grep -q '^waiting$' "$R/solo.out" 2>/dev/null && break; sleep 0.05; done
    st=$("$G" status --json)
    touch "$R/end"
    wait $PID_solo
    echo "solo: $(jq -c '[.clients[] | select(.name == "solo") | {notices, grants, leased}][0]' <<<"$st")"
    n=$(jq '[.clients[] | select(.name == "solo") | .notices][0] // 99999' <<<"$st")
    l=$(jq '[.clients[] | select(.name == "solo") | .leased][0] // 0' <<<"$st")
    [ "$n" -le 2 ] || fail "the client alone sent $n notices (expected its first only: the rest under its lease)"
    [ "$l" -ge 11990 ] || fail "only $l commands released under the lease"
    [ "$(jq .protocol_errors <<<"$st")" = 0 ] || fail "protocol errors: $(grep 'cut off' "$R/daemon.log")"
    ;;
lease_pipeline)
    # A client alone whose kernels are longer than a lease's time budget holds a lease of two in
    # flight (fikit's inflight_max), fewer than the interposer's own bound (4): its synchronising
    # thread must release each next kernel as the oldest ends, while the other still runs, not at
    # the dispatcher's next poll (made 100 ms here, longer than a kernel) or a later wake-up (the
    # build before waited about 0.5 ms after every second kernel on this test), whether it
    # synchronises the stream, an event recorded on it, or the context. Ordered, not timed: each
    # kernel after the second starts on the stand-in exactly when the one before it ends (the
    # device never ran dry; a release up to 50 ms late still keeps that).
    start_daemon "policy = fikit"
    for how in stream event ctx; do
        GPUMUX_SHIM_POLL_US=100000 client pl$how 3 -- --kernels p:50000 --count 6 --sync-every 6 --sync-with $how
        eval "wait \$PID_pl$how"
        check_order pl$how
        pid=$(pid_of pl$how)
        grep " pid=$pid .*kind=kernel" "$R/standin.log" | sed 's/^start_ns=\([0-9]*\) end_ns=\([0-9]*\).*/\1 \2/' | sort -n >"$R/pl$how.k"
        echo "pl$how: $(wc -l <"$R/pl$how.k") kernels; idle gaps before each (ms): $(awk 'NR > 1 {printf "%.1f ", ($1 - e) / 1e6} {e = $2}' "$R/pl$how.k")"
        late=$(awk 'NR > 2 && $1 != e {n++} {e = $2} END {print n + 0}' "$R/pl$how.k")
        [ "$(wc -l <"$R/pl$how.k")" = 6 ] || fail "$how: $(wc -l <"$R/pl$how.k") of 6 kernels on the stand-in"
        [ "$late" = 0 ] || fail "$how: $late of kernels 3-6 started after the device ran dry: released at a poll, not when the oldest ended"
    done
    ;;
rate_line)
    # A rate run's own costs (bench/daemon reads them per client): its CPU time and sleeps from its
    # first launch to its last kernel's end, not its wait for the start file, which polls every
    # millisecond (some 500 sleeps here; counted from outside, 64 clients waiting for each other
    # added more sleeps than their kernels did). Counted, not timed: 64 kernels of 0 us through
    # the interposer and the daemon sleep a few times at most.
    start_daemon "policy = fikit"
    rm -f "$R/go"
    client rl 3 -- --kernels z:0 --count 64 --sync-every 64 --quiet 1 --start-when "$R/go"
    for _ in $(seq 400); do grep -q "^ready$" "$R/rl.out" 2>/dev/null && break; sleep 0.05; done
    sleep 0.5
    touch "$R/go"
    wait $PID_rl
    line=$(grep '^rate ' "$R/rl.out")
    echo "rl: $line"
    sleeps=$(sed -n 's/.* sleeps=\([0-9]*\).*/\1/p' <<<"$line")
    cpu=$(sed -n 's/.* cpu_ns=\([0-9]*\).*/\1/p' <<<"$line")
    if [ -z "$sleeps" ] || [ -z "$cpu" ]; then
        fail "the rate line gives no cpu_ns and sleeps of the run"
    elif [ "$sleeps" -gt 64 ]; then
        fail "$sleeps sleeps counted for 64 kernels: the wait for the start file is counted"
    fi
    ;;
lease_fast)
    # The leased path's own cost (counted, not timed: the shim's log line at exit). A client
    # alone under its lease launches kernels of zero length: each launch goes to the driver from
    # the calling thread (no command copy, no queue, no dispatcher), and completion is seen by
    # the stream's query, so no completion event is recorded in the driver at all (a kernel is
    # complete by the next launch). Its completions all reach the daemon (none held back).
    start_daemon "policy = fikit"
    # A launch goes through the queue instead when the machine holds up the stand-in's engine
    # thread (the lease's bound waits for kernels still running) or the daemon (no room in the
    # up ring after GMX_FULL_YIELDS), as they must; the shim counts each such launch by reason.
    # The measure is taken again then (up to 3 runs), and reported as skipped if no run was
    # undisturbed; every run must account for each diverted launch with a reason.
    for attempt in 1 2 3; do
        Z=zero$attempt
        # It launches once connected and holding its lease (fikit leases the best priority at
        # once), so that no launch waits for the first grant behind a notice.
        rm -f "$R/go"
        client $Z 3 -- --kernels z:0 --count 3000 --sync-every 64 --start-when "$R/go"
        for _ in $(seq 400); do
            grep -q "^ready$" "$R/$Z.out" 2>/dev/null &&
                "$G" status --json | jq -e --arg n $Z '[.clients[] | select(.name == $n) | .lease_inflight] | add > 0' >/dev/null && break
            sleep 0.05
        done
        touch "$R/go"
        eval "wait \$PID_$Z"
        check_order $Z
        line=$(grep -h 'queue released' "$R/$Z.shim")
        echo "$Z: $line"
        num() { sed -n "s/.* $1=\([0-9]*\).*/\1/p" <<<"$line"; }
        [ -n "$line" ] || fail "no 'queue released' line in the shim log"
        diverted=$((3000 - $(num leased_straight)))
        why=$(($(num diverted_running) + $(num diverted_ring_full) + $(num diverted_behind)))
        [ "$(num diverted_unleased)" = 0 ] && [ "$(num diverted_other)" = 0 ] && [ "$diverted" = "$why" ] ||
            fail "$diverted of 3000 launches went through the queue, $why of them for a reason the load explains (see the line above)"
        [ "$diverted" = 0 ] && break
        echo "$Z: $diverted launches went through the queue while the machine held up the engine or the daemon"
        [ $attempt = 3 ] && { echo "SKIPPED: 3 runs in a row were held up by the machine's load; the leased path's counts were not measured undisturbed"; exit 77; }
    done
    [ "$(num dispatcher)" -le 1 ] || fail "$(num dispatcher) commands were released by the dispatcher thread (expected at most the event record that connected it)"
    [ "$(num completion_events)" = 0 ] || fail "$(num completion_events) completion events recorded for kernels complete by the next launch"
    # The dispatcher polls completions while launches go on instead of being woken for each
    # (a futex call and a lock hand-over per launch), and the stream is asked about completions
    # only when the lease's bound needs one (at most one per two launches at inflight = 2; fewer
    # once the lease is sized by time, e2e_lease_deep), and
    # then before the policy's one call for that launch.
    [ "$(num dispatcher_wakes)" -le 300 ] || fail "the dispatcher was woken $(num dispatcher_wakes) times for 3000 leased launches (expected a few: it polls while launches go on)"
    [ "$(num stream_queries)" -le 1600 ] || fail "$(num stream_queries) stream queries for 3000 leased launches (expected at most one per two, the lease's bound)"
    link=$(grep -h 'daemon link' "$R/$Z.shim")
    echo "$Z: $link"
    lnum() { sed -n "s/.* $1=\([0-9]*\).*/\1/p" <<<"$link"; }
    [ -n "$link" ] || fail "no 'daemon link' line in the shim log"
    [ "$(lnum leased)" = 3000 ] || fail "the link counted $(lnum leased) leased releases of 3000"
    # One policy call (the daemon link's lock, a clock reading) per leased launch, not one more
    # for each launch that needs a completion first. Counted apart, as the machine's doing: a
    # yield for room in the up ring, and a second call when the stream, looked at first, still
    # had every kernel running (the stand-in's engine thread held up).
    extra=$(($(num full_yields) + $(num lease_reasks)))
    [ "$(lnum lease_calls)" -le $((3010 + extra)) ] || fail "$(lnum lease_calls) policy calls for 3000 leased launches (expected one each, and $extra for yields and looks that found every kernel running)"
    # Every launch and completion is reported (RELEASED and COMPLETE: 6000 entries, but for the
    # last few completions, which the process may end before reporting), and the daemon is
    # looked at (a fence, its waiting word) once per batch, not per entry.
    [ "$(lnum batched)" -ge 5990 ] || fail "only $(lnum batched) batched entries for 3000 leased launches and their completions"
    [ "$(lnum looks)" -le $(($(lnum batched) / 16)) ] || fail "$(lnum looks) looks at the daemon for $(lnum batched) batched entries (expected one per 32, or per dispatcher poll)"
    # Runs (protocol 4): consecutive releases within 2 µs, and completions seen together, travel
    # as one entry each, so fewer entries go up than launches and completions are reported.
    entries=$(lnum entries)
    [ -n "$entries" ] && [ "$entries" -le $(($(lnum batched) * 7 / 8)) ] || fail "${entries:-no} entries for $(lnum batched) batched reports (expected runs: completions seen together in one entry)"
    # Times for the entries come from the TSC where it is invariant (re-anchored to the clock every
    # millisecond), not from a clock reading per launch.
    if [ "$(sed -n 's/.* stamp=\([a-z]*\).*/\1/p' <<<"$link")" = tsc ]; then
        [ "$(lnum clock_reads)" -le 750 ] || fail "$(lnum clock_reads) clock readings for 3000 leased launches (expected one per millisecond or so)"
    fi
    st=$("$G" status --json)
    [ "$(jq .protocol_errors <<<"$st")" = 0 ] || fail "protocol errors: $(grep 'cut off' "$R/daemon.log")"
    ;;
profiles)
    # The profile store: a task measured under fikit leaves its profile in profile_dir when
    # its last client disconnects, whoever else is still connected; a restarted daemon loads it for the next client of that name instead of
    # measuring again. A name that cannot be a file name is never written.
    "$D" --help | grep -q fikit || { echo "SKIPPED: no fikit policy in this build"; exit 77; }
    start_daemon "policy = fikit" "profile_dir = $R/store/profiles" "inflight = 2"
    # serve's profile is saved when serve leaves, while odd is still connected.
    client odd 5 -- --kernels lp:300 --count 100000 --sync-every 16
    client serve 0 -- --kernels hp:200,hq:300 --count 60 --gap-us 500
    wait $PID_serve
    check_order serve
    for _ in $(seq 100); do [ -s "$R/store/profiles/serve.gmxprof" ] && break; sleep 0.05; done
    [ -s "$R/store/profiles/serve.gmxprof" ] || fail "no profile saved for serve (see $R/daemon.log)"
    kill -0 "$PID_odd" 2>/dev/null || fail "odd ended early: the test no longer shows a save beside a live client"
    kill "$PID_odd"; wait "$PID_odd" 2>/dev/null
    "$G" profile show "$R/store/profiles/serve.gmxprof" >"$R/show.txt" 2>&1 || fail "gpumux profile show refuses the saved profile: $(head -3 "$R/show.txt")"
    grep -q serve "$R/show.txt" || fail "the saved profile is not serve's"
    stop_daemon
    start_daemon "policy = fikit" "profile_dir = $R/store/profiles" "inflight = 2"
    client serve 0 -- --kernels hp:200,hq:300 --count 20 --gap-us 500
    wait $PID_serve
    check_order serve
    grep -q "profile store: loaded $R/store/profiles/serve.gmxprof" "$R/daemon.log" ||
        fail "the restarted daemon did not load serve's profile (see $R/daemon.log)"
    "$G" run --priority 0 --name 'bad/name' -- "$CLIENT" --out "$R/bad.out" --kernels hp:200 --count 5 \
        >/dev/null 2>"$R/bad.err" &
    wait $!
    [ ! -e "$R/store/profiles/bad" ] && [ -z "$(find "$R/store" -name '*name*')" ] ||
        fail "a profile was written for a name that is not a file name"
    echo "ok: profiles saved on disconnect, loaded after a restart, unsafe names not written"
    ;;
memory)
    # Two clients whose memory together exceeds the device (48 + 48 MB on 64 MB): with
    # --oversubscribe their allocations are managed and the daemon migrates them whole at
    # each switch. A kernel that found its memory away would pay demand faults: every kernel
    # running for exactly its nominal time shows the loads preceded the kernels.
    export GPUMUX_STANDIN_MEM_MB=64
    start_daemon "device_memory_mb = 64" "slice_us = 2000"
    # Each keeps its memory until both have launched everything: on a loaded machine one client
    # may run all its kernels before the other's first, and its memory must then be moved out
    # for the other's (a client that left would have freed it: nothing to migrate).
    rm -f "$R/go" "$R/end"
    client ma 5 --oversubscribe -- --kernels ma:300 --count 40 --sync-every 4 --alloc-mb 48 \
        --start-when "$R/go" --linger-when "$R/end"
    client mb 5 --oversubscribe -- --kernels mb:300 --count 40 --sync-every 4 --alloc-mb 48 \
        --start-when "$R/go" --linger-when "$R/end"
    go ma mb
    for n in ma mb; do
        for _ in $(seq 600); do grep -q '^idle$' "$R/$n.out" 2>/dev/null && break; sleep 0.05; done
        grep -q '^idle$' "$R/$n.out" || fail "$n did not finish its kernels while the other kept its memory"
    done
    touch "$R/end"
    wait $PID_ma $PID_mb
    check_order ma
    check_order mb
    for n in ma mb; do
        pid=$(pid_of $n)
        slow=$(grep " pid=$pid .*kind=kernel" "$R/standin.log" | grep -vc "dur_ns=300000$")
        loads=$(grep -c "migrate load" "$R/$n.shim")
        evicts=$(grep -c "migrate evict" "$R/$n.shim")
        echo "$n: $loads loads, $evicts evictions, $slow kernels slowed by faults"
        [ "$slow" -eq 0 ] || fail "$n: $slow kernels ran with their memory away (demand faults)"
        [ "$loads" -ge 1 ] || fail "$n: no migration order reached it"
        # Each load order was run (prefetch logged by the stand-in) before the next kernel.
        awk -v pid="$pid" '$3 == "pid=" pid && $6 == "name=prefetch"' "$R/standin.log" | grep -q . ||
            fail "$n: no prefetch in the stand-in log"
    done
    grep -q "evict" "$R/ma.shim" "$R/mb.shim" || fail "no eviction was ordered although memory was oversubscribed"
    ;;
templates)
    # Working-set templates on the real path. Two clients of 48 MB each on a 64 MB device,
    # whose kernels touch 8 MB windows of their buffer (two windows each, the extent an
    # argument of the kernel). With templates each launch's window is predicted from its
    # arguments, so the daemon loads 2 x 8 MB per client: both fit and nothing is evicted.
    # The same clients without templates migrate whole allocations (48 + 48 > 64 MB).
    # Either way no kernel may fault (every kernel runs its nominal time).
    export GPUMUX_STANDIN_MEM_MB=64
    printf '%s\n' 'gpumux-templates 1' 'kernel 3 8,4,8 T2 ta' 'term a0 length=1/1*a2' 'end' \
        'kernel 3 8,4,8 T2 tb' 'term a0 length=1/1*a2' 'end' >"$R/t.gmxtpl"
    "$G" profile show "$R/t.gmxtpl" >/dev/null || fail "gpumux profile show refuses the templates"
    printf 'gpumux-templates 1\nkernel 3 8,4,8 T2 ta\nterm a0 size=1/1\nend\n' >"$R/bad.gmxtpl"
    "$G" run --oversubscribe --templates "$R/bad.gmxtpl" -- true 2>"$R/bad.err"
    [ $? -eq 1 ] && grep -q "bad.gmxtpl: line 3" "$R/bad.err" ||
        fail "a bad templates file was not refused with its line: $(cat "$R/bad.err")"
    "$G" run --templates "$R/t.gmxtpl" -- true 2>/dev/null
    [ $? -eq 2 ] || fail "--templates without --oversubscribe was accepted"
    for mode in templates whole; do
        start_daemon "device_memory_mb = 64" "slice_us = 2000"
        topt=(--oversubscribe); [ $mode = templates ] && topt+=(--templates "$R/t.gmxtpl")
        rm -f "$R/go"
        for n in ta tb; do
            client $n 5 "${topt[@]}" -- --kernels $n:300 --count 40 --sync-every 4 --alloc-mb 48 \
                --touch-mb 8 --windows 2 --start-when "$R/go"
        done
        go ta tb
        wait $PID_ta $PID_tb
        "$G" status --json >"$R/status-$mode.json"
        stop_daemon
        for n in ta tb; do
            check_order $n
            pid=$(pid_of $n)
            slow=$(grep " pid=$pid .*kind=kernel" "$R/standin.log" | grep -vc "dur_ns=300000$")
            [ "$slow" -eq 0 ] || fail "$mode: $n: $slow kernels ran with their memory away"
            mv "$R/$n.shim" "$R/$n-$mode.shim"
        done
        loaded=$(jq .migration.loaded_bytes "$R/status-$mode.json")
        evicted=$(jq .migration.evicted_bytes "$R/status-$mode.json")
        eval "LOADED_$mode=$loaded EVICTED_$mode=$evicted"
        echo "$mode: loaded $((loaded >> 20)) MB, evicted $((evicted >> 20)) MB"
    done
    [ "$LOADED_templates" -eq $((32 << 20)) ] ||
        fail "with templates the daemon loaded $LOADED_templates bytes, not the 2 x 2 x 8 MB predicted"
    [ "$EVICTED_templates" -eq 0 ] || fail "with templates the daemon evicted $EVICTED_templates bytes"
    [ "$EVICTED_whole" -gt 0 ] || fail "whole allocations (96 MB on 64) were never evicted"
    [ "$LOADED_whole" -ge $((3 * LOADED_templates)) ] ||
        fail "whole allocations moved $LOADED_whole bytes, not several times the templates' $LOADED_templates"
    grep -q "templates: 2 kernels" "$R/ta-templates.shim" || fail "the interposer did not load the templates"
    # A bad file reaching the interposer directly (not through gpumux run): it says why and
    # the program runs, its memory migrated by whole allocations.
    start_daemon "device_memory_mb = 64"
    LD_LIBRARY_PATH=$B/shim GPUMUX_SHIM_POLICY=daemon GPUMUX_OVERSUBSCRIBE=1 GPUMUX_NAME=tc \
        GPUMUX_TEMPLATES=$R/bad.gmxtpl "$CLIENT" --out "$R/tc.out" --kernels tc:100 --count 20 \
        --alloc-mb 8 --touch-mb 2 2>"$R/tc.err" || fail "the client failed with a bad templates file"
    stop_daemon
    grep -q "GPUMUX_TEMPLATES=$R/bad.gmxtpl: line 3" "$R/tc.err" ||
        fail "the interposer did not say why it ignored the templates: $(cat "$R/tc.err")"
    check_order tc
    ;;
stall)
    # A client that stops answering: it announces a kernel, is granted it, and then never
    # reports a completion nor reads again. It is cut off after unresponsive_ms, not waited
    # for, and a high-priority client beside it runs to the end. (A stopped process cannot
    # stand for it here: the stand-in driver's shared lock would stop everyone with it.)
    start_daemon "slice_us = 2000" "unresponsive_ms = 300"
    # hp also records events: work no completion event tracks must still count as done,
    # or hp itself would be taken for unresponsive.
    client hp 0 -- --kernels hp:200 --count 200 --gap-us 2000 --record-every 1
    "$CLIENT" --hostile stall >"$R/stall.out" 2>&1 || fail "stall: $(cat "$R/stall.out")"
    grep -q "granted; now silent" "$R/stall.out" || fail "the stalling client was never granted"
    grep -q "closed by the daemon" "$R/stall.out" || fail "the stalling client was not closed"
    grep -q "stall): cut off: unresponsive: no completion for" "$R/daemon.log" ||
        fail "no cut-off line for the silent client (see $R/daemon.log)"
    wait $PID_hp
    check_order hp
    ! grep -q "hp): cut off" "$R/daemon.log" || fail "hp was cut off: $(grep "hp): cut off" "$R/daemon.log")"
    "$G" status --json >"$R/status.json"
    jq -e '[.clients[] | select(.name == "stall")] | length == 0' "$R/status.json" >/dev/null ||
        fail "the cut-off client is still listed"
    echo "silent client: $(grep "stall): cut off" "$R/daemon.log" | sed 's/.*cut off: //')"
    ;;
kill)
    # A low-priority client killed (SIGKILL) mid-slice: the daemon releases what it held,
    # the high-priority client is unaffected, and a new client is served afterwards.
    start_daemon "slice_us = 2000"
    client victim 7 -- --kernels v:800 --count 100000 --sync-every 64
    client hp 0 -- --kernels hp:200 --count 60 --gap-us 2000
    for _ in $(seq 100); do grep -q "launch i=200 " "$R/victim.out" 2>/dev/null && break; sleep 0.05; done
    VPID=$(pid_of victim)
    kill -9 "$VPID"
    wait $PID_hp
    check_order hp
    grep -q "pid $VPID, victim): disconnected; releasing" "$R/daemon.log" ||
        fail "the daemon did not release the killed client"
    "$G" status --json >"$R/status.json"
    jq -e --argjson p "$VPID" '[.clients[] | select(.pid == $p)] | length == 0' "$R/status.json" >/dev/null ||
        fail "the killed client is still listed: $(cat "$R/status.json")"
    client after 5 -- --kernels a:100 --count 20 --sync-every 4
    wait $PID_after
    check_order after
    echo "killed pid $VPID released: $(grep "pid $VPID" "$R/daemon.log" | tail -1 | sed 's/.*: disconnected/disconnected/')"
    ;;
restart)
    # The daemon is killed mid-run and started again: the client runs in pass-through
    # meanwhile, reconnects, and every command completes in order. (The client pauses at
    # kernel 100 until the daemon is killed, and waits for $R/end before it exits, so that a
    # run quicker than the test still sees the kill and the reconnection.)
    start_daemon
    rm -f "$R/rs.go" "$R/end"
    client rs 5 -- --kernels r1:300,r2:200 --count 600 --sync-every 8 --pause-at 100 --resume-when "$R/rs.go" \
        --end-when "$R/end"
    for _ in $(seq 400); do grep -q "^paused" "$R/rs.out" 2>/dev/null && break; sleep 0.05; done
    grep -q "^paused" "$R/rs.out" || fail "the client never reached kernel 100"
    kill -9 "$DPID"; wait "$DPID" 2>/dev/null; DPID=
    touch "$R/rs.go" # the client goes on while no daemon runs
    for _ in $(seq 100); do grep -q "disconnected" "$R/rs.shim" && break; sleep 0.02; done
    start_daemon
    for _ in $(seq 200); do [ "$(grep -c "daemon: connected as client" "$R/rs.shim")" -ge 2 ] && break; sleep 0.05; done
    touch "$R/end"
    wait $PID_rs
    check_order rs
    grep -q "daemon: disconnected" "$R/rs.shim" || fail "the client did not notice the daemon's death"
    n=$(grep -c "daemon: connected as client" "$R/rs.shim")
    echo "client connections: $n ($(grep -c 'daemon: disconnected' "$R/rs.shim") disconnections)"
    [ "$n" -ge 2 ] || fail "the client did not reconnect"
    ;;
refused)
    # Only root (and the daemon's user) may use this daemon; uid 65534 is refused with a
    # clear error while an allowed client runs normally.
    stage
    start_daemon "allow_users = root"
    client ok 5 -- --kernels ok:200 --count 100 --sync-every 8
    chmod 1777 "$R"
    setpriv --reuid=65534 --regid=65534 --clear-groups "$G" run --priority 0 -- "$CLIENT" \
        --out "$R/nobody.out" --count 5 >"$R/nobody.run" 2>&1
    rc=$?
    cat "$R/nobody.run"
    [ $rc -ne 0 ] || fail "gpumux run as uid 65534 succeeded"
    grep -q "uid 65534 (gid 65534) is not allowed" "$R/nobody.run" || fail "no clear refusal message"
    [ ! -e "$R/nobody.out" ] || fail "the refused client ran"
    grep -q "refused a connection: uid 65534" "$R/daemon.log" || fail "the daemon did not log the refusal"
    wait $PID_ok
    check_order ok
    stop_daemon
    unstage
    ;;
neighbours)
    # Other users' silent connections lock nobody out. uid 65534 (not allowed) opens 100 that
    # say nothing: each is refused at accept, with the reason. uid 65533 (allowed) does the
    # same: it is held to its budget of connections waiting for HELLO (16), the rest refused
    # at once, those 16 after 2 s. Meanwhile root's gpumux status answers and gpumux run is
    # scheduled, not sent to pass-through.
    stage
    start_daemon "allow_users = root,65533"
    chmod 1777 "$R"
    setpriv --reuid=65534 --regid=65534 --clear-groups "$CLIENT" --hostile silent:100 --hold-ms 4000 \
        >"$R/nobody.out" 2>&1 &
    NPID=$!
    setpriv --reuid=65533 --regid=65533 --clear-groups "$CLIENT" --hostile silent:100 --hold-ms 4000 \
        >"$R/allowed.out" 2>&1 &
    APID=$!
    for _ in $(seq 200); do
        grep -q "connections open" "$R/nobody.out" 2>/dev/null && grep -q "connections open" "$R/allowed.out" 2>/dev/null &&
            break
        sleep 0.02
    done
    cat "$R/nobody.out" "$R/allowed.out"
    grep -q "silent: 100 of 100 connections open" "$R/nobody.out" || fail "uid 65534 could not open its 100 connections"
    "$G" status --json >"$R/status.json" 2>"$R/status.err" ||
        fail "gpumux status failed while other users held silent connections: $(cat "$R/status.err")"
    GPUMUX_SHIM_LOG=$R/ok.shim "$G" run --priority 0 --name ok -- "$CLIENT" --out "$R/ok.out" --kernels ok:100 \
        --count 20 2>"$R/ok.err" || fail "gpumux run failed: $(cat "$R/ok.err")"
    ! grep -q "pass-through" "$R/ok.err" || fail "gpumux run fell back to pass-through: $(cat "$R/ok.err")"
    grep -q "daemon: connected as client" "$R/ok.shim" || fail "root's client was not scheduled by the daemon"
    check_order ok
    wait $NPID $APID
    cat "$R/nobody.out" "$R/allowed.out"
    grep -q "silent: 100 refused, 0 closed without a reply, 0 still open; reason: uid 65534 (gid 65534) is not allowed" \
        "$R/nobody.out" || fail "uid 65534's connections were not each refused with the reason"
    grep -q "silent: 100 refused, 0 closed without a reply, 0 still open" "$R/allowed.out" ||
        fail "uid 65533's connections were not each refused with a reason"
    "$G" status --json >"$R/status.json"
    jq -e '.refusals.not_allowed >= 100 and .refusals.busy >= 84 and .refusals.timeout >= 16 and
        .pending_connections == 0' "$R/status.json" >/dev/null || fail "refusals not counted: $(jq -c .refusals "$R/status.json")"
    echo "refusals: $(jq -c .refusals "$R/status.json")"
    stop_daemon
    unstage
    ;;
crowd)
    # 200 clients say HELLO at once: max_clients (32) are welcomed, every other one reads a
    # REFUSED with the reason; gpumux run started meanwhile says the daemon is full, and the
    # interposer says why it runs unscheduled, once.
    start_daemon "max_clients = 32"
    "$CLIENT" --hostile crowd:200 --hold-ms 3000 >"$R/crowd.out" 2>&1 &
    CPID=$!
    for _ in $(seq 500); do grep -q '^held$' "$R/crowd.out" 2>/dev/null && break; sleep 0.02; done
    cat "$R/crowd.out"
    grep -q "crowd: 200 connections: 32 welcomed, 168 refused, 0 without a reply, 0 could not connect" "$R/crowd.out" ||
        fail "not every client of the crowd was answered: $(head -1 "$R/crowd.out")"
    grep -q "crowd: refused x168: the daemon serves 32 clients already (max_clients 32)" "$R/crowd.out" ||
        fail "the refusals do not say why"
    GPUMUX_SHIM_LOG=$R/late.shim "$G" run --priority 3 --name late -- "$CLIENT" --out "$R/late.out" \
        --kernels l:100 --count 5 2>"$R/late.err" || fail "the late client failed: $(cat "$R/late.err")"
    cat "$R/late.err"
    grep -q "gpumux run: warning: gpumuxd serves 32 clients already (max_clients 32)" "$R/late.err" ||
        fail "gpumux run did not say the daemon was full"
    n=$(grep -c "the daemon refused this process: the daemon serves 32 clients already" "$R/late.err")
    [ "$n" -eq 1 ] || fail "the interposer said the refusal $n times (expected once)"
    wait $CPID
    "$G" status --json >"$R/status.json"
    jq -e '.refusals.busy >= 169 and .refused >= 169' "$R/status.json" >/dev/null ||
        fail "refusals not counted: $(jq -c .refusals "$R/status.json")"
    ;;
malformed)
    # Malformed first messages are refused with the reason and counted as refused: a
    # STATUS_REQ claiming a 0xFFFFFFF0-byte body, a HELLO whose name has no NUL, garbage.
    start_daemon
    "$CLIENT" --hostile status-len >"$R/len.out" 2>&1
    "$CLIENT" --hostile hello-nonul >"$R/nonul.out" 2>&1
    "$CLIENT" --hostile bad-hello >"$R/junk.out" 2>&1
    cat "$R/len.out" "$R/nonul.out" "$R/junk.out"
    grep -q "reply: REFUSED error 71: malformed STATUS_REQ: the header says 4294967280 bytes follow, 0 did" \
        "$R/len.out" || fail "a STATUS_REQ with a wrong length was not refused with the reason"
    grep -q "reply: REFUSED error 71: malformed HELLO: the name is not NUL-terminated within 64 bytes" \
        "$R/nonul.out" || fail "a HELLO without a NUL in its name was not refused with the reason"
    grep -q "refused: malformed first message: magic 0xa5a5a5a5" "$R/junk.out" ||
        fail "garbage was not refused with the reason"
    "$G" status --json >"$R/status.json"
    jq -e '.refused == 3 and .refusals.malformed == 3 and .protocol_errors == 3' "$R/status.json" >/dev/null ||
        fail "malformed first messages not counted as refused: $(jq -c '{refused, refusals, protocol_errors}' "$R/status.json")"
    ;;
declared)
    # A client announcing more managed memory than the machine holds (4 EiB) is cut off with
    # the bound in the reason; a well-behaved oversubscribed client is unaffected.
    export GPUMUX_STANDIN_MEM_MB=64
    start_daemon "device_memory_mb = 64"
    client good 5 --oversubscribe -- --kernels g:200 --count 40 --sync-every 4 --alloc-mb 16
    "$CLIENT" --hostile huge-alloc >"$R/huge.out" 2>&1 || fail "huge-alloc: $(cat "$R/huge.out")"
    grep -q "closed by the daemon" "$R/huge.out" || fail "the client was not closed"
    grep -q "hostile): cut off: 0 + 4611686018427387904 bytes of allocations exceed device + host memory (" \
        "$R/daemon.log" || fail "no cut-off line naming the bound (see $R/daemon.log)"
    wait $PID_good
    check_order good
    "$G" status --json >"$R/status.json"
    jq -e '.task_memory_limit_bytes > 64 * 1048576 and .task_memory_limit_bytes < 4611686018427387904' \
        "$R/status.json" >/dev/null || fail "no sensible task memory limit: $(jq .task_memory_limit_bytes "$R/status.json")"
    grep "cut off: allocations" "$R/daemon.log" | sed 's/^/log: /'
    ;;
store)
    # The profile store is private (directory 0700, files 0600, older 0644 files made
    # private at start), saves leave no temporaries, and a profile_dir that cannot be written
    # stops the daemon at start with the reason.
    touch "$R/file"
    printf '[daemon]\nruntime_dir = %s\nprofile_dir = %s/file/profiles\n' "$R" "$R" >"$R/bad.conf"
    timeout 10 "$D" --foreground --config "$R/bad.conf" 2>"$R/bad.err"
    rc=$?
    cat "$R/bad.err"
    [ $rc -eq 1 ] || fail "gpumuxd started (or hung: $rc) with a profile_dir it cannot write"
    grep -q "profile_dir $R/file/profiles: cannot create it: Not a directory" "$R/bad.err" ||
        fail "no clear reason for the unwritable profile_dir"
    mkdir -p "$R/store/profiles" && chmod 755 "$R/store/profiles"
    printf 'gmxprof 1\n' >"$R/store/profiles/old.gmxprof" && chmod 644 "$R/store/profiles/old.gmxprof"
    start_daemon "policy = fikit" "profile_dir = $R/store/profiles"
    [ "$(stat -c %a "$R/store/profiles")" = 700 ] || fail "the store is mode $(stat -c %a "$R/store/profiles"), not 700"
    [ "$(stat -c %a "$R/store/profiles/old.gmxprof")" = 600 ] || fail "an older profile was left readable"
    client serve 0 -- --kernels hp:200,hq:300 --count 30 --gap-us 300
    wait $PID_serve
    check_order serve
    for _ in $(seq 100); do [ -s "$R/store/profiles/serve.gmxprof" ] && break; sleep 0.05; done
    [ -s "$R/store/profiles/serve.gmxprof" ] || fail "no profile saved for serve"
    [ "$(stat -c %a "$R/store/profiles/serve.gmxprof")" = 600 ] ||
        fail "a saved profile is mode $(stat -c %a "$R/store/profiles/serve.gmxprof"), not 600"
    [ -z "$(find "$R/store/profiles" -name '*.tmp*')" ] || fail "a save left a temporary behind"
    "$G" profile show "$R/store/profiles/serve.gmxprof" >/dev/null || fail "the saved profile does not read back"
    echo "store: $(stat -c '%a %n' "$R/store/profiles" "$R/store/profiles"/*)"
    ;;
replay)
    # More managed allocations than the up ring holds (3000 > 1024 entries), told to the
    # daemon when the client connects and again after the daemon was killed and restarted: the
    # daemon's view equals the client's (every byte), and freeing them all afterwards does not
    # get the client cut off.
    N=3000
    want=$((N * 65536))
    alloc_of() { "$G" status --json 2>/dev/null | jq -r '[.clients[] | select(.name == "rp") | .allocated_bytes] | first // -1'; }
    wait_alloc() { for _ in $(seq 200); do [ "$(alloc_of)" = "$1" ] && return 0; sleep 0.05; done; return 1; }
    start_daemon
    rm -f "$R/go" "$R/end"
    client rp 5 --oversubscribe -- --kernels r:100 --count 4 --allocs $N --start-when "$R/go" --end-when "$R/end"
    for _ in $(seq 400); do grep -q '^ready$' "$R/rp.out" 2>/dev/null && break; sleep 0.05; done
    wait_alloc $want || fail "first session: the daemon holds $(alloc_of) bytes of rp's $want"
    kill -9 "$DPID"; wait "$DPID" 2>/dev/null; DPID=
    for _ in $(seq 100); do grep -q "daemon: disconnected" "$R/rp.shim" && break; sleep 0.02; done
    start_daemon
    wait_alloc $want || fail "after the restart: the daemon holds $(alloc_of) bytes of rp's $want"
    touch "$R/go"
    for _ in $(seq 400); do grep -q '^waiting$' "$R/rp.out" 2>/dev/null && break; sleep 0.05; done
    grep -q "^freed $N$" "$R/rp.out" || fail "rp did not free its allocations"
    wait_alloc 0 || fail "after freeing them all: the daemon holds $(alloc_of) bytes of rp's (expected 0)"
    touch "$R/end"
    wait $PID_rp
    check_order rp
    ! grep -q "rp): cut off" "$R/daemon.log" || fail "rp was cut off: $(grep "rp): cut off" "$R/daemon.log" | head -1)"
    n=$(grep -c "daemon: connected as client" "$R/rp.shim")
    [ "$n" -eq 2 ] || fail "rp connected $n times (expected 2: before and after the restart)"
    echo "rp: $N allocations replayed twice ($(grep "connected as client" "$R/rp.shim" | sed 's/.*(//;s/)$//' | tr '\n' ' ')), all freed, never cut off"
    ;;
fork)
    # A client forks once connected, under the daemon policy: the child starts with no
    # connection and no allocations, registers as a client of its own holding only the 1 MB it
    # allocated itself (not the parent's 16 MB), and both run their kernels in order.
    start_daemon
    rm -f "$R/go" "$R/end"
    client fk 5 --oversubscribe -- --kernels f:200 --count 20 --sync-every 4 --alloc-mb 16 \
        --fork "$R/fkc.out" --start-when "$R/go" --end-when "$R/end"
    go fk
    for f in fk fkc; do
        for _ in $(seq 400); do grep -q '^waiting$' "$R/$f.out" 2>/dev/null && break; sleep 0.05; done
        grep -q '^waiting$' "$R/$f.out" 2>/dev/null || fail "$f did not finish its kernels"
    done
    "$G" status --json >"$R/status.json"
    P=$(pid_of fk) C=$(pid_of fkc)
    bytes_of() { jq --argjson p "$1" '[.clients[] | select(.pid == $p) | .allocated_bytes] | first // -1' "$R/status.json"; }
    [ "$(bytes_of "$P")" = $((16 << 20)) ] || fail "the parent holds $(bytes_of "$P") bytes in the daemon (16 MB expected)"
    [ "$(bytes_of "$C")" = $((1 << 20)) ] ||
        fail "the child holds $(bytes_of "$C") bytes in the daemon (its own 1 MB expected, not the parent's)"
    touch "$R/end"
    wait $PID_fk || fail "the client or its child failed: $(cat "$R/fk.err")"
    check_order fk
    check_order fkc
    ! grep -q "cut off" "$R/daemon.log" || fail "a client was cut off: $(grep "cut off" "$R/daemon.log" | head -1)"
    echo "fork: parent $P holds $(bytes_of "$P") bytes, child $C holds $(bytes_of "$C") bytes"
    ;;
budget)
    # A client whose allocations exceed what the daemon holds for one task (device + host
    # memory) is cut off with the reason (E2BIG). The interposer says so once and backs off
    # instead of reconnecting every GPUMUX_RECONNECT_MS (50 ms here): over ~2 s of kernels,
    # run unscheduled, it connects once. A client within its budget is unaffected.
    start_daemon
    lim=$("$G" status --json | jq .task_memory_limit_bytes)
    mb=$((lim / 1048576 + 1024))
    client good 5 --oversubscribe -- --kernels g:200 --count 40 --sync-every 4 --alloc-mb 16
    client big 5 --oversubscribe -- --kernels b:1000 --count 2000 --sync-every 50 --alloc-mb $mb --touch-mb 1
    wait $PID_big $PID_good
    check_order big
    check_order good
    n=$(grep -c "daemon: connected as client" "$R/big.shim")
    cuts=$(grep -c "big): cut off: .* bytes of allocations exceed device + host memory" "$R/daemon.log")
    said=$(grep -c "gpumux: the daemon cut off this process: .* bytes of allocations exceed device + host memory" "$R/big.err")
    echo "over its budget: $n connection(s), $cuts cut-off(s), said $said time(s): $(grep "cut off this process" "$R/big.err" | head -1)"
    [ "$cuts" -ge 1 ] || fail "the client over its budget was not cut off (see $R/daemon.log)"
    [ "$n" -le 2 ] && [ "$cuts" -le 2 ] || fail "the client over its budget reconnected $n times ($cuts cut-offs)"
    [ "$said" -eq 1 ] || fail "the interposer said the cut-off $said times (expected once): $(cat "$R/big.err")"
    grep -q "until its allocations shrink" "$R/big.err" || fail "the interposer did not say it backs off"
    ! grep -q "good): cut off" "$R/daemon.log" || fail "the client within its budget was cut off"
    ;;
metrics)
    # Two clients scraped by `gpumux metrics` and over HTTP (metrics_listen): promtool accepts
    # both texts, they agree with each other and with `gpumux status --json`; an identity's
    # counters outlive its clients; the endpoint's bounds hold while scheduling goes on.
    command -v promtool >/dev/null || { echo "SKIPPED: promtool not installed (Debian package prometheus)"; exit 77; }
    command -v curl >/dev/null || { echo "SKIPPED: curl not installed"; exit 77; }
    start_daemon "policy = fikit" "metrics_listen = 127.0.0.1:0" "device_memory_mb = 64"
    rm -f "$R/end"
    client serve 0 --oversubscribe -- --kernels hp:200 --count 40 --gap-us 300 --alloc-mb 40 --linger-when "$R/end"
    client train 7 --oversubscribe -- --kernels lp:400 --count 200 --sync-every 8 --alloc-mb 40 --linger-when "$R/end"
    for n in serve train; do
        for _ in $(seq 400); do grep -q '^idle$' "$R/$n.out" 2>/dev/null && break; sleep 0.05; done
        grep -q '^idle$' "$R/$n.out" 2>/dev/null || fail "$n never became idle"
    done
    "$CLIENT" --hostile bad-hello >"$R/h1.out" 2>&1 || fail "bad-hello: $(cat "$R/h1.out")"
    "$G" metrics >"$R/metrics.txt" 2>"$R/metrics.err" || fail "gpumux metrics: $(cat "$R/metrics.err")"
    "$G" status --json >"$R/status.json"
    url=$(jq -r .metrics_url "$R/status.json")
    curl -sf "$url" >"$R/http.txt" || fail "no answer from $url"
    for f in metrics http; do
        promtool check metrics <"$R/$f.txt" >"$R/promtool-$f.out" 2>&1 ||
            fail "promtool rejects the $f text: $(head -3 "$R/promtool-$f.out")"
    done
    echo "promtool accepts $(grep -c '^# TYPE' "$R/metrics.txt") families ($(wc -c <"$R/metrics.txt") bytes)"
    cmp -s <(grep -v '^gpumux_uptime_seconds ' "$R/metrics.txt") <(grep -v '^gpumux_uptime_seconds ' "$R/http.txt") ||
        fail "the socket's and the endpoint's texts differ"
    # Every family is documented in docs/metrics.md, and the Grafana dashboard asks only for
    # families the daemon serves.
    TOP=$(cd "$(dirname "$0")/../.." && pwd)
    for f in $(sed -n 's/^# TYPE \([a-z_]*\) .*/\1/p' "$R/metrics.txt"); do
        grep -q "^| \`$f\` |" "$TOP/docs/metrics.md" || fail "$f is not documented in docs/metrics.md"
    done
    for f in $(jq -r '.. | .expr? // empty' "$TOP/contrib/grafana/gpumux.json" | grep -o 'gpumux_[a-z_]*' | sed 's/_bucket$//' | sort -u); do
        grep -q "^# TYPE $f " "$R/metrics.txt" || fail "the dashboard asks for $f, which gpumuxd does not serve"
    done
    # mval FAMILY [NAME]: the value of FAMILY's series (for the client identity NAME).
    mval() {
        local p="$1 "
        [ $# -gt 1 ] && p="$1{name=\"$2\","
        awk -v p="$p" 'index($0, p) == 1 { print $NF }' "$R/metrics.txt"
    }
    same() { [ "$2" = "$3" ] && echo "ok: $1 = $2" || fail "$1: metrics say '$2', status says '$3'"; }
    js() { jq -r "$1" "$R/status.json"; }
    same clients "$(mval gpumux_clients)" "$(js .n_clients)"
    same grants "$(mval gpumux_grants_total)" "$(js .grants)"
    same device_memory "$(mval gpumux_device_memory_bytes)" "$(js .device_memory_bytes)"
    same resident "$(mval gpumux_device_memory_resident_bytes)" "$(js .resident_bytes)"
    same migrated_in "$(mval gpumux_migrated_in_bytes_total)" "$(js .migration.loaded_bytes)"
    same migrated_out "$(mval gpumux_migrated_out_bytes_total)" "$(js .migration.evicted_bytes)"
    same policy "$(sed -n 's/^gpumux_policy_info{policy="\(.*\)"} 1$/\1/p' "$R/metrics.txt")" "$(js .policy)"
    uid=$(id -u)
    for n in serve train; do
        c=".clients[] | select(.name == \"$n\")"
        same "$n grants" "$(mval gpumux_client_grants_total $n)" "$(js "$c.grants")"
        same "$n notices" "$(mval gpumux_client_notices_total $n)" "$(js "$c.notices")"
        same "$n completions" "$(mval gpumux_client_completions_total $n)" "$(js "$c.completions")"
        same "$n allocated" "$(mval gpumux_client_allocated_bytes $n)" "$(js "$c.allocated_bytes")"
        same "$n resident" "$(mval gpumux_client_resident_bytes $n)" "$(js "$c.resident_bytes")"
        same "$n latency samples" "$(mval gpumux_client_grant_latency_seconds_count $n)" "$(js "$c.grants")"
        grep -q "^gpumux_client_info{name=\"$n\",priority=\"$(js "$c.priority")\",uid=\"$uid\",container=\"\",pid=\"$(js "$c.pid")\"," \
            "$R/metrics.txt" || fail "no gpumux_client_info for $n with its priority, uid $uid and pid"
    done
    same "serve kernels" "$(mval gpumux_client_kernels_total serve)" 40
    same "train kernels" "$(mval gpumux_client_kernels_total train)" 200
    same "migrated in, summed over clients" \
        "$(awk '/^gpumux_client_migrated_in_bytes_total/ { s += $NF } END { print s }' "$R/metrics.txt")" "$(js .migration.loaded_bytes)"
    [ "$(js .migration.evicted_bytes)" -gt 0 ] || fail "80 MB on 64 MB evicted nothing: the eviction figures went untested"
    same "malformed refusals of uid $uid" \
        "$(sed -n "s/^gpumux_refusals_total{reason=\"malformed\",uid=\"$uid\"} //p" "$R/metrics.txt")" "$(js .refusals.malformed)"
    # Bounds: methods, request size, connections per address (GMXD_HTTP_PER_IP = 4). While four
    # idle connections hold the endpoint, status still answers at once: the loop never waits.
    code() { curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$@"; }
    same "POST" "$(code -X POST "$url")" 405
    same "a 20 kB header" "$(code -H "X-Big: $(head -c 20000 /dev/zero | tr '\0' a)" "$url")" 431
    same "another path" "$(code "${url%/metrics}/nothing")" 404
    hp=${url#http://}; hp=${hp%/metrics}
    exec 5<>"/dev/tcp/${hp%:*}/${hp##*:}" 6<>"/dev/tcp/${hp%:*}/${hp##*:}" 7<>"/dev/tcp/${hp%:*}/${hp##*:}" 8<>"/dev/tcp/${hp%:*}/${hp##*:}"
    sleep 0.2
    "$G" status >/dev/null || fail "status did not answer while four idle HTTP connections were open"
    same "a fifth connection from one address" "$(code "$url")" 000
    exec 5>&- 6>&- 7>&- 8>&-
    sleep 0.2
    same "after they closed" "$(code "$url")" 200
    # A metrics address that cannot be served stops the daemon with the reason.
    "$D" --foreground --runtime-dir "$R/bad" --metrics-listen localhost:9400 2>"$R/bad1.err" &&
        fail "gpumuxd started with metrics_listen = localhost:9400"
    grep -q "'localhost' is not a numeric IPv4 address" "$R/bad1.err" || fail "no reason for a host name: $(cat "$R/bad1.err")"
    taken=${url#http://}; taken=${taken%/metrics}
    "$D" --foreground --runtime-dir "$R/bad" --metrics-listen "$taken" 2>"$R/bad2.err" &&
        fail "gpumuxd started on an address in use"
    grep -q "cannot listen there: Address already in use" "$R/bad2.err" || fail "no reason for an address in use: $(cat "$R/bad2.err")"
    # The clients leave: their identities' counters stay, nothing is connected.
    before=$(mval gpumux_client_grants_total train)
    touch "$R/end"
    wait $PID_serve $PID_train
    "$G" metrics >"$R/metrics.txt" || fail "gpumux metrics after the clients left"
    same "clients after they left" "$(mval gpumux_clients)" 0
    same "train connected after it left" "$(mval gpumux_client_connected train)" 0
    same "train grants after it left" "$(mval gpumux_client_grants_total train)" "$before"
    grep -q '^gpumux_client_info{' "$R/metrics.txt" && fail "gpumux_client_info lists a client that left"
    promtool check metrics <"$R/metrics.txt" >/dev/null 2>&1 || fail "promtool rejects the text after the clients left"
    ;;
hostile)
    # Malformed first message, then a client that writes garbage into its ring: each is
    # closed with a log line; a well-behaved client alongside is unaffected.
    start_daemon
    client good 5 -- --kernels g:200 --count 200 --sync-every 8
    "$CLIENT" --hostile bad-hello >"$R/h1.out" 2>&1 || fail "bad-hello: $(cat "$R/h1.out")"
    "$CLIENT" --hostile bad-ring >"$R/h2.out" 2>&1 || fail "bad-ring: $(cat "$R/h2.out")"
    wait $PID_good
    check_order good
    grep -q "malformed first message" "$R/daemon.log" || fail "no log line for the malformed HELLO"
    grep -q "hostile): cut off: malformed message" "$R/daemon.log" || fail "no log line for the corrupt ring"
    grep "malformed" "$R/daemon.log" | sed 's/^/log: /'
    "$G" status >/dev/null || fail "the daemon stopped answering"
    ;;
*)
    echo "unknown scenario $SCEN"; exit 2 ;;
esac
finish
