#!/usr/bin/env bash
# msched predicts each kernel's own pages: ranges of consecutive kernels that happen to be
# adjacent in memory (the matmul generator's independent products, buffer after buffer) stay
# apart, so every kernel's pages are loaded before it starts and nothing faults. Merged, the
# first kernel's prediction swallowed every later kernel's and those faulted in on demand.
set -u
G=$1 W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
command -v jq >/dev/null || { echo "SKIPPED: jq not installed"; exit 77; }
printf '[scenario]\ndevice = rtx5080\ncapacity_gb = 0.125\nduration_s = 0.5\n[task mm]\nworkload = matmul\nn = 1024\nfootprint = 256M\n' >"$W/mm.ini"
for m in msched gpumux; do
	f=$("$G" sim "$W/mm.ini" --mem $m --json | jq '.memory.faults') || { echo "FAIL: --mem $m did not run"; exit 1; }
	[ "$f" = 0 ] || { echo "FAIL: --mem $m: $f fault batches (every page was predicted)"; exit 1; }
done
echo "ok: no kernel faults under msched or gpumux"
