#!/usr/bin/env bash
# End-to-end scenarios: gpumuxd + `gpumux run` + the interposer + real client processes on the
# stand-in driver. Usage: e2e.sh SCENARIO BUILD_DIR E2E_CLIENT RUN_DIR
# Assertions read the stand-in's execution log, the clients' launch logs, the daemon's log and
# `gpumux status --json`; none depends on how long anything took.
set -u
SCEN=$1 B=$2 CLIENT=$3 R=$4
G=$B/gpumux D=$B/gpumuxd
rm -rf "$R" && mkdir -p "$R" && chmod 755 "$R"
export GPUMUX_RUNTIME_DIR=$R GPUMUX_STANDIN_DIR=$R GPUMUX_STANDIN_LOG=$R/standin.log
export GPUMUX_REAL_LIBCUDA=$B/standin/libcuda.so.1 GPUMUX_RECONNECT_MS=50
FAILED=0
DPID=
fail() { echo "FAIL: $*"; FAILED=1; }
cleanup() {
    [ -n "$DPID" ] && kill "$DPID" 2>/dev/null
    for p in $(jobs -p); do kill -9 "$p" 2>/dev/null; done
    wait 2>/dev/null
    [ -n "${S:-}" ] && rm -rf "$S"
}
trap cleanup EXIT

# start_daemon [extra config lines...]: a daemon on $R with the given [daemon] keys.
start_daemon() {
    # Profiles go under $R unless the scenario names a store: tests never write to /var/lib.
    local store="profile_dir = $R/profiles"
    for l in "$@"; do case $l in profile_dir*) store=;; esac; done
    { echo "[daemon]"; echo "runtime_dir = $R"; [ -n "$store" ] && echo "$store"
      for l in "$@"; do echo "$l"; done; } >"$R/gpumuxd.conf"
    "$D" --foreground --config "$R/gpumuxd.conf" 2>>"$R/daemon.log" &
    DPID=$!
    for _ in $(seq 100); do
        "$G" status >/dev/null 2>&1 && return 0
        sleep 0.05
    done
    fail "gpumuxd did not start (see $R/daemon.log)"; cat "$R/daemon.log"; exit 1
}

stop_daemon() { kill "$DPID"; wait "$DPID" 2>/dev/null; DPID=; }

# client NAME PRIORITY [gpumux-run options --] client options...: runs in the background.
client() {
    local name=$1 prio=$2; shift 2
    local ropts=()
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do ropts+=("$1"); shift; done
    shift
    rm -f "$R/$name.out" # a rerun's readers must not see the previous run's lines
    GPUMUX_SHIM_LOG=$R/$name.shim "$G" run --priority "$prio" --name "$name" "${ropts[@]}" -- \
        "$CLIENT" --out "$R/$name.out" "$@" 2>"$R/$name.err" &
    eval "PID_$name=$!"
}

pid_of() { sed -n 's/^pid=//p' "$R/$1.out"; }

# go NAME...: once every named client (started with --start-when $R/go, after rm -f $R/go) has
# allocated and is connected to the daemon, lets them all start launching at once, so that
# their memory is in use at the same time.
go() {
    for n in "$@"; do
        for _ in $(seq 400); do grep -q '^ready$' "$R/$n.out" 2>/dev/null && break; sleep 0.05; done
        grep -q '^ready$' "$R/$n.out" 2>/dev/null || fail "$n never became ready"
        for _ in $(seq 400); do
            "$G" status --json 2>/dev/null | jq -e --arg n "$n" '[.clients[] | select(.name == $n)] | length > 0' \
                >/dev/null && break
            sleep 0.05
        done
    done
    touch "$R/go"
}

# Every launch of NAME completed, in launch order (kernel names by start time in the log).
check_order() {
    local name=$1 pid
    pid=$(pid_of "$name")
    grep -q '^done$' "$R/$name.out" || { fail "$name did not finish"; return; }
    sed -n 's/^launch i=[0-9]* name=\([^ ]*\) .*/\1/p' "$R/$name.out" >"$R/$name.want"
    grep " pid=$pid .*kind=kernel" "$R/standin.log" | sed 's/start_ns=\([0-9]*\).* name=\([^ ]*\).*/\1 \2/' |
        sort -n | cut -d' ' -f2 >"$R/$name.got"
    if cmp -s "$R/$name.want" "$R/$name.got"; then
        echo "ok: $name: $(wc -l <"$R/$name.want") kernels completed in launch order"
    else
        fail "$name: kernels missing or out of order ($(wc -l <"$R/$name.want") launched, $(wc -l <"$R/$name.got") ran)"
    fi
}

