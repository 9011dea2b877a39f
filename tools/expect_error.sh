#!/usr/bin/env bash
# Usage: expect_error.sh STATUS TEXT COMMAND [ARGS...]. Passes when COMMAND exits with
# STATUS having printed nothing on standard output (so no training started) and exactly
# one line on standard error that contains TEXT.
set -uo pipefail
status=$1 text=$2
shift 2
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
timeout 120 "$@" >"$out" 2>"$err"
rc=$?
fail() {
  echo "FAIL: $*"
  echo "--- stdout:"; cat "$out"
  echo "--- stderr:"; cat "$err"
  exit 1
}
[[ $rc == "$status" ]] || fail "exit status $rc, expected $status"
[[ ! -s $out ]] || fail "something was printed on standard output"
[[ $(wc -l <"$err") == 1 ]] || fail "expected exactly one line on standard error"
grep -Fq -- "$text" "$err" || fail "standard error lacks: $text"
echo "ok: $(cat "$err")"
