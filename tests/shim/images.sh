#!/usr/bin/env bash
# Runs shimtest_images against a fake driver and checks that every launch reached the driver
# with the program's parameter values, queued and released under its kernel's name.
# Usage: images.sh EXE FATBIN DIR KIND   (KIND: 122 = a driver without cuFuncGetName/ParamInfo,
#        130 = with them; GPUMUX_SHIM_KERNEL_INFO may be set by CTest)
set -uo pipefail
exe=$1 fatbin=$2 dir=$3 kind=$4
[ -e "$fatbin" ] || { echo "SKIPPED: no nvcc-built fatbin ($fatbin)"; exit 77; }
rm -f "$dir/fake.log" "$dir/shim.log"
FAKECUDA_LOG=$dir/fake.log GPUMUX_SHIM_LOG=$dir/shim.log "$exe" "$fatbin" >"$dir/stdout" 2>"$dir/stderr" ||
	{ echo "shimtest_images failed:"; cat "$dir/stdout" "$dir/stderr"; exit 1; }
fail=0
check() {
	local what=$1
	shift
	if "$@"; then echo "ok: $what"; else echo "FAILED: $what"; fail=1; fi
}
check "the driver received exactly the parameters the program passed ($(grep -c '^launch' "$dir/stdout") launches)" \
	cmp -s <(grep '^launch' "$dir/stdout") "$dir/fake.log"
mode=${GPUMUX_SHIM_KERNEL_INFO:-driver}
for k in _Z6vecaddPKfS0_Pfi _Z5mixedcs1S3A16dy cfun _Z3big3Bigi; do
	check "$k queued and released under its name" grep -q "kind=launch .*name=$k " "$dir/shim.log"
done
check "the CUkernel launch itself was queued" [ "$(grep -c 'kind=launch .*name=_Z5mixedcs1S3A16dy ' "$dir/shim.log")" = 2 ]
if [ "$kind" = 122 ] || [ "$mode" = image ]; then
	check "the unreadable image's kernel was not queued, and was counted" \
		bash -c "! grep -q 'name=nowhere' '$dir/shim.log' && grep -q '^gpumux shim: 1 launches of unidentified kernels' '$dir/stderr'"
	check "the runtime's private load was seen" grep -q "kernel-info CUDART_INTERFACE\[6\]: 11 kernels" "$dir/shim.log"
fi
if [ "$mode" = verify ]; then
	if [ -n "${FAKECUDA_LIE:-}" ]; then
		check "a driver that misdescribes cfun is caught" grep -q "kernel cfun: the driver and the image differ: parameter 1 at 4:8, image says 8:8" "$dir/stderr"
		check "counted" grep -q "4 agree, 1 differ, 1 not in any image" "$dir/stderr"
	else
		check "the driver's layouts and the images' agree on every kernel handle" grep -q "5 agree, 0 differ, 1 not in any image" "$dir/stderr"
	fi
fi
echo "stderr:"
cat "$dir/stderr"
exit $fail
