// The pass manager: the named list of passes and the rounds that run them to a fixpoint.
#include <memory>
#include <unordered_map>

#include "passes/cleanup.h"
#include "passes/fusion.h"
#include "passes/report.h"

namespace baton::passes {
namespace {

// Rounds stop when one changes nothing; this bound only guards against two rewrites that
// would undo each other forever.
constexpr int kMaxRounds = 10;

using Folded = std::unordered_map<const graph::Value*, Tensor>;

// The caller's context, except that constants added while optimizing count as fixed for
// the later passes and rounds (folding a chain, simplifying x * folded-one), whether or
// not the caller's fixed_value knows them.
Context remembering_constants(const Context& ctx, const std::shared_ptr<Folded>& folded) {
  Context own = ctx;
  auto outer_fixed = ctx.inputs.fixed_value;
  own.inputs.fixed_value = [folded, outer_fixed](const graph::Value* v) -> const Tensor* {
    if (auto it = folded->find(v); it != folded->end()) return &it->second;
    return outer_fixed ? outer_fixed(v) : nullptr;
  };
  if (auto outer_add = ctx.inputs.add_constant) {
    own.inputs.add_constant = [folded, outer_add](Tensor value, const std::string& hint) {
      graph::Value* v = outer_add(value, hint);
      folded->insert_or_assign(v, std::move(value));
      return v;
    };
  }
  return own;
}

// Runs one pass; a baton::Error becomes a GraphError naming the pass (and the node).
bool run_pass(const Pass& pass, graph::Graph& g, Context& ctx, Effect& effect) {
  try {
    return pass.run(g, ctx, effect);
  } catch (const NodeFailure& e) {
    throw GraphError(str("optimizer pass '", pass.name, "' failed on node ", e.node(), " of graph @",
                         g.name(), ": ", e.cause()));
  } catch (const Error& e) {
    throw GraphError(str("optimizer pass '", pass.name, "' failed on graph @", g.name(), ": ", e.what()));
  }
}

}  // namespace

const char* to_string(Level level) {
  switch (level) {
    case Level::O0: return "O0";
    case Level::O1: return "O1";
    case Level::O2: return "O2";
  }
  return "?";
}

const std::vector<Pass>& all_passes() {
  // Dead code goes first so that no later pass works on (or folds) what nothing needs.
  static const std::vector<Pass> passes = {
      {"dce", Level::O1, eliminate_dead_code},
      {"simplify", Level::O1, simplify_algebra},
      {"cse", Level::O1, eliminate_common_subexpressions},
      {"constant_fold", Level::O1, fold_constants},
      // Batch norm folds into the plain convolution before that gains an epilogue.
      {"fold_batch_norm", Level::O2, fold_batch_norm},
      // Before the element-wise and reduction fusions take the pattern's pieces apart.
      {"fuse_layer_norm", Level::O2, fuse_layer_norm},
      {"fuse_epilogue", Level::O2, fuse_conv_epilogue},
      // After the relu went into the convolution (fuse_epilogue).
      {"fuse_conv_pool", Level::O2, fuse_conv_pool},
      // After the relu's mask went into the pooling's gradient (fuse_epilogue).
      {"fuse_pool_gradient", Level::O2, fuse_pool_gradient},
      // After the convolution epilogues, so that a relu or residual add after a conv goes
      // into its oneDNN kernel rather than into an element-wise group.
      {"fuse_elementwise", Level::O2, fuse_elementwise},
      // After the element-wise groups are whole: a group that only a sum reads joins it.
      {"fuse_sum", Level::O2, fuse_sum},
      {"stream_updates", Level::O2, stream_updates},
  };
  return passes;
}

std::vector<Effect> optimize(graph::Graph& g, Level level, Context& ctx) {
  std::vector<Effect> log;
  if (level == Level::O0) return log;
  Context own = remembering_constants(ctx, std::make_shared<Folded>());
  for (int round = 0; round < kMaxRounds; ++round) {
    bool changed = false;
    for (const Pass& pass : all_passes()) {
      if (pass.level > level) continue;
      Effect effect{pass.name, g.num_nodes(), g.num_nodes(), {}};
      if (!run_pass(pass, g, own, effect)) continue;
      effect.nodes_after = g.num_nodes();
      log.push_back(std::move(effect));
      changed = true;
    }
    if (!changed) break;
  }
  return log;
}

}  // namespace baton::passes
