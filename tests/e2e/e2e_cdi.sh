#!/usr/bin/env bash
# `gpumux cdi generate`: the spec validates against the CDI schema (and broken ones do not);
# its edits, applied as a container runtime would (bind mounts in a private mount namespace,
# the spec's environment, chroot into a root filesystem built here from host files: no image),
# put a client in that root under the host's gpumuxd, in both variants: LD_LIBRARY_PATH and
# /etc/ld.so.preload (with an image environment that has no LD_LIBRARY_PATH at all).
# Usage: e2e_cdi.sh BUILD_DIR E2E_CLIENT RUN_DIR. Needs root (unshare, mount, chroot): SKIPPED
# otherwise.
set -u
B=$1 CLIENT=$2 R=$3
G=$B/gpumux D=$B/gpumuxd
FAILED=0 DPID=
fail() { echo "FAIL: $*"; FAILED=1; }
ok() { echo "ok: $*"; }
trap '[ -n "$DPID" ] && kill $DPID 2>/dev/null; wait 2>/dev/null' EXIT
rm -rf "$R" && mkdir -p "$R/run" "$R/out" && chmod 755 "$R" "$R/run" "$R/out"

# 1. The spec and the schema.
"$G" cdi generate --runtime-dir "$R/run" --shim-dir "$B/shim" --output "$R/cdi.json" || { fail "generate"; exit 1; }
"$G" cdi validate "$R/cdi.json" >/dev/null || fail "the generated spec does not validate"
jq -e '.cdiVersion and .kind == "gpumux.io/gpu" and ([.devices[].name] | index("p0") != null and index("default") != null)
       and (.containerEdits.mounts | length) == 2' "$R/cdi.json" >/dev/null || fail "the spec lacks its devices or mounts"
# broken EDIT WHAT: the spec changed by the jq program EDIT is refused with a message naming WHAT.
broken() {
    jq "$1" "$R/cdi.json" >"$R/bad.json"
    if "$G" cdi validate "$R/bad.json" 2>"$R/bad.err" >/dev/null; then
        fail "a spec with '$1' validates"
    elif grep -q -- "$2" "$R/bad.err"; then
        ok "refused ($1): $(cat "$R/bad.err" | sed 's/.*bad.json: //')"
    else
        fail "'$1' refused without naming $2: $(cat "$R/bad.err")"
    fi
}
broken 'del(.kind)' 'kind'
broken '.kind = "gpumux"' 'kind'
broken '.kind = "Gpumux.io/gpu"' 'kind'
broken 'del(.cdiVersion)' 'cdiVersion'
broken '.devices = []' 'devices'
broken '.devices[0].name = "-p"' 'devices\[0\].name'
broken '.devices[1].name = "default"' "names two devices"
broken '.devices[0].containerEdits = {}' 'must edit something'
broken '.devices[0].containerEdits.env = ["NOVALUE"]' 'NAME=VALUE'
broken '.containerEdits.mounts[0].containerPath = "usr/lib"' 'containerEdits.mounts\[0\].containerPath'
broken '.containerEdits.mounts[0].options = "ro"' 'array of strings'
broken '.devices[0].extra = 1' "unknown key 'extra'"
broken '.containerEdits.hooks = [{"hookName": "whenever", "path": "/bin/true"}]' 'hookName'

# 2. Apply it. Root, private mounts and chroot are what a container runtime uses.
if [ "$(id -u)" != 0 ] || ! unshare --mount --fork true 2>/dev/null; then
    echo "SKIPPED: applying the spec needs root and mount namespaces (unshare --mount)"
    exit $([ $FAILED -eq 0 ] && echo 77 || echo 1)
fi
# A root filesystem: the client and the libraries it needs; the stand-in driver where NVIDIA's
# own CDI device would put the real libcuda.so.1.
ROOT=$R/root
mkdir -p "$ROOT/usr/lib/x86_64-linux-gnu" "$ROOT/lib64" "$ROOT/bin" "$ROOT/etc" "$ROOT/tmp" "$ROOT/out" "$ROOT/proc"
cp "$CLIENT" "$ROOT/bin/e2e_client"
for lib in $(ldd "$CLIENT" "$B/standin/libcuda.so.1" "$B/shim/libcuda.so.1" | awk '$3 ~ /^\// { print $3 } $1 ~ /^\/.*ld-linux/ { print $1 }' | sort -u); do
    case $lib in */libcuda.so.1) continue ;; esac
    case $lib in *ld-linux*) cp -L "$lib" "$ROOT/lib64/" ;; *) cp -L "$lib" "$ROOT/usr/lib/x86_64-linux-gnu/" ;; esac
done
cp "$B/standin/libcuda.so.1" "$ROOT/usr/lib/x86_64-linux-gnu/libcuda.so.1"
ln -s usr/lib "$ROOT/lib"

