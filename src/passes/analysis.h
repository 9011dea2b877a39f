// Facts about nodes and values that several passes need before they may remove, merge,
// fold or forward anything (docs/passes.md): which nodes have effects, which are random,
// which values an effect may change while the graph runs, and which storage a value uses.
#pragma once
#include <optional>
#include <unordered_set>
#include <vector>

#include "graph/ir.h"
#include "passes/pass.h"

namespace baton::passes {

// A node that must run even when nothing reads its results: its op writes an input in
// place (assign, optimizer updates), it is control flow whose subgraphs hold such a node,
// or its op is not in the registry (nothing is known about it).
bool has_effects(const graph::Node& n);

// A node whose results come from the random generator, so each run draws new ones: it is
// never merged or folded. OpDef has no flag that says so; the ops are listed by name in
// analysis.cpp (kRandomOps), the one place to extend when a random op is added.
bool is_random(const graph::Node& n);

using graph::is_view;  // graph/ir.h
using graph::storage_root;

// True when some graph output uses the storage of `v` (is `v` or a view of its root).
bool is_fetched_storage(const graph::Graph& g, const graph::Value* v);

// Values an effect may change while the graph runs: the storage every effect writes in
// place and every view of it. A node reading one of them may see different contents
// depending on where it runs relative to the effect.
class VolatileValues {
 public:
  explicit VolatileValues(const graph::Graph& g);
  bool contains(const graph::Value* v) const;
  // Any input or output of `n` is volatile.
  bool touches(const graph::Node& n) const;

 private:
  std::unordered_set<const graph::Value*> written_roots_;
};

// Whether every reader of `from` (graph outputs included) may read `to` instead without
// changing what a run computes or hands back: contents that an effect may change are
// never forwarded (a copy taken before an assign must stay a copy), and a fetched result
// never starts sharing storage with a graph input or another fetched result (the caller
// may write into what it gets back).
bool can_forward(const graph::Graph& g, const VolatileValues& vol, const graph::Value* from,
                 const graph::Value* to);

// The value of graph input `v` when it cannot change between runs and no effect writes
// it; nullptr otherwise (node outputs, feeds, variables, or no fixed_value callback).
const Tensor* fixed_value(const Context& ctx, const VolatileValues& vol, const graph::Value* v);

// Whether nothing but the graph's own nodes can see v: not fetched, not written by an
// effect (a pattern's intermediate a pass may remove).
bool private_value(const graph::Graph& g, const VolatileValues& vol, const graph::Value* v);

// The value of a fixed one-element floating operand, as a double; nullopt otherwise or for NaN.
std::optional<double> fixed_scalar(const Context& ctx, const VolatileValues& vol, const graph::Value* v);

// The operand of a binary node beside `v`, or nullptr when v is not exactly one of them.
graph::Value* other_operand(const graph::Node& n, const graph::Value* v);

// The graph's nodes in order, as a list a pass may keep while it erases some of them.
std::vector<graph::Node*> node_list(const graph::Graph& g);

// Bytes `v` takes, or nullopt when its shape is symbolic (or the size overflows).
std::optional<size_t> static_bytes(const graph::Value& v);
// Bytes the outputs of `n` take, or nullopt when a shape is symbolic (or overflows).
std::optional<size_t> static_output_bytes(const graph::Node& n);

}  // namespace baton::passes
