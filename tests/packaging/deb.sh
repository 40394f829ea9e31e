#!/usr/bin/env bash
# The Debian package: configured for /usr, built, packed with CPack; it installs into a scratch
# root (dpkg --root), where gpumux --help, --version and gpumuxd --version run and gpumux run
# finds the interposer; its systemd unit passes systemd-analyze verify; it purges without a
# trace. Usage: deb.sh SOURCE_DIR WORK_DIR. SKIPPED without dpkg-deb or cpack.
set -u
SRC=$1 W=$2
fail() { echo "FAIL: $*"; exit 1; }
ok() { echo "ok: $*"; }
for t in dpkg dpkg-deb cpack; do command -v $t >/dev/null || { echo "SKIPPED: no $t"; exit 77; }; done
mkdir -p "$W"
B=$W/build ROOT=$W/root
# The product only (no tests, benchmarks or fuzz targets): cpack builds every target first.
[ -f "$B/CMakeCache.txt" ] || cmake -S "$SRC" -B "$B" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
    -DGMX_BUILD_TESTS=OFF >"$W/configure.log" 2>&1 ||
    fail "configure: $(tail -3 "$W/configure.log")"
cmake --build "$B" -j2 --target gpumux gpumuxd gmx_shim >"$W/build.log" 2>&1 || fail "build: $(tail -3 "$W/build.log")"
rm -f "$B"/gpumux_*.deb
(cd "$B" && cpack -G DEB >"$W/cpack.log" 2>&1) || fail "cpack: $(tail -5 "$W/cpack.log")"
DEB=$(ls "$B"/gpumux_*.deb 2>/dev/null | head -1)
[ -n "$DEB" ] || fail "cpack made no .deb"
ok "built $(basename "$DEB") ($(wc -c <"$DEB") bytes)"
dpkg-deb --info "$DEB" >"$W/info.txt" || fail "dpkg-deb --info"
grep -q '^ Depends: .*libc6' "$W/info.txt" && ok "depends: $(sed -n 's/^ Depends: //p' "$W/info.txt")" || fail "no Depends with libc6"
dpkg-deb --contents "$DEB" | awk '{ print $6 }' >"$W/contents.txt"
for f in ./usr/bin/gpumux ./usr/sbin/gpumuxd ./usr/lib/x86_64-linux-gnu/gpumux/libcuda.so.1 ./etc/gpumux/gpumuxd.conf \
    ./usr/lib/systemd/system/gpumuxd.service ./usr/share/man/man8/gpumuxd.8.gz ./usr/share/man/man1/gpumux-cdi.1.gz \
    ./usr/lib/gpumux/slurm/gpumux-task-prolog ./usr/share/gpumux/grafana/gpumux.json; do
    grep -qx "$f" "$W/contents.txt" || grep -qx "${f%.gz}" "$W/contents.txt" || fail "the package lacks $f"
done
ok "contents: binaries, interposer, configuration, unit, man pages, Slurm scripts, dashboard"
dpkg-deb --ctrl-tarfile "$DEB" | tar -t | grep -q conffiles && dpkg-deb -I "$DEB" conffiles | grep -qx /etc/gpumux/gpumuxd.conf ||
    fail "/etc/gpumux/gpumuxd.conf is not a conffile"

# Install into a scratch root with its own dpkg database.
rm -rf "$ROOT" && mkdir -p "$ROOT/var/lib/dpkg/info" "$ROOT/var/lib/dpkg/updates" "$ROOT/var/lib/dpkg/triggers"
touch "$ROOT/var/lib/dpkg/status"
D=(dpkg --root="$ROOT" --log=/dev/null --force-script-chrootless --force-not-root --force-depends)
"${D[@]}" -i "$DEB" >"$W/install.log" 2>&1 || fail "dpkg -i: $(tail -3 "$W/install.log")"
"${D[@]}" -s gpumux | grep -q '^Status: install ok installed' || fail "dpkg does not list gpumux as installed"
ok "installed into $ROOT"
"$ROOT/usr/bin/gpumux" --help >"$W/help.txt" 2>&1 || fail "gpumux --help from the scratch root failed"
grep -q "metrics" "$W/help.txt" && grep -q "cdi" "$W/help.txt" || fail "gpumux --help lacks metrics or cdi"
v=$("$ROOT/usr/bin/gpumux" --version) || fail "gpumux --version"
vd=$("$ROOT/usr/sbin/gpumuxd" --version) || fail "gpumuxd --version"
ok "from the scratch root: gpumux --help; '$v'; '$vd'"
"$ROOT/usr/bin/gpumux" run --print-env | grep -qx "export LD_LIBRARY_PATH=$ROOT/usr/lib/x86_64-linux-gnu/gpumux.*" ||
    fail "gpumux run does not find the installed interposer: $("$ROOT/usr/bin/gpumux" run --print-env 2>&1 | head -1)"
ok "gpumux run finds the interposer in $ROOT/usr/lib/x86_64-linux-gnu/gpumux"
if command -v systemd-analyze >/dev/null; then
    # The unit as installed, its command pointed into the scratch root (verify checks that it
    # exists), its man page found there (verify runs man on Documentation=).
    sed "s#^ExecStart=/usr/sbin/#ExecStart=$ROOT/usr/sbin/#" "$ROOT/usr/lib/systemd/system/gpumuxd.service" >"$W/gpumuxd.service"
    MANPATH=$ROOT/usr/share/man systemd-analyze verify "$W/gpumuxd.service" >"$W/verify.log" 2>&1 ||
        fail "systemd-analyze verify: $(cat "$W/verify.log")"
    ok "systemd-analyze verify accepts gpumuxd.service (ExecStart, Type=notify, its man page)"
else
    echo "SKIPPED part: no systemd-analyze"
fi
"${D[@]}" -P gpumux >"$W/remove.log" 2>&1 || fail "dpkg -P: $(tail -3 "$W/remove.log")"
left=$(find "$ROOT" -mindepth 1 -not -path "$ROOT/var/lib/dpkg*" -not -type d)
[ -z "$left" ] || fail "purge left: $left"
left=$(find "$ROOT" -mindepth 1 -type d -not -path "$ROOT/var*" | head -3)
[ -z "$left" ] || fail "purge left directories: $left"
ok "purged: nothing left in the scratch root"
echo "PASS: deb"
