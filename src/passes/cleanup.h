// The O1 cleanup passes (docs/passes.md), one file each. Each returns true when it changed
// the graph and appends one line per rewrite to effect.details.
#pragma once
#include "passes/pass.h"

namespace baton::passes {

bool eliminate_dead_code(graph::Graph& g, Context& ctx, Effect& effect);              // dce.cpp
bool simplify_algebra(graph::Graph& g, Context& ctx, Effect& effect);                 // simplify.cpp
bool eliminate_common_subexpressions(graph::Graph& g, Context& ctx, Effect& effect);  // cse.cpp
bool fold_constants(graph::Graph& g, Context& ctx, Effect& effect);                   // constant_fold.cpp

}  // namespace baton::passes
