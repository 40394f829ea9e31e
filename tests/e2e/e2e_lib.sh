# Helpers of the end-to-end scenarios (sourced by e2e.sh and e2e_combined.sh, which set SCEN, B,
# CLIENT and R first): a daemon, clients, their logs; finish reports and exits.
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

# client NAME PRIORITY [gpumux-run options --] client options...: runs in the background. With
# CLIENT_NICE set, at that nice level.
client() {
    local name=$1 prio=$2; shift 2
    local ropts=()
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do ropts+=("$1"); shift; done
    shift
    rm -f "$R/$name.out" # a rerun's readers must not see the previous run's lines
    GPUMUX_SHIM_LOG=$R/$name.shim nice -n "${CLIENT_NICE:-0}" "$G" run --priority "$prio" --name "$name" "${ropts[@]}" -- \
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

# stage: uid 65534 must reach gpumux, the interposer, the client and the socket, and a
# checkout may sit below a directory it cannot enter (a mode-700 home or mktemp directory): run
# from a staging directory it can (R, G and CLIENT point there; RUN keeps the real R for the
# logs, copied back by unstage).
stage() {
    S=$(mktemp -d "${TMPDIR:-/tmp}/gpumux-e2e-$SCEN.XXXXXX") || { fail "mktemp"; exit 1; }
    chmod 755 "$S" && mkdir "$S/shim" && cp "$G" "$S/gpumux" && cp "$B/shim/libcuda.so.1" "$S/shim/" &&
        cp "$CLIENT" "$S/e2e_client" || { fail "cannot stage binaries in $S"; rm -rf "$S"; exit 1; }
    RUN=$R R=$S G=$S/gpumux CLIENT=$S/e2e_client
    export GPUMUX_RUNTIME_DIR=$R GPUMUX_STANDIN_DIR=$R GPUMUX_STANDIN_LOG=$R/standin.log
}

unstage() {
    cp "$R"/*.log "$R"/*.out "$R"/*.run "$R"/*.err "$R"/*.json "$RUN"/ 2>/dev/null
    rm -rf "$S"
    S= R=$RUN
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

# The most low-priority kernels (client lp) that started while one high-priority kernel (client
# hp) waited: between its launch (the client's log) and its start (the stand-in's log).
lp_starts_while_hp_waits() {
    local hpid lpid
    hpid=$(pid_of hp) lpid=$(pid_of lp)
    sed -n 's/^launch .* t_ns=//p' "$R/hp.out" >"$R/hp.launch"
    grep " pid=$hpid .*kind=kernel" "$R/standin.log" | sed 's/start_ns=\([0-9]*\) .*/\1/' | sort -n >"$R/hp.start"
    grep " pid=$lpid .*kind=kernel" "$R/standin.log" | sed 's/start_ns=\([0-9]*\) .*/\1/' | sort -n >"$R/lp.start"
    paste -d' ' "$R/hp.launch" "$R/hp.start" | awk '
        FNR == NR { L[n] = $1; H[n] = $2; n++; next }
        { s = $1; for (i = 0; i < n; i++) if (s > L[i] && s < H[i]) c[i]++ }
        END { w = 0; for (i = 0; i < n; i++) if (c[i] > w) w = c[i]; print w }' - "$R/lp.start"
}

# The most low-priority GPU time (ns: the run time of its kernels) that started while one
# high-priority kernel waited (between its launch and its start).
lp_time_while_hp_waits() {
    local hpid lpid
    hpid=$(pid_of hp) lpid=$(pid_of lp)
    sed -n 's/^launch .* t_ns=//p' "$R/hp.out" >"$R/hp.launch"
    grep " pid=$hpid .*kind=kernel" "$R/standin.log" | sed 's/start_ns=\([0-9]*\) .*/\1/' | sort -n >"$R/hp.start"
    grep " pid=$lpid .*kind=kernel" "$R/standin.log" |
        sed 's/.*start_ns=\([0-9]*\) .*end_ns=\([0-9]*\).*/\1 \2/' | sort -n >"$R/lp.run"
    paste -d' ' "$R/hp.launch" "$R/hp.start" | awk '
        FNR == NR { L[n] = $1; H[n] = $2; n++; next }
        { for (i = 0; i < n; i++) if ($1 > L[i] && $1 < H[i]) t[i] += $2 - $1 }
        END { w = 0; for (i = 0; i < n; i++) if (t[i] > w) w = t[i]; print w }' - "$R/lp.run"
}


# Reports PASS, or what a failure needs to be understood (the run directory is reused by the
# next run), and exits with the verdict.
finish() {
    if [ $FAILED -eq 0 ]; then
        echo "PASS: $SCEN"
    else
        # What a failure needs to be understood, since the run directory is reused by the next run.
        echo "--- daemon log (last 30 lines)"; tail -30 "$R/daemon.log" 2>/dev/null
        for f in "$R"/*.err; do [ -s "$f" ] && { echo "--- $f"; tail -10 "$f"; }; done
    fi
    exit $FAILED
}
