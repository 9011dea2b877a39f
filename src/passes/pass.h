// Graph optimization passes (DESIGN.md idea 5): a named list of passes that a pass manager
// runs over a graph the plan owns (a clone, never the user's graph) until none changes it.
//
//   passes::Context ctx{.inputs = ...};
//   std::vector<passes::Effect> log = passes::optimize(g, passes::Level::O2, ctx);
//
// The graph's outputs are what the plan fetches; nodes whose op mutates an input (assign,
// optimizer updates) are effects and are never removed, merged or moved past each other.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "graph/ir.h"

namespace baton::passes {

// O0: no pass. O1: cleanup (dead code, common subexpressions, constant folding,
// algebraic simplification). O2: all (adds fusion and layout passes).
enum class Level { O0, O1, O2 };
const char* to_string(Level level);

// What passes may know about the graph's inputs (the plan answers from its bindings).
struct Inputs {
  // The value of a graph input that cannot change between runs (a constant only the graph
  // holds), which constant folding may read; nullptr for feeds, variables and parameters.
  std::function<const Tensor*(const graph::Value* input)> fixed_value;
  // Adds a graph input bound to `value` (a result computed while optimizing, e.g. a folded
  // constant) and returns it.
  std::function<graph::Value*(Tensor value, const std::string& name_hint)> add_constant;
};

// What one pass did in one round: shown by Session::explain() and compiled.explain().
struct Effect {
  std::string pass;
  size_t nodes_before = 0, nodes_after = 0;
  std::vector<std::string> details;  // "cse: %7 = mul(%x, %w) merged into %5", ...
};

struct Context {
  Inputs inputs;
  // Constant folding computes a node at plan time only when its outputs take at most
  // this many bytes (larger results are cheaper to compute than to keep).
  size_t fold_limit_bytes = size_t(1) << 20;
};

// One pass: returns true when it changed the graph, appending what it did to `effect`.
using PassFn = bool (*)(graph::Graph& g, Context& ctx, Effect& effect);
struct Pass {
  const char* name;
  Level level;  // the lowest level that runs it
  PassFn run;
};

// The passes in the order the manager runs them in each round.
const std::vector<Pass>& all_passes();

// Runs the passes of `level` in rounds until a round changes nothing (at most a bounded
// number of rounds), and returns what each pass did. A pass that throws is reported as a
// GraphError naming the pass and the node it was working on.
std::vector<Effect> optimize(graph::Graph& g, Level level, Context& ctx);

}  // namespace baton::passes
