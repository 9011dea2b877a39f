// Epilogue fusion: conv2d followed by a residual add and/or an activation (relu, sigmoid,
// tanh, gelu, gelu_tanh, silu, softplus, leaky_relu, elu, clamp: ops/epilogue.h) becomes one conv2d_fused
// node, whose kernel applies them as oneDNN post-ops while the convolution's result is
// still in cache: act(conv(x, w) + bias + residual); linear followed by the same (a
// residual add, an activation) becomes linear_fused, whose kernel applies them over the
// stored product; and matmul(x, w) + bias (w a matrix, bias a row) becomes linear(x, w^T,
// bias) (the bias added by the product's primitive; a relu after it then fuses too:
// ONNX's MatMul + Add + Relu). An activation's backward may read its result, never the
// step's (then the step has two readers and stays). In backward
// graphs, relu_backward of a max_pool2d_window_backward result becomes that op's mask (the
// pooling's maxima: its scatter skips the positions the relu zeroed, one pass over the
// gradient instead of two), and a weight gradient and the bias gradient summed from the
// same output gradient become one conv2d_backward_weight_bias (oneDNN sums the bias in the
// weight gradient's pass). A conv without a bias gets a zero one (when constants can be
// added). The weights of a conv whose weight is a graph input that no node of the graph
// writes are kept reordered for oneDNN between runs (cache_weights): the kernel
// re-reorders them when the tensor's version changes.
#include "passes/analysis.h"
#include "passes/fusion.h"
#include "passes/report.h"
#include "kernels/cpu/epilogue.h"
#include "ops/epilogue.h"

namespace baton::passes {
namespace {

bool is_conv(const graph::Node& n) { return n.op_name() == "conv2d" || n.op_name() == "conv2d_fused"; }
bool is_linear(const graph::Node& n) { return n.op_name() == "linear" || n.op_name() == "linear_fused"; }

const std::string& activation(const graph::Node& conv) {
  static const std::string none = "none";
  return conv.attrs.has("activation") ? conv.attrs.s("activation") : none;
}

bool has_residual(const graph::Node& n) {
  return (n.op_name() == "conv2d_fused" || n.op_name() == "linear_fused") && n.num_inputs() == 4;
}

// The operands of a conv or linear node as its fused op reads them: x, weight, bias (a
// zero one if absent: both weights are [out, ...]), then its residual if it has one.
std::optional<std::vector<graph::Value*>> fused_operands(graph::Graph& g, Context& ctx, const graph::Node& conv) {
  std::vector<graph::Value*> in{conv.input(0), conv.input(1)};
  if (conv.num_inputs() >= 3) {
    in.push_back(conv.input(2));
  } else {
    if (!ctx.inputs.add_constant) return std::nullopt;
    const graph::TensorType& w = conv.input(1)->type;
    const int64_t out_channels = w.shape.raw()[0];
    if (sym::is_symbol(out_channels)) return std::nullopt;
    in.push_back(ctx.inputs.add_constant(zeros({out_channels}, w.dtype), "zero_bias"));
  }
  if (has_residual(conv)) in.push_back(conv.input(3));
  return in;
}

ops::Attrs fused_attrs(const graph::Node& conv, const VolatileValues& vol, const ops::Attrs& act) {
  const graph::Value* w = conv.input(1);
  return fused_conv_attrs(conv, act, !w->producer() && !vol.contains(w));
}

class EpilogueFuser {
 public:
  EpilogueFuser(graph::Graph& g, Context& ctx, Effect& effect) : g_(g), ctx_(ctx), effect_(effect), vol_(g), describe_(g) {}

