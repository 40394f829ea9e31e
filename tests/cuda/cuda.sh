#!/usr/bin/env bash
# Runs an nvcc-built CUDA runtime program (tests/cuda/*.cu) on the stand-in driver.
# Usage: cuda.sh MODE BUILD_DIR RUN_DIR PROGRAM [PROGRAM2]
#   alone        PROGRAM on the stand-in, no interposer
#   run          PROGRAM under `gpumux run` with gpumuxd (fikit); the daemon must see it
#   hp_lp        PROGRAM (roundtrip, high priority, synchronising after each kernel) beside
#                PROGRAM2 (roundtrip, low priority, saturating) under gpumuxd (fikit): while a
#                high-priority kernel waits, at most 2 x inflight low-priority kernels start
#                (read from the stand-in's execution log, as tests/e2e's e2e_hp_lp)
#   oversubscribe PROGRAM (oversub): two runs recorded by the stand-in (GPUMUX_STANDIN_RECORD),
#                templates learned from them by `gpumux profile templates`, then the program under
#                `gpumux run --oversubscribe --templates` on a 64 MB device
#   alone118     PROGRAM (rt118, a cudart 11.8 program) with FATBIN on the stand-in; PROGRAM2 is
#                the directory holding NVIDIA's libcudart.so.11.0 (tests/realdriver's fixture)
#   v122         rt118 on the stand-in playing a CUDA 12.2 driver (GPUMUX_STANDIN_DRIVER_VERSION
#                =12020: no cuFuncGetName/cuFuncGetParamInfo) behind the interposer (queue
#                policy): its launches must be queued and released under their names with the
#                same grid, block and parameters as on the 13.0-like stand-in, the layouts learned
#                from the image; then an HP and an LP rt118 under gpumuxd (fikit), as hp_lp
# Each program prints "ok ..." on success; its output is shown.
set -u
MODE=$1 B=$2 R=$3 P=$4 P2=${5:-} FATBIN=${6:-}
G=$B/gpumux D=$B/gpumuxd
CUDA_LIB=${GMX_CUDA_LIB:-/usr/local/cuda/lib64}
rm -rf "$R" && mkdir -p "$R" && chmod 755 "$R"
export GPUMUX_RUNTIME_DIR=$R GPUMUX_STANDIN_DIR=$R GPUMUX_STANDIN_LOG=$R/standin.log
export GPUMUX_REAL_LIBCUDA=$B/standin/libcuda.so.1
export GPUMUX_STANDIN_MEM_MB=64 # a small device: oversub allocates 150 % of it
DPID=
cleanup() { [ -n "$DPID" ] && kill "$DPID" 2>/dev/null; wait 2>/dev/null; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

start_daemon() {
    { echo "[daemon]"; echo "runtime_dir = $R"; echo "profile_dir = $R/profiles"; echo "policy = fikit"
      for l in "$@"; do echo "$l"; done; } >"$R/gpumuxd.conf"
    "$D" --foreground --config "$R/gpumuxd.conf" 2>>"$R/daemon.log" &
    DPID=$!
    for _ in $(seq 100); do "$G" status >/dev/null 2>&1 && return 0; sleep 0.05; done
    fail "gpumuxd did not start: $(tail -3 "$R/daemon.log")"
}

# check_hp_lp INFLIGHT: from the stand-in's log, at most 2 x INFLIGHT low-priority kernels start
# while a high-priority kernel waits (launch time in hp.out to its start); the process with the
# fewest kernels is the high-priority one.
check_hp_lp() {
    local INFL=$1
    # The stand-in logs the pid of each command.
    pids=$(grep 'kind=kernel' "$R/standin.log" | sed 's/.* pid=\([0-9]*\) .*/\1/' | sort | uniq -c | sort -n)
    HPID=$(echo "$pids" | head -1 | awk '{print $2}') LPID=$(echo "$pids" | tail -1 | awk '{print $2}')
    sed -n 's/^launch t_ns=//p' "$R/hp.out" >"$R/hp.launch"
    grep " pid=$HPID .*kind=kernel" "$R/standin.log" | sed 's/start_ns=\([0-9]*\) .*/\1/' | sort -n >"$R/hp.start"
    grep " pid=$LPID .*kind=kernel" "$R/standin.log" | sed 's/start_ns=\([0-9]*\) .*/\1/' | sort -n >"$R/lp.start"
    [ "$(wc -l <"$R/hp.launch")" -eq "$(wc -l <"$R/hp.start")" ] ||
        fail "hp launched $(wc -l <"$R/hp.launch") kernels, $(wc -l <"$R/hp.start") ran"
    worst=$(paste -d' ' "$R/hp.launch" "$R/hp.start" | awk '
        FNR == NR { L[n] = $1; H[n] = $2; n++; next }
        { s = $1; for (i = 0; i < n; i++) if (s > L[i] && s < H[i]) c[i]++ }
        END { w = 0; for (i = 0; i < n; i++) if (c[i] > w) w = c[i]; print w }' - "$R/lp.start")
    BOUND=$((2 * INFL))
    echo "fikit: at most $worst low-priority kernels started while a high-priority kernel waited (bound $BOUND)"
    [ "$worst" -le "$BOUND" ] || fail "$worst low-priority kernels started while a high-priority kernel waited"
}

ok_of() { grep -q '^ok' "$1" || fail "$(basename "$1" .out): $(grep -m1 -E 'FAIL|error' "$1" || tail -1 "$1")"; }

case $MODE in
alone)
    # Durations from the kernel-times file: the round trip's kernel by name, the rest the default.
    printf '# name us\n_Z5scalePffi 123\n* 17\n' >"$R/times"
    GPUMUX_STANDIN_KERNEL_TIMES=$R/times LD_LIBRARY_PATH=$B/standin:$CUDA_LIB timeout 120 "$P" >"$R/p.out" 2>&1
    cat "$R/p.out"; ok_of "$R/p.out"
    n=$(grep -c 'kind=kernel' "$R/standin.log")
    echo "stand-in ran $n kernels"; [ "$n" -gt 0 ] || fail "no kernel reached the stand-in"
    case $(basename "$P") in
    roundtrip*) want=123000 ;;
    *) want=17000 ;;
    esac
    grep -q "kind=kernel .* dur_ns=$want\$" "$R/standin.log" || fail "no kernel ran the duration of the times file ($want ns)"
    case $(basename "$P") in roundtrip*)
        other=$(grep 'kind=kernel' "$R/standin.log" | grep -vc "dur_ns=123000$")
        [ "$other" -eq 0 ] || fail "$other kernels did not take the 123 us the times file gives them";;
    esac
    ;;