# gpumuxd on the host, its socket where the spec says.
printf '[daemon]\nruntime_dir = %s\nprofile_dir = %s/profiles\n' "$R/run" "$R" >"$R/gpumuxd.conf"
export GPUMUX_STANDIN_DIR=$R/out GPUMUX_STANDIN_LOG=/out/standin.log
"$D" --foreground --config "$R/gpumuxd.conf" 2>"$R/daemon.log" & DPID=$!
for _ in $(seq 100); do "$G" status --runtime-dir "$R/run" >/dev/null 2>&1 && break; sleep 0.05; done

# run_in SPEC DEVICE NAME ENV_MODE: applies the spec's edits (common and DEVICE's) and runs the
# client as NAME inside ROOT. ENV_MODE image: the spec's environment on top of the image's;
# reset: the image resets LD_LIBRARY_PATH (dropped from the environment).
run_in() {
    local spec=$1 dev=$2 name=$3 mode=$4
    local script=$R/apply-$name.sh
    {
        echo "set -e"
        echo "mount --bind '$R/out' '$ROOT/out'"
        echo "mount -t proc proc '$ROOT/proc'"
        jq -r --arg d "$dev" '[.containerEdits.mounts[]?, (.devices[] | select(.name == $d) | .containerEdits.mounts[]?)][] |
            "mkdir -p \"$(dirname \(env.ROOT)\(.containerPath))\"; " +
            "[ -d \"\(.hostPath)\" ] && mkdir -p \"\(env.ROOT)\(.containerPath)\" || touch \"\(env.ROOT)\(.containerPath)\"; " +
            "mount --bind \"\(.hostPath)\" \"\(env.ROOT)\(.containerPath)\"" +
            (if (.options | index("ro")) then "; mount -o remount,bind,ro \"\(env.ROOT)\(.containerPath)\"" else "" end)' "$spec"
        printf 'exec chroot %s /usr/bin/env -i PATH=/bin GPUMUX_STANDIN_DIR=/out GPUMUX_STANDIN_LOG=/out/standin.log GPUMUX_NAME=%s ' "$ROOT" "$name"
        jq -r --arg d "$dev" '[.containerEdits.env[]?, (.devices[] | select(.name == $d) | .containerEdits.env[]?)][] | @sh' "$spec" |
            { if [ "$mode" = reset ]; then grep -v "^'LD_LIBRARY_PATH="; else cat; fi; } | tr '\n' ' '
        echo "/bin/e2e_client --out /out/$name.out --kernels k$name:200 --count 50 --sync-every 5"
    } >"$script"
    ROOT=$ROOT unshare --mount --fork bash "$script" 2>"$R/$name.err"
}
mkdir -p "$ROOT/usr/bin" && cp /usr/bin/env "$ROOT/usr/bin/env"
export ROOT

run_in "$R/cdi.json" p2 ctrld image || fail "the client in the container failed: $(tail -3 "$R/ctrld.err")"
"$G" cdi generate --runtime-dir "$R/run" --shim-dir "$B/shim" --preload "$R/ld.so.preload" --output "$R/cdi-preload.json" ||
    fail "generate --preload"
"$G" cdi validate "$R/cdi-preload.json" >/dev/null || fail "the preload spec does not validate"
[ "$(cat "$R/ld.so.preload")" = /usr/local/gpumux/lib/libcuda.so.1 ] || fail "the preload file names $(cat "$R/ld.so.preload")"
# A sanitizer build: AddressSanitizer's runtime must be the first library loaded, so it goes
# ahead of the interposer in this test's copy of the preload file (as LD_PRELOAD does elsewhere).
asan=$(ldd "$CLIENT" | awk '/libasan/ { print $3 }')
[ -z "$asan" ] || printf '/usr/lib/x86_64-linux-gnu/%s\n%s\n' "$(basename "$asan")" "$(cat "$R/ld.so.preload")" >"$R/ld.so.preload"
run_in "$R/cdi-preload.json" p7 ctrpre reset || fail "the preloaded client failed: $(tail -3 "$R/ctrpre.err")"

# Each client was scheduled by the host's gpumuxd with the device's priority, and all of its
# kernels ran on the stand-in.
for c in "ctrld 2" "ctrpre 7"; do
    set -- $c
    grep -q "name '$1' priority $2" "$R/daemon.log" && ok "$1: registered with gpumuxd at priority $2" ||
        fail "$1 never registered with priority $2 (daemon log: $(tail -2 "$R/daemon.log"))"
    grep -q '^done$' "$R/out/$1.out" 2>/dev/null || fail "$1 did not finish"
    n=$(grep -c "name=k$1 " "$R/out/standin.log" 2>/dev/null)
    [ "$n" = 50 ] && ok "$1: 50 kernels ran" || fail "$1: $n of 50 kernels ran"
done
# Each command was granted, or released under a lease the daemon gave (docs/protocol.md).
grants=$("$G" status --json --runtime-dir "$R/run" | jq '.grants + .leased_releases')
[ "$grants" -ge 100 ] && ok "gpumuxd scheduled $grants commands (granted or leased)" || fail "gpumuxd scheduled only $grants commands (granted or leased)"
[ $FAILED -eq 0 ] && echo "PASS: cdi" || { echo "--- daemon log"; tail -20 "$R/daemon.log"; }
exit $FAILED
