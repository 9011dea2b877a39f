#!/usr/bin/env bash
# Usage: modes_agree.sh BATON [train options]. Trains once per --mode with the same options
# (and so the same seed) and fails unless the test accuracies agree to within 0.005.
set -euo pipefail
baton=$1
shift
accuracy() { "$baton" train "$@" | awk '$1 == "test_accuracy" { print $2 }'; }
eager=$(accuracy "$@" --mode eager)
status=0
for mode in graph compiled; do
  got=$(accuracy "$@" --mode "$mode")
  echo "eager $eager, $mode $got"
  awk -v a="$eager" -v b="$got" 'BEGIN { d = a - b; exit !(b != "" && d <= 0.005 && d >= -0.005) }' || status=1
done
exit $status
