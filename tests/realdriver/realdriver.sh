#!/usr/bin/env bash
# Tests against NVIDIA's own user-mode driver (ctest -L realdriver); see docs/shim.md.
#   realdriver.sh fetch DIR                         fetch the driver (scripts/nvidia-fixture)
#   realdriver.sh exports DIR SHIM                  the interposer exports every driver function
#   realdriver.sh parity DIR SHIM PROBE ARGS...     probe output identical with/without it
#   realdriver.sh program DIR SHIM EXE...           nvcc-built programs: output identical
# Without the fetched driver (no network) every test but fetch exits 77: skipped, with why.
set -uo pipefail
mode=$1 dir=$2
src=$(cd "$(dirname "$0")/../.." && pwd)
root=$dir/root
lib=$root/usr/lib/x86_64-linux-gnu
real=$lib/nvidia/current/libcuda.so.1

# Result lines also go to DIR/summary-MODE.txt, which .ci/run prints (ctest shows a passing
# test's output only with -V).
mkdir -p "$dir"
summary=$dir/summary-$mode.txt
say() {
	echo "$*"
	echo "$*" >>"$summary" 2>/dev/null || true
}
rm -f "$summary"

need_fixture() {
	if [ ! -e "$real" ]; then
		say "SKIPPED ($mode): NVIDIA's user-mode driver is not available: $(cat "$dir/unavailable" 2>/dev/null || echo "realdriver_fetch has not run")"
		exit 77
	fi
}

case $mode in
fetch)
	if out=$("$src/scripts/nvidia-fixture" "$dir" 2>&1); then
		rm -f "$dir/unavailable"
		say "fetched into $out: $(paste -sd, "$dir/versions")"
		exit 0
	fi
	echo "$out" | tail -1 >"$dir/unavailable"
	say "SKIPPED (fetch): could not fetch NVIDIA's user-mode driver from Debian non-free: $(cat "$dir/unavailable")"
	exit 77
	;;
exports)
	need_fixture
	shim=$3
	missing=$(comm -23 <(nm -D --defined-only "$real" | awk '$2=="T" && $3 ~ /^cu[A-Z]/ {print $3}' | sort -u) \
		<(nm -D --defined-only "$shim" | awk '{print $3}' | sort -u))
	n=$(nm -D --defined-only "$real" | awk '$2=="T" && $3 ~ /^cu[A-Z]/' | wc -l)
	if [ -n "$missing" ]; then
		echo "the interposer lacks $(wc -w <<<"$missing") of the driver's functions: $(head -c 300 <<<"$missing" | tr '\n' ' ')"
		echo "(regenerate shim/gen/nvidia_535_symbols.txt with scripts/nvidia-fixture DIR --symbols)"
		exit 1
	fi
	say "all $n cu* functions of $(grep libcuda1 "$dir/versions") are exported by the interposer ($(nm -D --defined-only "$shim" | wc -l) exports)"
	;;
parity)
	need_fixture
	shim=$3
	shift 3
	work=$(mktemp -d)
	trap 'rm -rf "$work"' EXIT
	LD_LIBRARY_PATH=$lib/nvidia/current:$lib "$@" >"$work/bare" 2>&1
	status=0
	for policy in passthrough queue daemon; do
		GPUMUX_SHIM_POLICY=$policy GPUMUX_RUNTIME_DIR=$work/no-daemon GPUMUX_SHIM_LOG=$work/log.$policy \
			GPUMUX_REAL_LIBCUDA=$real LD_LIBRARY_PATH=$(dirname "$shim"):$lib "$@" >"$work/$policy" 2>&1
		if ! grep -q "load real=$real policy=$policy" "$work/log.$policy"; then
			echo "$policy: the interposer did not load NVIDIA's driver (log: $(head -1 "$work/log.$policy" 2>/dev/null))"
			status=1
		elif ! cmp -s "$work/bare" "$work/$policy"; then
			say "$policy: answers differ from the driver's own:"
			diff "$work/bare" "$work/$policy" | head -6
			status=1
		else
			say "$policy: $(wc -l <"$work/bare") probe lines identical to the driver's own ($(grep -c '^gpa' "$work/bare") cuGetProcAddress probes)"
		fi
	done
	grep -v '^gpa\|^err' "$work/bare" | head -40
	exit $status
	;;
program)
	need_fixture
	shim=$3
	shift 3
	work=$(mktemp -d)
	trap 'rm -rf "$work"' EXIT
	status=0
	for exe in "$@"; do
		name=$(basename "$exe")
		LD_LIBRARY_PATH=$lib/nvidia/current:$lib "$exe" >"$work/$name.bare" 2>&1
		for policy in passthrough queue; do
			GPUMUX_SHIM_POLICY=$policy GPUMUX_SHIM_LOG=$work/log \
				GPUMUX_REAL_LIBCUDA=$real LD_LIBRARY_PATH=$(dirname "$shim"):$lib "$exe" >"$work/$name.$policy" 2>&1
			if ! grep -q "load real=$real" "$work/log"; then
				echo "$name ($policy): the interposer was not loaded"
				status=1
			elif ! cmp -s "$work/$name.bare" "$work/$name.$policy"; then
				say "$name ($policy): output differs from the driver's own:"
				diff "$work/$name.bare" "$work/$name.$policy" | head -6
				status=1
			else
				say "$name ($policy): $(wc -l <"$work/$name.bare") lines identical"
			fi
			rm -f "$work/log"
		done
		cat "$work/$name.bare"
	done
	exit $status
	;;
*)
	echo "realdriver.sh: unknown mode $mode" >&2
	exit 2
	;;
esac
