#!/usr/bin/env bash
# gpumux profile templates: two profiling runs of vector-add (1M and 2M elements) give a T2
# template whose extents follow the element-count argument; the file reads back.
set -eu
G=$1 W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
"$G" gen vector-add n=1048576 -o "$W/a.gmxw" 2>/dev/null
"$G" gen vector-add n=2097152 -o "$W/b.gmxw" 2>/dev/null
"$G" profile templates "$W/a.gmxw" "$W/b.gmxw" -o "$W/t.gmxtpl"
grep -q '^kernel 4 8,8,8,4 T2 vector_add' "$W/t.gmxtpl" || { echo "FAIL: no T2 template"; cat "$W/t.gmxtpl"; exit 1; }
[ "$(grep -c '^term a[0-2] length=4/1\*a3$' "$W/t.gmxtpl")" -eq 3 ] ||
    { echo "FAIL: extents are not 4 x a3"; cat "$W/t.gmxtpl"; exit 1; }
"$G" profile show "$W/t.gmxtpl" | grep -q "T2 *4 args, 3 terms" || { echo "FAIL: show"; exit 1; }
echo "ok: $(head -2 "$W/t.gmxtpl" | tail -1)"
