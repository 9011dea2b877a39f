#!/usr/bin/env bash
# baton train --export FILE writes an ONNX model that `baton info` reads: one input of
# [batch,1,28,28], one output of [batch,10]. Usage: train_export_test.sh BATON FILE
set -u
baton=$1 model=$2
fail() { echo "FAIL: $*"; exit 1; }
rm -f "$model"
"$baton" train --limit 640 --epochs 1 --model cnn --export "$model" | tail -n 2 || fail "train failed"
[[ -s $model ]] || fail "no model written"
info=$("$baton" info "$model") || fail "baton info failed"
echo "$info"
grep -q '^input input f32\[batch,1,28,28\]$' <<<"$info" || fail "unexpected input line"
grep -q '^output .* f32\[batch,10\]$' <<<"$info" || fail "unexpected output line"
grep -q '^  Conv 2$' <<<"$info" || fail "expected two Conv nodes"
