#!/usr/bin/env bash
# contrib/slurm's Prolog, TaskProlog and Epilog run as slurmd would run them (its environment
# variables, the TaskProlog's "export" lines applied to the task) against a local gpumuxd: each
# job's client registers with the priority its comment or environment asked for, clamped to
# the site's best; the Epilog removes the registration. No Slurm is needed.
# Usage: e2e_slurm.sh BUILD_DIR E2E_CLIENT RUN_DIR
set -u
B=$1 CLIENT=$2 R=$3
G=$B/gpumux D=$B/gpumuxd
S=$(cd "$(dirname "$0")/../../contrib/slurm" && pwd)
FAILED=0 DPID=
fail() { echo "FAIL: $*"; FAILED=1; }
ok() { echo "ok: $*"; }
trap '[ -n "$DPID" ] && kill $DPID 2>/dev/null; wait 2>/dev/null' EXIT
rm -rf "$R" && mkdir -p "$R/run" "$R/bin" && chmod 755 "$R" "$R/run"
export GPUMUX_STANDIN_DIR=$R GPUMUX_STANDIN_LOG=$R/standin.log GPUMUX_REAL_LIBCUDA=$B/standin/libcuda.so.1
export GPUMUX_RECONNECT_MS=50 GPUMUX_SHIM_DIR=$B/shim
printf '[daemon]\nruntime_dir = %s\nprofile_dir = %s/profiles\n' "$R/run" "$R" >"$R/gpumuxd.conf"
"$D" --foreground --config "$R/gpumuxd.conf" 2>"$R/daemon.log" & DPID=$!
for _ in $(seq 100); do "$G" status --runtime-dir "$R/run" >/dev/null 2>&1 && break; sleep 0.05; done
cat >"$R/slurm.conf" <<EOF
GPUMUX_BIN=$G
GPUMUX_RUNTIME_DIR=$R/run
GPUMUX_SLURM_BEST_PRIORITY=1
EOF
export GPUMUX_SLURM_CONF=$R/slurm.conf
# A fake scontrol for the job whose comment the Prolog must look up itself.
cat >"$R/bin/scontrol" <<'EOF'
#!/bin/sh
echo "JobId=$3 JobName=looked UserId=u(1000) Comment=gpumux:priority=3 some words StdOut=/dev/null"
EOF
chmod 755 "$R/bin/scontrol"

# job ID JOBNAME NAME WANT [VAR=VALUE...]: Prolog (as root, with the variables), TaskProlog (its
# output applied to the task's environment as slurmstepd does), the client, Epilog; the client
# must register as NAME with priority WANT.
job() {
    local id=$1 jobname=$2 name=$3 want=$4
    shift 4
    env -i PATH="$PATH" GPUMUX_SLURM_CONF="$GPUMUX_SLURM_CONF" SLURM_JOB_ID="$id" "$@" bash "$S/gpumux-prolog" 2>>"$R/prolog.err" || fail "job $id: Prolog failed"
    [ -f "$R/run/slurm/job_$id" ] || fail "job $id: the Prolog registered nothing"
    env -i PATH="$PATH" GPUMUX_SLURM_CONF="$GPUMUX_SLURM_CONF" SLURM_JOB_ID="$id" SLURM_JOB_NAME="$jobname" "$@" bash "$S/gpumux-task-prolog" >"$R/task-$id.out" 2>>"$R/task.err" ||
        fail "job $id: TaskProlog failed"
    # What slurmstepd does with those lines: export NAME=value, unset NAME.
    local envs=() unsets=() l
    while IFS= read -r l; do
        case $l in
        "export "*) envs+=("${l#export }") ;;
        "unset "*) unsets+=(-u "${l#unset }") ;;
        esac
    done <"$R/task-$id.out"
    env "${unsets[@]}" "${envs[@]}" "$CLIENT" --out "$R/job-$id.out" --kernels "k$id:100" --count 20 --sync-every 4 \
        2>"$R/job-$id.err" || fail "job $id: the task failed: $(tail -2 "$R/job-$id.err")"
    env -i PATH="$PATH" GPUMUX_SLURM_CONF="$GPUMUX_SLURM_CONF" SLURM_JOB_ID="$id" "$@" bash "$S/gpumux-epilog" || fail "job $id: Epilog failed"
    [ ! -e "$R/run/slurm/job_$id" ] || fail "job $id: the Epilog left its registration"
    local got
    got=$(sed -n "s/.* name '\\([^']*\\)' priority \\([0-9]\\).*/\\1 \\2/p" "$R/daemon.log" | grep "^$name " | tail -1)
    if [ "$got" = "$name $want" ]; then
        ok "job $id ($*): registered as '$name' at priority $want; $(grep -c "name=k$id " "$R/standin.log") kernels ran"
    else
        fail "job $id ($*): expected '$name $want' in the daemon's log, got '${got:-nothing}'"
    fi
    grep -q '^done$' "$R/job-$id.out" || fail "job $id: the task did not finish"
}

job 101 train train 2 SLURM_JOB_COMMENT="gpumux:priority=2 nightly run"
job 102 serve serve 6 SLURM_JOB_COMMENT="no request here" GPUMUX_PRIORITY=6
job 103 greedy greedy 1 SLURM_JOB_COMMENT="gpumux:priority=0"
job 104 typo typo 5 SLURM_JOB_COMMENT="gpumux:priority=12"
grep -q "ignoring 'gpumux:priority=12'" "$R/prolog.err" && ok "a bad priority is logged" || fail "no log line for priority 12"
grep -q "priority 0 asked, 1 is the best" "$R/prolog.err" && ok "a priority beyond the site's best is logged" ||
    fail "no log line for the clamped priority"
job 105 renamed my.job 4 SLURM_JOB_COMMENT="gpumux:priority=4 gpumux:name=my.job"
job 106 looked looked 3 PATH="$R/bin:$PATH"
[ $FAILED -eq 0 ] && echo "PASS: slurm" || { echo "--- daemon log"; tail -20 "$R/daemon.log"; cat "$R/prolog.err" "$R/task.err"; }
exit $FAILED