run)
    start_daemon
    GPUMUX_SHIM_LOG=$R/shim.log LD_LIBRARY_PATH=$CUDA_LIB timeout 120 "$G" run --priority 3 --name prog -- "$P" \
        >"$R/p.out" 2>&1
    cat "$R/p.out"; ok_of "$R/p.out"
    grep -q "name 'prog'" "$R/daemon.log" || fail "gpumuxd never saw the program (it ran unscheduled)"
    n=$(grep -c 'kind=kernel' "$R/standin.log")
    echo "stand-in ran $n kernels under gpumux run"; [ "$n" -gt 0 ] || fail "no kernel reached the stand-in"
    ;;
hp_lp)
    INFL=2
    start_daemon "inflight = $INFL"
    # The roundtrip's kernels take 300 µs on the stand-in (durations file).
    printf '_Z5scalePffi 300\n' >"$R/times"
    export GPUMUX_STANDIN_KERNEL_TIMES=$R/times
    LD_LIBRARY_PATH=$CUDA_LIB timeout 120 "$G" run --priority 7 --name lp -- "$P2" 1500 >"$R/lp.out" 2>&1 &
    LP=$!
    sleep 0.5
    LD_LIBRARY_PATH=$CUDA_LIB timeout 120 "$G" run --priority 0 --name hp -- "$P" 40 --log-launches \
        >"$R/hp.out" 2>&1 || fail "hp: $(tail -1 "$R/hp.out")"
    wait $LP || fail "lp: $(tail -1 "$R/lp.out")"
    tail -1 "$R/hp.out"; tail -1 "$R/lp.out"
    ok_of "$R/hp.out"; ok_of "$R/lp.out"
    grep -q "name 'hp'" "$R/daemon.log" && grep -q "name 'lp'" "$R/daemon.log" ||
        fail "gpumuxd did not see both programs"
    check_hp_lp $INFL
    ;;
oversubscribe)
    # Templates learned by `gpumux profile templates` from two recorded runs of the same program
    # at two sizes (GPUMUX_STANDIN_RECORD), then the program at 150 % of a 64 MB device under
    # `gpumux run --oversubscribe --templates`.
    # oversub takes the device size it fills 150 % of: recorded at two sizes, its extents are
    # learned as linear in its size argument (T2); the other programs are recorded once (T1).
    case $(basename "$P") in oversub*) sizes="32 48" run_arg=64;; *) sizes="-" run_arg=;; esac
    recs=()
    for mb in $sizes; do
        arg=$mb; [ "$mb" = - ] && arg=
        GPUMUX_STANDIN_RECORD=$R/rec$mb.gmxw LD_LIBRARY_PATH=$B/standin:$CUDA_LIB timeout 120 "$P" $arg >"$R/rec$mb.out" 2>&1
        ok_of "$R/rec$mb.out"
        [ -s "$R/rec$mb.gmxw" ] || fail "no recording written by the stand-in"
        recs+=("$R/rec$mb.gmxw")
    done
    "$G" profile templates "${recs[@]}" -o "$R/t.gmxtpl" >"$R/learn.out" 2>&1 ||
        fail "gpumux profile templates: $(tail -1 "$R/learn.out")"
    cat "$R/learn.out"
    case $(basename "$P") in oversub*)
        "$G" profile show "$R/t.gmxtpl" | grep -q 'T2 .*_Z4fillPiim' ||
            fail "no T2 template learned for fill: $("$G" profile show "$R/t.gmxtpl")";;
    esac
    start_daemon "device_memory_mb = 64"
    GPUMUX_SHIM_LOG=$R/big.shim LD_LIBRARY_PATH=$CUDA_LIB timeout 120 "$G" run --oversubscribe --templates "$R/t.gmxtpl" \
        --priority 3 --name big -- "$P" $run_arg >"$R/p.out" 2>&1
    cat "$R/p.out"; ok_of "$R/p.out"
    grep -q "name 'big'" "$R/daemon.log" || fail "gpumuxd never saw the program"
    grep -q "templates: [1-9][0-9]* kernels" "$R/big.shim" || fail "the interposer did not load the learned templates"
    "$G" status --json >"$R/status.json" 2>/dev/null
    echo "templates loaded by the interposer: $(grep -m1 'templates:' "$R/big.shim" | cut -d' ' -f2-)"
    ;;