  bool run() {
    bool changed = false;
    for (graph::Node* n : node_list(g_)) {
      if (erased_.count(n)) continue;
      // A step whose activation is applied takes nothing more: add comes before it (ResNet's order).
      const bool open_step = (is_linear(*n) || is_conv(*n)) && activation(*n) == "none";
      if (n->op_name() == "max_pool2d_window_backward" && n->num_inputs() == 2) {
        graph::Node* user = only_reader(g_, vol_, *n);
        if (user && user->op_name() == "relu_backward" && user->input(0) == n->output())
          if (graph::Node* window = pooling_of(*n, *user->input(1)))
            changed |= on_node(*n, [&] { return fuse_relu_backward(n, user, window); });
        continue;
      }
      if (n->op_name() == "matmul") {
        graph::Node* user = only_reader(g_, vol_, *n);
        if (user && user->op_name() == "add") changed |= on_node(*n, [&] { return fuse_matmul_bias(n, user); });
        continue;
      }
      if (n->op_name() == "conv2d_backward_weight") {
        if (graph::Node* sum = bias_gradient_beside(*n)) changed |= on_node(*n, [&] { return fuse_bias_gradient(n, sum); });
        continue;
      }
      if (!open_step) continue;
      // The step grows while an epilogue follows: a residual add, then an activation (in
      // one pass, before fuse_elementwise can take the activation's ops into a group).
      for (graph::Node* step = n; step;) {
        graph::Node* fused = on_node(*step, [&] { return fuse_next(step); });
        changed |= fused != nullptr;
        step = fused && activation(*fused) == "none" && !stop_.count(fused) ? fused : nullptr;
      }
    }
    return changed;
  }

 private:
  // add(matmul(x, w), bias) or add(bias, matmul(x, w)) with w [K, N] and bias [N] of the
  // product's dtype: linear(x, permute(w), bias), the permute a view.
  bool fuse_matmul_bias(graph::Node* matmul, graph::Node* add) {
    graph::Value* w = matmul->input(1);
    const graph::Value* product = matmul->output();
    graph::Value* bias = add->input(0) == product ? add->input(1) : add->input(0);
    if (bias == product || w->shape().rank() != 2 || matmul->input(0)->shape().rank() < 1) return false;
    if (bias->shape().rank() != 1 || !(bias->shape()[0] == w->shape()[1]) || bias->dtype() != product->dtype() ||
        !(add->output()->type == product->type))
      return false;
    note(*matmul, *add);
    graph::Node* wt = g_.add_node("permute", {w}, {graph::TensorType{w->dtype(), {w->shape()[1], w->shape()[0]}}},
                                  ops::Attrs{{"dims", std::vector<int64_t>{1, 0}}}, matmul->loc);
    g_.move_before(wt, matmul);
    replace_with_fused(g_, "linear", add, {matmul->input(0), wt->output(), bias}, {}, {matmul});
    erased_.insert({matmul, add});
    return true;
  }

  // A sum of the weight gradient's output gradient over n, h and w (a conv's bias
  // gradient) that is not yet fused; nullptr if none.
  graph::Node* bias_gradient_beside(const graph::Node& weight_gradient) const {
    const graph::Value* gy = weight_gradient.input(0);
    for (const graph::Use& u : gy->uses()) {
      graph::Node* s = u.user;
      if (s->op_name() != "sum" || erased_.count(s) || !s->attrs.has("dims") || !s->attrs.has("keepdim")) continue;
      if (s->attrs.ints("dims") != std::vector<int64_t>{0, 2, 3} || s->attrs.i("keepdim") != 0) continue;
      if (s->output()->dtype() == gy->dtype() && !vol_.contains(s->output())) return s;
    }
    return nullptr;
  }

  bool fuse_bias_gradient(graph::Node* weight_gradient, graph::Node* sum) {
    note(*weight_gradient, *sum);
    graph::Node* first = position_of(weight_gradient) < position_of(sum) ? weight_gradient : sum;
    graph::Node* fused =
        g_.add_node("conv2d_backward_weight_bias", {weight_gradient->input(0), weight_gradient->input(1)},
                    {weight_gradient->output()->type, sum->output()->type}, weight_gradient->attrs, weight_gradient->loc);
    fused->fused_from = fused_ops(*weight_gradient) + " + " + fused_ops(*sum);
    g_.move_before(fused, first);
    g_.replace_all_uses(weight_gradient->output(), fused->output(0));
    g_.replace_all_uses(sum->output(), fused->output(1));
    g_.erase_node(weight_gradient);
    g_.erase_node(sum);
    erased_.insert({weight_gradient, sum});
    return true;
  }

  size_t position_of(const graph::Node* n) {
    if (positions_.empty()) {
      const std::vector<graph::Node*> nodes = node_list(g_);
      for (size_t i = 0; i < nodes.size(); ++i) positions_[nodes[i]] = i;
    }
    return positions_.at(n);
  }