case $SCEN in
hp_lp)
    # A high-priority client with idle gaps and a saturating low-priority client. Bound for
    # timeslice (docs/daemon.md): while a high-priority kernel waits, at most
    # 2*ceil(slice/lp) + 2*inflight low-priority kernels start (the slice running when it
    # arrived, one that may begin as its notice arrives, in-flight work in the daemon's and
    # the driver's hands). For a policy that preempts at kernel boundaries (fikit): 2*inflight.
    SLICE=1000 INFL=2 LPUS=500
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
    HPID=$(pid_of hp) LPID=$(pid_of lp)
    # Launch times of the high-priority kernels, their start times, and low-priority starts.
    sed -n 's/^launch .* t_ns=//p' "$R/hp.out" >"$R/hp.launch"
    grep " pid=$HPID .*kind=kernel" "$R/standin.log" | sed 's/start_ns=\([0-9]*\) .*/\1/' | sort -n >"$R/hp.start"
    grep " pid=$LPID .*kind=kernel" "$R/standin.log" | sed 's/start_ns=\([0-9]*\) .*/\1/' | sort -n >"$R/lp.start"
    worst=$(paste -d' ' "$R/hp.launch" "$R/hp.start" | awk '
        FNR == NR { L[n] = $1; H[n] = $2; n++; next }
        { s = $1; for (i = 0; i < n; i++) if (s > L[i] && s < H[i]) c[i]++ }
        END { w = 0; for (i = 0; i < n; i++) if (c[i] > w) w = c[i]; print w }' - "$R/lp.start")
    echo "policy $POLICY: at most $worst low-priority kernels started while a high-priority kernel waited (bound $BOUND)"
    [ "$worst" -le "$BOUND" ] || fail "$worst low-priority kernels started while a high-priority kernel waited (bound $BOUND)"
    ;;
profiles)
    # The profile store: a task measured under fikit leaves its profile in profile_dir when
    # its last client disconnects, whoever else is still connected; a restarted daemon loads it for the next client of that name instead of
    # measuring again. A name that cannot be a file name is never written.
    "$D" --help | grep -q fikit || { echo "skipped: no fikit policy in this build"; exit 0; }
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
    rm -f "$R/go"
    client ma 5 --oversubscribe -- --kernels ma:300 --count 40 --sync-every 4 --alloc-mb 48 \
        --start-when "$R/go"
    client mb 5 --oversubscribe -- --kernels mb:300 --count 40 --sync-every 4 --alloc-mb 48 \
        --start-when "$R/go"
    go ma mb
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
    # meanwhile, reconnects, and every command completes in order.
    start_daemon
    client rs 5 -- --kernels r1:300,r2:200 --count 600 --sync-every 8
    for _ in $(seq 100); do grep -q "launch i=100 " "$R/rs.out" 2>/dev/null && break; sleep 0.05; done
    kill -9 "$DPID"; wait "$DPID" 2>/dev/null; DPID=
    for _ in $(seq 100); do grep -q "disconnected" "$R/rs.shim" && break; sleep 0.02; done
    start_daemon
    wait $PID_rs
    check_order rs
    grep -q "daemon: disconnected" "$R/rs.shim" || fail "the client did not notice the daemon's death"
    n=$(grep -c "daemon: connected as client" "$R/rs.shim")
    echo "client connections: $n ($(grep -c 'daemon: disconnected' "$R/rs.shim") disconnections)"
    [ "$n" -ge 2 ] || grep -q '^done$' "$R/rs.out" || fail "the client did not reconnect"
    grep -q "connected as client" "$R/rs.shim" || fail "never connected"
    ;;
refused)
    # Only root (and the daemon's user) may use this daemon; uid 65534 is refused with a
    # clear error while an allowed client runs normally.
    # uid 65534 must reach gpumux, the interposer and the socket, and a checkout may sit below
    # a directory it cannot enter (a mode-700 home or mktemp directory): run from a staging
    # directory it can, and copy the logs back for the post-mortem.
    S=$(mktemp -d "${TMPDIR:-/tmp}/gpumux-e2e-refused.XXXXXX") || { fail "mktemp"; exit 1; }
    chmod 755 "$S" && mkdir "$S/shim" && cp "$G" "$S/gpumux" && cp "$B/shim/libcuda.so.1" "$S/shim/" &&
        cp "$CLIENT" "$S/e2e_client" || { fail "cannot stage binaries in $S"; rm -rf "$S"; exit 1; }
    RUN=$R R=$S G=$S/gpumux CLIENT=$S/e2e_client
    export GPUMUX_RUNTIME_DIR=$R GPUMUX_STANDIN_DIR=$R GPUMUX_STANDIN_LOG=$R/standin.log
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
    cp "$R"/*.log "$R"/*.out "$R"/*.run "$R"/*.err "$RUN"/ 2>/dev/null
    rm -rf "$S"
    S= R=$RUN
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
if [ $FAILED -eq 0 ]; then
    echo "PASS: $SCEN"
else
    # What a failure needs to be understood, since the run directory is reused by the next run.
    echo "--- daemon log (last 30 lines)"; tail -30 "$R/daemon.log" 2>/dev/null
    for f in "$R"/*.err; do [ -s "$f" ] && { echo "--- $f"; tail -10 "$f"; }; done
fi
exit $FAILED
