// Pooling-gradient fusion: a max_pool2d_window_backward over windows that neither overlap
// nor pad, whose result (a convolution's output gradient, 4x the pooled one's elements for
// 2x2 windows, three quarters of them zeros) only that convolution's gradient steps read,
// becomes one step that takes the pooled gradient directly:
// - read by a conv2d_backward_weight_bias alone (a network's first convolution, whose
//   input gradient nothing needs): conv2d_backward_weight_bias_pooled, which sums the
//   weight and bias gradients from the pooled gradient and never makes the output gradient;
// - read by a conv2d_backward_input and a conv2d_backward_weight_bias of one convolution:
//   conv2d_backward_pooled, all three gradients, whose Winograd pass makes each output
//   tile's gradient from the pooled one as it loads it (kernels/cpu/conv_backward_pooled.h).
// The relu's mask (fuse_epilogue.cpp) comes along.
#include <unordered_set>

#include "kernels/cpu/conv_pool.h"
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

// A convolution's two gradient steps that alone read `pool_backward`'s gradient, both as
// their output gradient, when they fit conv2d_backward_pooled; else nulls.
struct GradientSteps {
  graph::Node *input = nullptr, *weight = nullptr;
};

GradientSteps gradient_steps_of(const graph::Graph& g, const VolatileValues& vol, const graph::Node& pool_backward) {
  if (pool_backward.op_name() != "max_pool2d_window_backward" || !disjoint_windows(pool_backward)) return {};
  const graph::Value* dy = pool_backward.output();
  if (dy->uses().size() != 2 || g.is_output(dy) || vol.contains(dy)) return {};
  GradientSteps steps;
  for (const auto& use : dy->uses()) {
    graph::Node* user = use.user;
    if (user->input(0) != dy || user->num_inputs() != 2) return {};
    if (user->op_name() == "conv2d_backward_input") steps.input = user;
    else if (user->op_name() == "conv2d_backward_weight_bias") steps.weight = user;
  }
  if (!steps.input || !steps.weight || steps.weight->attrs.i("groups") != 1) return {};
  for (const char* name : {"stride", "padding", "dilation"})
    if (steps.input->attrs.ints(name) != steps.weight->attrs.ints(name)) return {};
  // One convolution: the input gradient's weights and input shape are the weight gradient's.
  const bool one_convolution = steps.input->attrs.i("groups") == 1 &&
                               steps.input->input(1)->type.shape == Shape(steps.weight->attrs.ints("weight_shape")) &&
                               Shape(steps.input->attrs.ints("input_shape")) == steps.weight->input(1)->type.shape;
  return one_convolution ? steps : GradientSteps{};
}

// The attributes of a fused step: the convolution's and the pooling's windows.
ops::Attrs with_pool_windows(ops::Attrs conv, const graph::Node& pool_backward) {
  conv.set("pool_kernel", pool_backward.attrs.ints("kernel"));
  conv.set("pool_stride", pool_backward.attrs.ints("stride"));
  return conv;
}

// Whichever of a and b comes first in g's order, if every value of `inputs` is made before
// it (a graph input or a node's result); else nullptr.
graph::Node* first_reading(const graph::Graph& g, graph::Node* a, graph::Node* b,
                           const std::vector<graph::Value*>& inputs) {
  std::unordered_set<const graph::Node*> made;
  for (graph::Node* n : node_list(g)) {
    if (n == a || n == b) {
      for (const graph::Value* v : inputs)
        if (v->producer() && !made.count(v->producer())) return nullptr;
      return n;
    }
    made.insert(n);
  }
  return nullptr;
}