alone118)
    [ -e "$P2/libcudart.so.11.0" ] || { echo "SKIPPED: no libcudart.so.11.0 in $P2 (tests/realdriver's fixture could not be fetched)"; exit 77; }
    LD_LIBRARY_PATH=$B/standin:$P2 timeout 120 "$P" "$FATBIN" 20 >"$R/p.out" 2>&1
    rc=$?; [ $rc -eq 77 ] && { cat "$R/p.out"; exit 77; }
    cat "$R/p.out"; ok_of "$R/p.out"
    ;;
v122)
    [ -e "$P2/libcudart.so.11.0" ] || { echo "SKIPPED: no libcudart.so.11.0 in $P2 (tests/realdriver's fixture could not be fetched)"; exit 77; }
    # The same program behind the interposer (queue policy) on a 13.0-like and a 12.2-like stand-in.
    for v in 13000 12020; do
        GPUMUX_STANDIN_DRIVER_VERSION=$v GPUMUX_SHIM_POLICY=queue GPUMUX_SHIM_LOG=$R/shim-$v.log \
            LD_LIBRARY_PATH=$B/shim:$P2 timeout 120 "$P" "$FATBIN" 20 >"$R/p-$v.out" 2>"$R/p-$v.err"
        tail -1 "$R/p-$v.out"; ok_of "$R/p-$v.out"
        # launches as released to the driver, the device pointer named
        # the device pointer as the log prints it: its 8 bytes in memory order (little-endian)
        ptr=$(printf '%016x' "$(sed -n 's/^dptr=//p' "$R/p-$v.out")" | sed 's/../& /g' | awk '{for (i = NF; i > 0; i--) printf "%s", $i}')
        grep ' kind=launch ' "$R/shim-$v.log" | sed "s/^[0-9]* release seq=[0-9]* //; s/ stream=[^ ]*//; s/$ptr/DPTR/g; s/ rc=.*//" \
            >"$R/launches-$v.txt"
    done
    grep -q 'kernel-info source=images (driver lacks cuFuncGetName/cuFuncGetParamInfo)' "$R/shim-12020.log" ||
        fail "on the 12.2-like stand-in the interposer did not learn kernels from the images: $(grep kernel-info "$R/shim-12020.log")"
    n=$(grep -c 'name=scale118 ' "$R/launches-12020.txt")
    [ "$n" -eq 20 ] || fail "on the 12.2-like stand-in $n of 20 launches were queued under their name"
    cmp -s "$R/launches-13000.txt" "$R/launches-12020.txt" ||
        fail "the launches reaching the driver differ: $(diff "$R/launches-13000.txt" "$R/launches-12020.txt" | head -3)"
    echo "12.2-like: $n launches queued as scale118, identical to the 13.0-like run: $(head -1 "$R/launches-12020.txt")"
    # Scheduled by gpumuxd: a high-priority rt118 keeps its place beside a low-priority one.
    export GPUMUX_STANDIN_DRIVER_VERSION=12020
    rm -f "$R/standin.log" # the bound is read from this run's log only
    INFL=2
    start_daemon "inflight = $INFL"
    printf 'scale118 300\n' >"$R/times"
    export GPUMUX_STANDIN_KERNEL_TIMES=$R/times
    LD_LIBRARY_PATH=$P2 GPUMUX_SHIM_LOG=$R/lp.shim timeout 120 "$G" run --priority 7 --name lp -- "$P" "$FATBIN" 1500 >"$R/lp.out" 2>&1 &
    LP=$!
    sleep 0.5
    LD_LIBRARY_PATH=$P2 GPUMUX_SHIM_LOG=$R/hp.shim timeout 120 "$G" run --priority 0 --name hp -- "$P" "$FATBIN" 40 --log-launches \
        >"$R/hp.out" 2>&1 || fail "hp: $(tail -1 "$R/hp.out")"
    wait $LP || fail "lp: $(tail -1 "$R/lp.out")"
    ok_of "$R/hp.out"; ok_of "$R/lp.out"
    grep -q 'kernel-info source=images' "$R/hp.shim" || fail "hp: the interposer did not learn from the images"
    check_hp_lp $INFL
    ;;
*) echo "unknown mode $MODE"; exit 2 ;;
esac
echo "passed: $MODE $(basename "$P")"
