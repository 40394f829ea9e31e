#!/usr/bin/env bash
# Each row a benchmark prints reaches a pipe at once: the rows of quick runs are read from the
# pipe while a long run after them is still going.
set -u
G=$1 S=$2 W=$(mktemp -d)
trap 'kill $BPID 2>/dev/null; rm -rf "$W"' EXIT
mkdir "$W/msched"
for s in a-150 b-150 c-150 d-150; do
	printf '[scenario]\nduration_s = 0.01\nmem_slice_ms = 1\n[task a]\nworkload = vector-add\nfootprint = 12M\n' >"$W/msched/$s.ini"
done
# The micro runs are long (the demo's decoders for 10 simulated minutes).
sed 's/^warmup_s = .*/warmup_s = 0/; s/^duration_s = .*/duration_s = 600/' "$S/scenarios/demo.ini" |
	sed "s|graph = ../../shared|graph = $S/../shared|" >"$W/msched/micro-100.ini"
mkfifo "$W/pipe"
"$G" bench msched --quick --scenarios "$W" >"$W/pipe" 2>/dev/null & BPID=$!
exec 3<"$W/pipe"
for i in 1 2 3 4 5; do
	IFS= read -r -t 60 line <&3 || { echo "FAIL: row $i did not reach the pipe within 60 s"; exit 1; }
	echo "$line"
done
kill -0 $BPID 2>/dev/null || { echo "FAIL: the benchmark ended before its rows were read (the test proves nothing)"; exit 1; }
echo "ok: the rows reached the pipe while the benchmark was still running"
