#!/usr/bin/env bash
# The issue-9 goals set against the oneDNN-only chains (shared/bench/dnnl_limit) in pairs:
# each round runs the chain and then baton's compiled workload right after it, so that both
# figures of a pair come from one window of a machine whose speed drifts (by up to 2x within
# a minute on the shared 2-core VMs measured). Prints each pair and then, per workload, the
# median of the pairs' ratios as `name value` lines.
# With BASELINE_BENCH (another build's baton-bench, e.g. of the commit before a change),
# each round runs that build's workload right after this one's, as pairs named
# `<name>_baseline`, so that a change is measured against its baseline in the same window.
# Usage: [BASELINE_BENCH=path] bench/paired.sh [rounds]   (default 5)
set -euo pipefail
rounds=${1:-5}
source "$(dirname "$0")/chains.sh"
export OMP_NUM_THREADS=2

# `name chain_ms baton_ms` per pair (and the baseline's pair).
compiled_ms() { "$1" --mode compiled "$2" | awk -v n="${2}_compiled" '$1 == n { print $2 }'; }
pair() {
  local name=$1 chain=$2
  echo "pair $name $chain $(compiled_ms "$bench" "$name")"
  if [ -n "${BASELINE_BENCH:-}" ]; then echo "pair ${name}_baseline $chain $(compiled_ms "$BASELINE_BENCH" "$name")"; fi
}

pairs=$(
  for r in $(seq "$rounds"); do
    echo "# round $r $(date -u +%H:%M:%S)" >&2
    cnn=$("$limit/cnn_train" 2 | sed -n 's/^cnn train step bs64: \([0-9.]*\) ms.*/\1/p')
    pair cnn_train_step_ms "$cnn"
    rn=$("$limit/resnet18" direct 2 any)
    pair resnet18_bs1_ms "$(sed -n 's/^resnet18 bs1 direct any: \([0-9.]*\) ms.*/\1/p' <<<"$rn")"
    pair resnet18_bs8_ms "$(sed -n 's/^resnet18 bs8 direct any: \([0-9.]*\) ms.*/\1/p' <<<"$rn")"
  done
)
echo "$pairs"
# Per workload: the median of baton / chain over the pairs.
awk '{ print $2, $4 / $3 }' <<<"$pairs" | sort -k1,1 -k2,2g |
  awk '{ r[$1] = r[$1] " " $2; n[$1]++ }
       END { for (k in r) { split(substr(r[k], 2), v, " "); m = int((n[k] + 1) / 2);
             printf "%s_compiled_over_chain_median %.3f\n", k, v[m] } }' | sort
