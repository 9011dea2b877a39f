#!/usr/bin/env bash
# Runs baton-bench and PyTorch's peer (shared/bench/peer.sh) on the same workloads, one
# after the other in the same session, and prints a Markdown table with the ratios.
# Usage: bench/compare.sh [--mode eager|graph|compiled] [name ...]
#   (default: eager, and the workloads both sides know). With --mode graph or compiled,
#   baton's model workloads run in that mode (name_graph, name_compiled) and are set
#   against PyTorch's eager figure for the same name.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
bench=${BATON_BENCH:-$root/build/bin/baton-bench}
peer=${PEER:-$root/../shared/bench/peer.sh}
mode=eager
if [ "${1:-}" = --mode ]; then
  mode=${2:?--mode needs a value}
  shift 2
fi
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(eager_add16_us mlp_infer_bs64_ms)

ours=$("$bench" --mode "$mode" "${names[@]}")
theirs=$("$peer" "${names[@]}" 2>/dev/null || true)
echo "| workload | baton | PyTorch (peer.sh) | ratio |"
echo "| --- | --- | --- | --- |"
for n in "${names[@]}"; do
  # A model workload's line carries the mode's suffix; the others' do not.
  a=$(awk -v n="$n" -v m="${n}_$mode" '$1 == n || $1 == m { print $2 }' <<<"$ours")
  b=$(awk -v n="$n" '$1 == n { print $2 }' <<<"$theirs")
  r=$(awk -v a="$a" -v b="$b" 'BEGIN { if (a != "" && b != "" && b > 0) printf "%.2f", a / b; else print "-" }')
  echo "| $n | ${a:--} | ${b:--} | $r |"
done
