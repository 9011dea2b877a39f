// Activations written as several ops, as ONNX exports them, for epilogue fusion
// (fuse_epilogue.cpp): SiLU as mul(v, sigmoid(v)) (ONNX has no SiLU before opset 22, and
// baton's own export writes it so) and Clip with fixed bounds, which the importer reads as
// minimum(maximum(v, lo), hi) (relu6 and hardtanh in most exported models).
#include "passes/analysis.h"
#include "passes/fusion.h"

namespace baton::passes {
namespace {

// mul(v, sigmoid(v)) or mul(sigmoid(v), v), v read by those two nodes alone.
std::optional<CompositeActivation> silu_after(const graph::Graph& g, const VolatileValues& vol,
                                              const graph::Value* v) {
  if (v->uses().size() != 2 || !private_value(g, vol, v)) return std::nullopt;
  graph::Node *sigmoid = nullptr, *mul = nullptr;
  for (const graph::Use& u : v->uses()) {
    if (u.user->op_name() == "sigmoid" && u.user->num_inputs() == 1) sigmoid = u.user;
    if (u.user->op_name() == "mul") mul = u.user;
  }
  if (!sigmoid || !mul || sigmoid == mul) return std::nullopt;
  const graph::Value* s = sigmoid->output();
  if (other_operand(*mul, v) != s || s->uses().size() != 1 || !private_value(g, vol, s)) return std::nullopt;
  return CompositeActivation{ops::Attrs{{"activation", std::string("silu")}}, {sigmoid}, mul};
}

// minimum(maximum(v, lo), hi) with fixed bounds lo <= hi, either operand order: clamp's
// values (NaN kept by both; with lo > hi clamp gives lo where this gives hi).
std::optional<CompositeActivation> clamp_after(const graph::Graph& g, const Context& ctx, const VolatileValues& vol,
                                               const graph::Value* v) {
  if (v->uses().size() != 1 || !private_value(g, vol, v)) return std::nullopt;
  graph::Node* max = v->uses()[0].user;
  if (max->op_name() != "maximum" || !(max->output()->type == v->type)) return std::nullopt;
  const std::optional<double> lo = fixed_scalar(ctx, vol, other_operand(*max, v));
  const graph::Value* floor = max->output();
  if (!lo || floor->uses().size() != 1 || !private_value(g, vol, floor)) return std::nullopt;
  graph::Node* min = floor->uses()[0].user;
  if (min->op_name() != "minimum") return std::nullopt;
  const std::optional<double> hi = fixed_scalar(ctx, vol, other_operand(*min, floor));
  if (!hi || *lo > *hi) return std::nullopt;
  return CompositeActivation{ops::Attrs{{"activation", std::string("clamp")}, {"min", *lo}, {"max", *hi}}, {max},
                             min};
}

}  // namespace

std::optional<CompositeActivation> composite_activation(const graph::Graph& g, const Context& ctx,
                                                        const VolatileValues& vol, const graph::Node& step) {
  if (step.num_outputs() != 1) return std::nullopt;
  if (auto silu = silu_after(g, vol, step.output())) return silu;
  return clamp_after(g, ctx, vol, step.output());
}

}  // namespace baton::passes
