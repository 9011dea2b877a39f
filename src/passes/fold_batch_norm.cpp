// Inference batch-norm folding: batch_norm in eval mode (running statistics) right after a
// convolution, or after a linear layer of rows [n, features], is an affine map per output
// channel (feature), so it folds into the weights and bias, computed now from their fixed
// values:
//   scale = gamma / sqrt(running_var + eps)
//   w' = w * scale[o]       b' = (b - running_mean) * scale + beta
// It needs every one of those tensors fixed (a frozen plan, or constants only the graph
// holds): folding parameters that may change would bake in stale values.
#include "baton/autograd.h"
#include "baton/ops.h"
#include "passes/fusion.h"
#include "passes/report.h"
#include "trace/builder.h"

namespace baton::passes {
namespace {

// batch_norm reading running statistics: 5 operands, training 0, only its result read.
bool is_inference_batch_norm(const graph::Graph& g, const graph::Node& n) {
  if (n.op_name() != "batch_norm" || n.num_inputs() != 5 || n.attrs.i("training") != 0) return false;
  for (size_t i = 1; i < n.num_outputs(); ++i)
    if (!n.output(i)->uses().empty() || g.is_output(n.output(i))) return false;
  return true;
}

bool is_plain_conv(const graph::Node& n) {
  if (n.op_name() == "conv2d") return true;
  return n.op_name() == "conv2d_fused" && n.num_inputs() == 3 && n.attrs.s("activation") == "none";
}

// linear producing rows [n, features]: batch norm's channel dim is then the features.
bool is_rows_linear(const graph::Node& n) { return n.op_name() == "linear" && n.output()->shape().rank() == 2; }

class BatchNormFolder {
 public:
  BatchNormFolder(graph::Graph& g, Context& ctx, Effect& effect) : g_(g), ctx_(ctx), effect_(effect), vol_(g), describe_(g) {}

  bool run() {
    if (!ctx_.inputs.add_constant) return false;
    bool changed = false;
    for (graph::Node* bn : node_list(g_)) {
      if (!is_inference_batch_norm(g_, *bn)) continue;
      graph::Node* conv = bn->input(0)->producer();
      if (!conv || !(is_plain_conv(*conv) || is_rows_linear(*conv)) || only_reader(g_, vol_, *conv) != bn) continue;
      std::vector<Tensor> params;  // conv weight, conv bias (or none), gamma, beta, mean, var
      if (!fixed_params(*conv, *bn, params)) continue;
      on_node(*bn, [&] { fold(conv, bn, params); });
      changed = true;
    }
    return changed;
  }

 private:
  bool fixed_params(const graph::Node& conv, const graph::Node& bn, std::vector<Tensor>& out) const {
    auto take = [&](const graph::Value* v) {
      const Tensor* t = fixed_value(ctx_, vol_, v);
      out.push_back(t ? *t : Tensor{});
      return t != nullptr;
    };
    if (!take(conv.input(1))) return false;
    if (conv.num_inputs() < 3) out.emplace_back();  // no bias: zero
    else if (!take(conv.input(2))) return false;
    for (size_t i = 1; i <= 4; ++i)
      if (!take(bn.input(i))) return false;
    return true;
  }

  void fold(graph::Node* conv, graph::Node* bn, const std::vector<Tensor>& p) {
    NoGradGuard no_grad;
    trace::NoTrace no_trace;  // computed now, with the real kernels
    const Tensor &w = p[0], &gamma = p[2], &beta = p[3], &mean = p[4], &var = p[5];
    const Tensor scale = gamma / sqrt(var + bn->attrs.f("eps"));
    Shape per_row(size_t(w.dim()), 1);  // scale along the weight's output dim
    per_row[0] = w.size(0);
    const Tensor weight = (w * scale.reshape(per_row)).contiguous();
    const Tensor bias = ((p[1].defined() ? p[1] : zeros_like(mean)) - mean) * scale + beta;
    std::vector<graph::Value*> in{conv->input(0), ctx_.inputs.add_constant(weight, "folded_weight"),
                                  ctx_.inputs.add_constant(bias.contiguous(), "folded_bias")};
    effect_.details.push_back(str(describe_.node(*bn), " folded into ", describe_.node(*conv)));
    describe_.forget(*bn);
    describe_.forget(*conv);
    if (is_rows_linear(*conv)) {
      replace_with_fused(g_, "linear", bn, std::move(in), {}, {conv});
      return;
    }
    ops::Attrs attrs = fused_conv_attrs(*conv, no_activation(), /*cache_weights=*/true);  // constants of the plan
    replace_with_fused(g_, "conv2d_fused", bn, std::move(in), std::move(attrs), {conv});
  }

  graph::Graph& g_;
  Context& ctx_;
  Effect& effect_;
  VolatileValues vol_;
  Describer describe_;
};

}  // namespace

bool fold_batch_norm(graph::Graph& g, Context& ctx, Effect& effect) { return BatchNormFolder(g, ctx, effect).run(); }

}  // namespace baton::passes
