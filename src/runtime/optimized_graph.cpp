// Graph::optimized(): the graph a plan runs, as a Graph of its own (for viewing it).
#include "baton/graph.h"
#include "runtime/plan.h"

namespace baton {

Graph Graph::optimized(OptLevel level, bool freeze) const {
  const trace::Builder& b = *b_;
  runtime::Plan plan = runtime::make_plan(b.ir(), b.ir().outputs(), b.effects(),
                                          {.level = runtime::to_pass_level(level),
                                           .fixed_value = runtime::fixed_constants(b, freeze)});
  return GraphAccess::wrap(std::make_shared<trace::Builder>(plan.graph->clone()));
}

}  // namespace baton
