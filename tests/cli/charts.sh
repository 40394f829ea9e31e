#!/usr/bin/env bash
# gpumux sim --timeline: recording the timeline changes no figure of the run; the chart is
# written as SVG and PNG (a PNG of the layout's width, an SVG with the bars); a name that is
# neither is refused before the run. Usage: charts.sh GPUMUX SCENARIO OUT_DIR
set -u
G=$1 SC=$2 D=$3
rm -rf "$D" && mkdir -p "$D"
fail() { echo "FAIL: $*"; exit 1; }
args=(sim "$SC" --mem msched --warmup 0.5 --duration 1 --json)
"$G" "${args[@]}" >"$D/plain.json" || fail "the run failed"
"$G" "${args[@]}" --timeline "$D/t.svg" --timeline-ms 400 >"$D/svg.json" 2>"$D/svg.err" || fail "--timeline t.svg: $(cat "$D/svg.err")"
"$G" "${args[@]}" --timeline "$D/t.png" --timeline-from 200 --timeline-ms 800 >"$D/png.json" 2>"$D/png.err" ||
    fail "--timeline t.png: $(cat "$D/png.err")"
cmp -s "$D/plain.json" "$D/svg.json" && cmp -s "$D/plain.json" "$D/png.json" || fail "recording the timeline changed the run's figures"
echo "ok: the figures are byte-identical with and without --timeline"
[ "$(head -c 4 "$D/t.png" | od -An -c | tr -d ' ')" = '211PNG' ] || fail "t.png is not a PNG"
w=$(od -An -tu1 -j16 -N4 "$D/t.png" | awk '{ print $1 * 16777216 + $2 * 65536 + $3 * 256 + $4 }')
[ "$w" = 1400 ] || fail "t.png is $w pixels wide, expected 1400"
grep -q '<svg' "$D/t.svg" || fail "t.svg is not SVG"
bars=$(grep -c '<path' "$D/t.svg")
[ "$bars" -ge 50 ] || fail "t.svg has only $bars paths: no bars drawn?"
echo "ok: t.png (1400 px wide, $(wc -c <"$D/t.png") bytes), t.svg ($bars paths)"
"$G" "${args[@]}" --timeline "$D/t.pdf" >/dev/null 2>"$D/pdf.err" && fail "--timeline t.pdf accepted"
grep -q "expected a file name ending in .svg or .png" "$D/pdf.err" || fail "no reason for t.pdf: $(cat "$D/pdf.err")"
[ ! -e "$D/t.pdf" ] || fail "t.pdf written"
echo "ok: --timeline t.pdf refused: $(cat "$D/pdf.err")"
