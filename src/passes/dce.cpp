// Dead-code elimination: a node none of whose outputs reaches a graph output is removed,
// unless it has effects (an in-place write runs whether or not anything reads it); what
// an effect reads is kept with it.
#include <unordered_set>

#include "passes/analysis.h"
#include "passes/cleanup.h"
#include "passes/report.h"

namespace baton::passes {
namespace {

// The nodes to remove, last first: walking backwards, a node is live when it has effects
// or a live node (or a graph output) reads one of its outputs.
std::vector<graph::Node*> dead_nodes_last_first(const graph::Graph& g) {
  std::unordered_set<const graph::Value*> needed(g.outputs().begin(), g.outputs().end());
  std::vector<graph::Node*> dead;
  for (auto it = g.nodes().rbegin(); it != g.nodes().rend(); ++it) {
    graph::Node* n = it->get();
    bool live = has_effects(*n);
    for (const graph::Value* out : n->outputs()) live = live || needed.count(out) > 0;
    if (!live) {
      dead.push_back(n);
      continue;
    }
    for (const graph::Value* in : n->inputs()) needed.insert(in);
  }
  return dead;
}

}  // namespace

bool eliminate_dead_code(graph::Graph& g, Context&, Effect& effect) {
  std::vector<graph::Node*> dead = dead_nodes_last_first(g);
  const Describer describe(g);
  for (auto it = dead.rbegin(); it != dead.rend(); ++it)  // details in graph order
    effect.details.push_back(str("removed ", describe.node(**it)));
  // Last first: a dead node's readers are dead too and come later, so they go before it.
  for (graph::Node* n : dead) on_node(*n, [&] { g.erase_node(n); });
  return !dead.empty();
}

}  // namespace baton::passes