  // The max_pool2d_window whose offsets `pool_backward` scatters through, when it pooled
  // `relu_result` (what relu_backward masks with) with the same window.
  static graph::Node* pooling_of(const graph::Node& pool_backward, const graph::Value& relu_result) {
    graph::Node* window = pool_backward.input(1)->producer();
    if (!window || window->op_name() != "max_pool2d_window" || window->input(0) != &relu_result) return nullptr;
    for (const char* a : {"kernel", "stride", "padding"})
      if (window->attrs.ints(a) != pool_backward.attrs.ints(a)) return nullptr;
    return window;
  }

  // The pooling's maxima become the mask: a gradient lands only on its window's maximum,
  // where the relu's result equals the maximum, so the relu's test there is the maximum's
  // (a quarter of the bytes for 2x2 windows, and the relu's result need not live on).
  bool fuse_relu_backward(graph::Node* pool_backward, graph::Node* relu_backward, graph::Node* window) {
    note(*pool_backward, *relu_backward);
    replace_with_fused(g_, "max_pool2d_window_backward", relu_backward,
                       {pool_backward->input(0), pool_backward->input(1), window->output(0)}, pool_backward->attrs,
                       {pool_backward});
    erased_.insert({pool_backward, relu_backward});
    return true;
  }

  // The epilogue after a conv or linear step (no activation yet) fused into it: the new
  // step, or nullptr where none follows.
  graph::Node* fuse_next(graph::Node* step) {
    if (std::optional<CompositeActivation> act = composite_activation(g_, ctx_, vol_, *step))
      return fuse_activation(step, act->between, act->last, act->attrs);
    graph::Node* user = only_reader(g_, vol_, *step);
    if (!user) return nullptr;
    if (std::optional<ops::Attrs> act = activation_attrs(*user)) return fuse_activation(step, {}, user, *act);
    return fuse_residual(step, user, is_linear(*step) ? "linear_fused" : "conv2d_fused");
  }

  // Replaces `last` by `op`, whose result the log then names as last's; the new step takes
  // no further epilogue in this pass where last's result was volatile (vol_ knows the
  // values as the pass began).
  graph::Node* replace(std::string_view op, graph::Node* last, std::vector<graph::Value*> in, ops::Attrs attrs) {
    const graph::Value* was = last->output();
    const bool was_volatile = vol_.contains(was);
    const std::string name = describe_.value(was);
    describe_.forget(*last);
    graph::Node* fused = replace_with_fused(g_, op, last, std::move(in), std::move(attrs), {});
    describe_.name(fused->output(), name);
    if (was_volatile) stop_.insert(fused);
    return fused;
  }

  // The step (a conv, or a linear layer: its residual, no activation yet) whose result
  // goes through `between` to `last`, which computes an activation of it: one fused step.
  // A linear layer keeps its inputs as they were (a bias is needed only beside a residual).
  graph::Node* fuse_activation(graph::Node* step, const std::vector<graph::Node*>& between, graph::Node* last,
                               const ops::Attrs& act) {
    if (!(last->output()->type == step->output()->type)) return nullptr;  // a clamp of a float keeps it
    const bool linear = is_linear(*step);
    std::vector<graph::Value*> in = step->inputs();
    if (!linear) {
      std::optional<std::vector<graph::Value*>> operands = fused_operands(g_, ctx_, *step);
      if (!operands) return nullptr;
      in = *operands;
    }
    std::string from = fused_ops(*step) + " + ";
    for (graph::Node* b : between) {
      note(*step, *b);
      from += fused_ops(*b) + " + ";
    }
    note(*step, *last);
    graph::Node* fused = replace(linear ? "linear_fused" : "conv2d_fused", last, in,
                                 linear ? act : fused_attrs(*step, vol_, act));
    fused->fused_from = from + fused->fused_from;
    for (graph::Node* b : between) g_.erase_node(b);
    g_.erase_node(step);
    erased_.insert({step, last});
    erased_.insert(between.begin(), between.end());
    return fused;
  }

