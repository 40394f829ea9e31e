#!/usr/bin/env bash
# Runs a command that must fail: non-zero exit, nothing on stdout, exactly one
# line on stderr containing the expected text.
# usage: expect_error.sh EXPECTED_EXIT EXPECTED_TEXT -- COMMAND...
set -u
want_rc=$1 want_text=$2
shift 3
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
"$@" >"$out" 2>"$err"
rc=$?
fail() { echo "FAIL: $*"; echo "--- stdout"; cat "$out"; echo "--- stderr"; cat "$err"; exit 1; }
[ "$rc" = "$want_rc" ] || fail "exit $rc, expected $want_rc: $*"
[ ! -s "$out" ] || fail "stdout not empty"
[ "$(wc -l <"$err")" = 1 ] || fail "expected one line on stderr"
grep -qF -- "$want_text" "$err" || fail "stderr lacks '$want_text'"
echo "ok: $*"
