#!/usr/bin/env bash
# Runs a command twice; passes when both runs succeed with byte-identical stdout.
set -eu
a=$("$@") b=$("$@")
[ -n "$a" ] || { echo "FAIL: no output"; exit 1; }
[ "$a" = "$b" ] || { echo "FAIL: outputs differ"; exit 1; }
echo "ok: identical output from two runs"