  // add(step, r) or add(r, step) with r of the step result's type (no broadcasting), the
  // step a conv or a linear layer: `op` (conv2d_fused or linear_fused) with r as its
  // fourth input.
  graph::Node* fuse_residual(graph::Node* step, graph::Node* add, const char* op) {
    if (add->op_name() != "add" || has_residual(*step)) return nullptr;
    const graph::Value* out = step->output();
    graph::Value* r = add->input(0) == out ? add->input(1) : add->input(0);
    if (r == out || !(r->type == out->type) || !(add->output()->type == out->type)) return nullptr;
    auto in = fused_operands(g_, ctx_, *step);
    if (!in) return nullptr;
    in->push_back(r);
    note(*step, *add);
    const std::string from = fused_ops(*step) + " + ";
    const bool conv = is_conv(*step);
    graph::Node* fused = replace(op, add, *in, conv ? fused_attrs(*step, vol_, no_activation()) : no_activation());
    fused->fused_from = from + fused->fused_from;
    g_.erase_node(step);
    erased_.insert({step, add});
    return fused;
  }

  void note(const graph::Node& conv, const graph::Node& epilogue) {
    effect_.details.push_back(str(describe_.node(epilogue), " fused into ", describe_.node(conv)));
  }

  graph::Graph& g_;
  Context& ctx_;
  Effect& effect_;
  VolatileValues vol_;
  Describer describe_;
  std::unordered_set<const graph::Node*> erased_;
  std::unordered_set<const graph::Node*> stop_;  // fused steps that take no further epilogue this pass
  std::unordered_map<const graph::Node*, size_t> positions_;  // in the graph as run() began
};

}  // namespace

graph::Node* only_reader(const graph::Graph& g, const VolatileValues& vol, const graph::Node& n) {
  if (n.num_outputs() != 1) return nullptr;
  const graph::Value* v = n.output();
  if (v->uses().size() != 1 || g.is_output(v) || vol.contains(v)) return nullptr;
  return v->uses()[0].user;
}

ops::Attrs fused_conv_attrs(const graph::Node& conv, const ops::Attrs& activation, bool cache_weights) {
  ops::Attrs a;
  for (const char* name : {"stride", "padding", "dilation", "groups"})
    for (auto& [n, v] : conv.attrs.items())
      if (n == name) a.set(n, v);
  for (auto& [n, v] : activation.items()) a.set(n, v);
  a.set("cache_weights", int64_t(cache_weights));
  return a;
}

std::optional<ops::Attrs> activation_attrs(const graph::Node& n) {
  const std::optional<kernels::Activation::Kind> kind = kernels::activation_kind(n.op_name());
  if (!kind || *kind == kernels::Activation::Kind::none || n.num_inputs() != 1 || n.num_outputs() != 1)
    return std::nullopt;
  ops::Attrs a{{"activation", n.op_name()}};
  for (const char* p : ops::activation_param_names(*kind)) {
    if (!n.attrs.has(p)) return std::nullopt;
    a.set(p, n.attrs.f(p));
  }
  return a;
}

ops::Attrs no_activation() { return ops::Attrs{{"activation", std::string("none")}}; }

// What a node computes, as fused_from lists it: its op, or what it fused before.
std::string fused_ops(const graph::Node& n) { return n.fused_from.empty() ? n.op_name() : n.fused_from; }

graph::Node* replace_with_fused(graph::Graph& g, std::string_view op, graph::Node* old_last,
                                std::vector<graph::Value*> inputs, ops::Attrs attrs,
                                std::initializer_list<graph::Node*> absorbed) {
  graph::Node* fused = g.add_node(op, std::move(inputs), {old_last->output()->type}, std::move(attrs), old_last->loc);
  for (graph::Node* n : absorbed) fused->fused_from += fused_ops(*n) + " + ";
  fused->fused_from += fused_ops(*old_last);
  g.move_before(fused, old_last);
  g.replace_all_uses(old_last->output(), fused->output());
  g.erase_node(old_last);
  for (graph::Node* n : absorbed) g.erase_node(n);
  return fused;
}

bool fuse_conv_epilogue(graph::Graph& g, Context& ctx, Effect& effect) {
  return EpilogueFuser(g, ctx, effect).run();
}

}  // namespace baton::passes
