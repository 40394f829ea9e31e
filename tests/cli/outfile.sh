#!/usr/bin/env bash
# -o of every writer (gen, trace import, profile templates, profile record): a symbolic link
# stays a link and its file gets the content, a FIFO stays a FIFO and its reader gets the
# content, a directory is refused with exit 1 and the reason.
set -u
G=$1 W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$G" gen vector-add n=1048576 -q -o "$W/va.gmxw" || fail "gen to a new file"
printf 'Name,Profile,Memory_footprint,SM_usage,Duration\nConv,1,0,49,26688\nBatchNorm,0,0,32,23328\n' >"$W/orion.csv"
printf '[scenario]\nduration_s = 0.05\n[task a]\nworkload = vector-add\n' >"$W/s.ini"
writer() { # writer NAME OUT: runs writer NAME with -o OUT
	case $1 in
	gen) "$G" gen vector-add -q -o "$2" ;;
	import) "$G" trace import "$W/orion.csv" --format orion -o "$2" ;;
	templates) "$G" profile templates "$W/va.gmxw" -o "$2" >/dev/null ;;
	record) "$G" profile record "$W/s.ini" -o "$2" >/dev/null ;;
	esac
}
for w in gen import templates record; do
	rm -rf "$W/t" "$W/link" "$W/fifo" "$W/fifo.out" "$W/dir"
	echo keep >"$W/t"; ln -s t "$W/link"
	writer $w "$W/link" 2>"$W/err" || fail "$w -o symlink: $(cat "$W/err")"
	[ -L "$W/link" ] || fail "$w -o replaced the symbolic link"
	[ "$(cat "$W/t")" != keep ] || fail "$w -o did not write through the link"
	mkfifo "$W/fifo"
	(timeout 20 cat "$W/fifo" >"$W/fifo.out") & reader=$!
	timeout 20 bash -c "$(declare -f writer); G='$G' W='$W'; writer $w '$W/fifo'" 2>"$W/err" ||
		fail "$w -o FIFO: $(cat "$W/err")"
	wait $reader
	[ -p "$W/fifo" ] || fail "$w -o replaced the FIFO"
	[ -s "$W/fifo.out" ] || fail "$w -o wrote nothing through the FIFO"
	mkdir "$W/dir"
	writer $w "$W/dir" 2>"$W/err"; rc=$?
	[ $rc = 1 ] || fail "$w -o directory: exit $rc, expected 1"
	grep -q "dir: is a directory" "$W/err" || fail "$w -o directory: $(cat "$W/err")"
	[ -d "$W/dir" ] || fail "$w -o removed the directory"
	ls -a "$W" | grep -q '\.tmp\.' && fail "$w left a temporary"
	echo "ok: $w"
done
