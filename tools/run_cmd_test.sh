#!/usr/bin/env bash
# `baton run` end to end on the ONNX node tests (Debian libonnx-testdata).
#
#   run_cmd_test.sh mismatch BATON MODEL DIR
#     MODEL on DIR's test data (another test's): exit status 1, `mismatch` as the last line
#     on standard output, one line on standard error naming the output that differs.
#   run_cmd_test.sh roundtrip BATON MODEL DIR OUT
#     MODEL (an idempotent op: Abs, Relu) on DIR's test data writes OUT/first/NAME.npy; fed
#     back with --input, the model must write the same bytes to OUT/second/NAME.npy.
set -uo pipefail
fail() {
  echo "FAIL: $*"
  exit 1
}

mismatch() {
  local baton=$1 model=$2 dir=$3 rc
  out=$(mktemp) err=$(mktemp)  # global: the EXIT trap removes them
  trap 'rm -f "$out" "$err"' EXIT
  timeout 120 "$baton" run "$model" --test-data "$dir" >"$out" 2>"$err"
  rc=$?
  cat "$out" "$err"
  [[ $rc == 1 ]] || fail "exit status $rc, expected 1"
  [[ $(tail -n 1 "$out") == mismatch ]] || fail "the last line is not 'mismatch'"
  grep -q '^max_abs_err [0-9]' "$out" || fail "no max_abs_err line"
  [[ $(wc -l <"$err") == 1 ]] || fail "expected exactly one line on standard error"
  grep -q '^baton run: .*output y .* elements differ' "$err" || fail "standard error does not say which output differs"
}

roundtrip() {
  local baton=$1 model=$2 dir=$3 out=$4 name
  rm -rf "$out"
  mkdir -p "$out/first" "$out/second" || fail "cannot make $out"
  "$baton" run "$model" --test-data "$dir" --output-dir "$out/first" || fail "baton run --test-data failed"
  local outputs=("$out"/first/*.npy)
  [[ ${#outputs[@]} == 1 && -f ${outputs[0]} ]] || fail "expected one .npy in $out/first"
  name=$("$baton" info "$model" | awk '$1 == "input" { print $2; exit }')
  [[ -n $name ]] || fail "baton info names no input"
  "$baton" run "$model" --input "$name=${outputs[0]}" --output-dir "$out/second" || fail "baton run --input failed"
  cmp "${outputs[0]}" "$out/second/$(basename "${outputs[0]}")" || fail "the round trip changed the output"
  echo "round trip ok: $(basename "${outputs[0]}")"
}

case ${1:-} in
  mismatch) shift; mismatch "$@" ;;
  roundtrip) shift; roundtrip "$@" ;;
  *) fail "usage: $0 mismatch|roundtrip BATON MODEL DIR [OUT]" ;;
esac
