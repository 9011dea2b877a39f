// A static graph becomes a plan, and the plan is what runs (DESIGN.md idea 5).
//
// The plan fixes the order of the nodes a run needs (graph order, which is program order,
// so in-place updates stay where the program put them), gives every value a slot, and
// lists after each step the slots whose last reader it was, so intermediate tensors are
// released as early as possible. Running it binds the symbolic dims from the inputs and
// calls each node's kernel through the op registry.
#pragma once
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "baton/shape.h"
#include "trace/builder.h"

namespace baton::runtime {

struct Plan;

struct Step {
  const graph::Node* node;
  std::vector<int> inputs, outputs;  // slots
  std::vector<int> release;          // slots no later step reads
  bool symbolic_attrs = false;       // attrs hold dims resolved in each run
  std::vector<std::shared_ptr<const Plan>> subplans;  // one per subgraph (If, Loop)
};

struct Plan {
  std::vector<Step> steps;
  std::vector<std::pair<const graph::Value*, int>> inputs;  // graph inputs the steps read
  std::vector<int> fetches;                                 // slot of each fetched value
  int num_slots = 0;
};

// The steps that compute `fetches`, plus every node in `effects` (in-place updates).
Plan make_plan(const graph::Graph& g, std::span<graph::Value* const> fetches,
               std::span<graph::Node* const> effects = {});

// Binds the symbols of an input's declared shape to the sizes of `value` (concrete: the
// callers, Session::run and compiled calls, reject undefined and symbolic values first); throws
// ShapeError naming `what` (e.g. "placeholder 'x'") on a dtype, rank or size mismatch.
void bind_input(const graph::Value& input, const Tensor& value, const std::string& what,
                sym::Bindings& bindings, SourceLoc loc);

// Runs a plan. `inputs` holds one tensor per plan.inputs entry, in that order.
std::vector<Tensor> execute(const Plan& plan, std::vector<Tensor> inputs,
                            const sym::Bindings& bindings);
// Runs a plan of a whole (sub)graph given a value for each graph input, in graph order.
std::vector<Tensor> execute_graph(const Plan& plan, std::span<const Tensor> graph_inputs,
                                  const sym::Bindings& bindings);

}  // namespace baton::runtime
