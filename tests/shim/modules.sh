#!/usr/bin/env bash
# Runs shimtest_modules (kernel identity from loaded images) and checks what reached the driver.
# Usage: modules.sh EXE DIR MODE   (MODE: image, verify or driver = GPUMUX_SHIM_KERNEL_INFO)
# The environment (CTest) points the shim at the stand-in, with the queue policy and its logs
# in DIR.
set -uo pipefail
exe=$1 dir=$2 mode=$3
rm -f "$dir/shim.log" "$dir/stderr"
GPUMUX_SHIM_KERNEL_INFO=$mode "$exe" "$dir" 2>"$dir/stderr" >"$dir/stdout" || { echo "shimtest_modules failed:"; cat "$dir/stderr"; exit 1; }
log=$dir/shim.log
fail=0
check() { # description, then a command that must succeed
	local what=$1
	shift
	if "$@"; then echo "ok: $what"; else echo "FAILED: $what"; fail=1; fi
}
released() { grep -cE "kind=launch .*name=$1 .*params=\[$2\]" "$log"; }
# Each identified launch was queued and released with its parameters, laid out as the image says.
check "fast (cuModuleLoadData) queued with its parameters x3" [ "$(released fast '0:8:[0-9a-f]*,8:4:0(0|1|2)110000')" -ge 3 ]
check "slow queued with its parameters x3" [ "$(released slow '0:8:[0-9a-f]*,8:8:[0-9a-f]*,16:4:0(0|1|2)220000')" -ge 3 ]
check "fast (cuModuleLoad, a file) queued x3" [ "$(grep -cE "kind=launch .*name=fast .*params=\[0:8:[0-9a-f]*,8:4:0(0|1|2)330000\]" "$log")" = 3 ]
check "slow after an unload and reload queued" [ "$(grep -cE "kind=launch .*name=slow .*16:4:00550000\]" "$log")" = 1 ]
check "fast launches of both modules all released with parameters" [ "$(released fast '0:8:[0-9a-f]*,8:4:0[0-2](11|33)0000')" = 6 ]
if [ "$mode" != image ]; then
	# The stand-in has cuFuncGetName/ParamInfo: every kernel is the driver's to name.
	check "blind named by the driver and queued" [ "$(released blind '0:8:[0-9a-f]*,8:4:0[0-2]440000')" = 3 ]
fi
if [ "$mode" = driver ]; then
	check "nothing parsed (the driver describes kernels)" bash -c "! grep -q 'kernel-info cuModuleLoad' '$log'"
elif [ "$mode" = image ]; then
	check "blind (no PTX) never queued" [ "$(grep -c 'name=blind' "$log")" = 0 ]
	check "blind's image reported unreadable once" grep -q "cuModuleLoadData: cannot read the kernels of this image" "$dir/stderr"
	check "unidentified launches reported once, then counted at exit (3)" \
		bash -c "[ \$(grep -c 'are unknown' '$dir/stderr') = 1 ] && grep -q '^gpumux shim: 3 launches of unidentified kernels' '$dir/stderr'"
fi
if [ "$mode" = verify ]; then
	check "blind's image reported unreadable once" grep -q "cuModuleLoadData: cannot read the kernels of this image" "$dir/stderr"
	check "the driver's layouts and the images' agree (fast x2, slow x2 handles)" \
		grep -q "kernel layouts, driver against images: 4 agree, 0 differ, 1 not in any image" "$dir/stderr"
fi
echo "$(grep -c 'kind=launch' "$log") launches released; stderr:"
cat "$dir/stderr"
exit $fail