// conv2d_backward_pooled for pool_backward and the two steps; false where they do not fit.
bool fuse_both_gradients(graph::Graph& g, const VolatileValues& vol, const Describer& describe,
                         graph::Node* pool_backward, std::unordered_set<const graph::Node*>& erased, Effect& effect) {
  const GradientSteps steps = gradient_steps_of(g, vol, *pool_backward);
  if (!steps.input) return false;
  std::vector<graph::Value*> inputs{pool_backward->input(0), pool_backward->input(1), steps.input->input(1),
                                    steps.weight->input(1)};
  if (pool_backward->num_inputs() == 3) inputs.push_back(pool_backward->input(2));  // the relu's mask
  // The fused step takes the place of the first of the two, so its operands must exist there.
  graph::Node* position = first_reading(g, steps.input, steps.weight, inputs);
  if (!position) return false;
  ops::Attrs attrs;
  for (const char* name : {"stride", "padding", "dilation", "groups"})
    for (auto& [n, v] : steps.weight->attrs.items())
      if (n == name) attrs.set(n, v);
  graph::Node* fused = g.add_node(
      "conv2d_backward_pooled", inputs,
      {steps.input->output()->type, steps.weight->output(0)->type, steps.weight->output(1)->type},
      with_pool_windows(attrs, *pool_backward), steps.weight->loc);
  fused->fused_from = fused_ops(*pool_backward) + " + " + fused_ops(*steps.input) + " + " + fused_ops(*steps.weight);
  g.move_before(fused, position);
  effect.details.push_back(str(describe.node(*pool_backward), " fused into ", describe.node(*steps.input), " and ",
                               describe.node(*steps.weight)));
  g.replace_all_uses(steps.input->output(), fused->output(0));
  for (size_t i = 0; i < 2; ++i) g.replace_all_uses(steps.weight->output(i), fused->output(i + 1));
  for (graph::Node* n : {steps.input, steps.weight, pool_backward}) {
    g.erase_node(n);
    erased.insert(n);
  }
  return true;
}

// Whether the weight gradient fused from `pool_backward` may read window codes: its window
// offsets and maxima are a conv2d_max_pool2d's (a first layer, fuse_conv_pool.cpp) and
// nothing else reads the offsets. That step then writes one byte per window (pool.h's
// window codes: the position and the maximum's sign), which the gradient reads in place
// of both: 4 + 4 bytes a window read back become 1. Only for the convolutions the step's
// own kernel runs (few input channels), which writes codes.
bool window_codes_fit(const graph::Graph& g, const VolatileValues& vol, const graph::Node& pool_backward) {
  if (pool_backward.num_inputs() != 3) return false;
  const graph::Value *offsets = pool_backward.input(1), *maxima = pool_backward.input(2);
  const graph::Node* step = offsets->producer();
  if (!step || step->op_name() != "conv2d_max_pool2d" || step->output(1) != offsets || step->output(0) != maxima ||
      offsets->uses().size() != 1 || g.is_output(offsets) || vol.contains(offsets))
    return false;
  const Shape w = step->input(1)->type.shape.raw();
  return w.size() == 4 && w[1] >= 1 && w[1] <= kernels::kConvPoolDirectChannels;
}

// The step that makes `offsets` writes window codes there instead.
void write_window_codes(graph::Value* offsets) {
  offsets->producer()->attrs.set("window_codes", int64_t(1));
  offsets->type.dtype = DType::u8;
}

}  // namespace

bool fuse_pool_gradient(graph::Graph& g, Context&, Effect& effect) {
  const VolatileValues vol(g);
  const Describer describe(g);
  std::unordered_set<const graph::Node*> erased;
  bool changed = false;
  for (graph::Node* pool_backward : node_list(g)) {
    if (erased.count(pool_backward)) continue;
    if (fuse_both_gradients(g, vol, describe, pool_backward, erased, effect)) {
      changed = true;
      continue;
    }
    graph::Node* weight_gradient = weight_gradient_of(g, vol, *pool_backward);
    if (!weight_gradient) continue;
    std::vector<graph::Value*> inputs{pool_backward->input(0), pool_backward->input(1), weight_gradient->input(1)};
    const bool codes = window_codes_fit(g, vol, *pool_backward);
    if (codes) write_window_codes(pool_backward->input(1));
    else if (pool_backward->num_inputs() == 3) inputs.push_back(pool_backward->input(2));  // the relu's mask
    graph::Node* fused = g.add_node("conv2d_backward_weight_bias_pooled", inputs,
                                    {weight_gradient->output(0)->type, weight_gradient->output(1)->type},
                                    with_pool_windows(weight_gradient->attrs, *pool_backward), weight_gradient->loc);
    fused->fused_from = fused_ops(*pool_backward) + " + " + fused_ops(*weight_gradient);
    g.move_before(fused, weight_gradient);
    effect.details.push_back(str(describe.node(*pool_backward), " fused into ", describe.node(*weight_gradient),
                                 codes ? ", the pooling's windows as one-byte codes" : ""));
    for (size_t i = 0; i < 2; ++i) g.replace_all_uses(weight_gradient->output(i), fused->output(i));
    g.erase_node(weight_gradient);
    g.erase_node(pool_backward);
    erased.insert({weight_gradient, pool_backward});
    changed = true;
  }
  return changed;
}

}  // namespace baton::passes
