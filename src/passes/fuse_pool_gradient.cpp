// Pooling-gradient fusion: a max_pool2d_window_backward over windows that neither overlap
// nor pad, whose result only a conv2d_backward_weight_bias reads (as its output gradient),
// becomes one conv2d_backward_weight_bias_pooled. The weight and bias gradients are then
// summed from the pooled gradient directly, and the convolution's output gradient (4x the
// pooled one's elements for 2x2 windows, three quarters of them zeros) is neither written
// nor read again. The typical case is a network's first convolution (conv, relu, max pool),
// whose input gradient nothing needs; the relu's mask (fuse_epilogue.cpp) comes along.
#include <unordered_set>

#include "passes/analysis.h"
#include "passes/fusion.h"
#include "passes/report.h"

namespace baton::passes {
namespace {

bool disjoint_windows(const graph::Node& pool_backward) {
  const std::vector<int64_t>&kernel = pool_backward.attrs.ints("kernel"), &stride = pool_backward.attrs.ints("stride");
  return pool_backward.attrs.ints("padding") == std::vector<int64_t>{0, 0} && stride[0] >= kernel[0] &&
         stride[1] >= kernel[1];
}

// The conv2d_backward_weight_bias that alone reads `pool_backward`'s gradient, when both
// fit the fused op; else nullptr.
graph::Node* weight_gradient_of(const graph::Graph& g, const VolatileValues& vol, const graph::Node& pool_backward) {
  if (pool_backward.op_name() != "max_pool2d_window_backward" || !disjoint_windows(pool_backward)) return nullptr;
  graph::Node* user = only_reader(g, vol, pool_backward);
  if (!user || user->op_name() != "conv2d_backward_weight_bias" || user->input(0) != pool_backward.output() ||
      user->attrs.i("groups") != 1)
    return nullptr;
  return user;
}

}  // namespace

bool fuse_pool_gradient(graph::Graph& g, Context&, Effect& effect) {
  const VolatileValues vol(g);
  const Describer describe(g);
  std::unordered_set<const graph::Node*> erased;
  bool changed = false;
  for (graph::Node* pool_backward : node_list(g)) {
    if (erased.count(pool_backward)) continue;
    graph::Node* weight_gradient = weight_gradient_of(g, vol, *pool_backward);
    if (!weight_gradient) continue;
    std::vector<graph::Value*> inputs{pool_backward->input(0), pool_backward->input(1), weight_gradient->input(1)};
    if (pool_backward->num_inputs() == 3) inputs.push_back(pool_backward->input(2));  // the relu's mask
    ops::Attrs attrs = weight_gradient->attrs;
    attrs.set("pool_kernel", pool_backward->attrs.ints("kernel"));
    attrs.set("pool_stride", pool_backward->attrs.ints("stride"));
    graph::Node* fused = g.add_node("conv2d_backward_weight_bias_pooled", inputs,
                                    {weight_gradient->output(0)->type, weight_gradient->output(1)->type}, attrs,
                                    weight_gradient->loc);
    fused->fused_from = fused_ops(*pool_backward) + " + " + fused_ops(*weight_gradient);
    g.move_before(fused, weight_gradient);
    effect.details.push_back(str(describe.node(*pool_backward), " fused into ", describe.node(*weight_gradient)));
    for (size_t i = 0; i < 2; ++i) g.replace_all_uses(weight_gradient->output(i), fused->output(i));
    g.erase_node(weight_gradient);
    g.erase_node(pool_backward);
    erased.insert({weight_gradient, pool_backward});
    changed = true;
  }
  return changed;
}

}  // namespace baton::passes
