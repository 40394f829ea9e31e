#!/usr/bin/env bash
# Without the CUDA toolkit (GMX_CUDA_ROOT pointing nowhere) every test is still registered: the
# ones that need the interposer report SKIPPED with the reason, and the test count is the same
# as in this build. Usage: skips.sh SOURCE_DIR BUILD_DIR
set -u
SRC=$1 B=$2 W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cmake -S "$SRC" -B "$W" -DCMAKE_BUILD_TYPE=Release -DGMX_CUDA_ROOT=/nonexistent >"$W/configure.log" 2>&1 ||
	{ tail -20 "$W/configure.log"; fail "configure without CUDA failed"; }
here=$(cd "$B" && ctest -N | sed -n 's/^Total Tests: //p')
there=$(cd "$W" && ctest -N | sed -n 's/^Total Tests: //p')
[ -n "$here" ] && [ "$here" = "$there" ] || fail "$there tests registered without CUDA, $here with it"
(cd "$W" && ctest -L 'shim|e2e|realdriver' >"$W/ctest.log" 2>&1)
n=$(grep -c '\*\*\*Skipped' "$W/ctest.log")
total=$(cd "$W" && ctest -N -L 'shim|e2e|realdriver' | sed -n 's/^Total Tests: //p')
[ "$total" -gt 0 ] && [ "$n" = "$total" ] || { cat "$W/ctest.log"; fail "$n of $total CUDA tests reported Skipped"; }
grep -q 'SKIPPED: no CUDA toolkit' <(cd "$W" && ctest -R shim_basic_queue -V 2>&1) || fail "no reason given"
echo "ok: $total tests that need CUDA report Skipped; $there tests registered either way"
