#!/usr/bin/env bash
# baton optimize MODEL -o OUT --report: writes OUT with conv + ReLU as one ai.baton step,
# reports the passes and the memory plan, and OUT loads and runs (baton info, baton graph).
# Usage: optimize_test.sh BATON OUT MODEL
set -u
baton=$1 out=$2 model=$3
fail() { echo "FAIL: $*"; exit 1; }
rm -f "$out"
report=$("$baton" optimize "$model" -o "$out" --report) || fail "baton optimize failed"
echo "$report"
grep -q "fuse_epilogue" <<<"$report" || fail "the report does not show the epilogue fusion"
grep -q "^memory: arena" <<<"$report" || fail "no memory plan line"
graph=$("$baton" graph "$out") || fail "baton graph on the optimized model failed"
echo "$graph"
grep -q "conv2d_fused(" <<<"$graph" || fail "the optimized model holds no conv2d_fused step"
