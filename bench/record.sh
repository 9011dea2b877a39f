#!/usr/bin/env bash
# One session's record for docs/PERF.md: this machine's CPU and FMA peak, what a store to
# a line the other core holds costs (bench/cross_core.cpp), the oneDNN-only chains
# (shared/bench/dnnl_limit), PyTorch (shared/bench/peer.sh) and baton-bench, one after the
# other, each printing `name value` lines (prefixed by who measured them).
# Usage: bench/record.sh [rounds]   (default 1; rounds interleave the three)
set -euo pipefail
rounds=${1:-1}
source "$(dirname "$0")/chains.sh"

echo "cpu $(lscpu | sed -n 's/^Model name: *//p' | tr ' ' '_')"
for r in $(seq "$rounds"); do
  echo "# round $r $(date -u +%H:%M:%S)"
  OMP_NUM_THREADS=2 "$limit/peak" | sed 's/^/limit /'
  # Whether the two cores share a cache right now (docs/PERF.md, thirteenth session).
  "$(dirname "$bench")/baton-cross-core" | sed 's/^/machine /'
  OMP_NUM_THREADS=2 "$limit/resnet18" direct 3 any | sed 's/^/limit /'
  OMP_NUM_THREADS=2 "$limit/cnn_train" 3 | grep -A1 '^cnn' | paste -sd' ' | sed 's/^/limit /'
  "$shared/peer.sh" cnn_train_step_ms mlp_train_step_ms resnet18_bs1_frozen_ms resnet18_bs8_frozen_ms \
    resnet18_bs1_eager_ms eager_add16_us | sort | sed 's/^/pytorch /'
  "$bench" --mode all cnn_train_step_ms mlp_train_step_ms resnet18_bs1_ms resnet18_bs8_ms \
    resnet18_bs8_arena_mb resnet18_bs8_naive_mb resnet18_bs8_lower_bound_mb resnet18_bs8_plan_constants_mb \
    cnn_train_step_peak_mb resnet18_bs8_peak_mb cnn_train_step_activation_peak_mb \
    resnet18_bs8_activation_peak_mb plan_step_overhead_us parallel_branches_speedup eager_add16_us \
    elementwise_chain_ms mlp_train_step_compiled_over_eager mlp_train_step_compiled_over_eager_steady | sed 's/^/baton /'
done
