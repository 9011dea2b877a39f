// The activation a fused step applies to its result (conv2d_fused, linear_fused): its
// kind and parameters, and baton's own element functions over a result in place, which
// give the separate ops' values bit for bit (where a kernel is baton's, or where an
// operand is not finite and oneDNN's post-op would treat NaN otherwise: finite.h).
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include "baton/tensor.h"

namespace baton::kernels {

// The activations a fused step knows, each an op of baton's: gelu is its exact (erf) form
// and gelu_tanh its tanh form, clamp covers relu6 and hardtanh. alpha: leaky_relu's negative slope, elu's alpha,
// clamp's min; beta: clamp's max.
struct Activation {
  enum class Kind { none, relu, sigmoid, tanh, gelu, gelu_tanh, silu, softplus, leaky_relu, elu, clamp };
  Kind kind = Kind::none;
  double alpha = 0, beta = 0;
  bool any() const { return kind != Kind::none; }
  bool operator==(const Activation&) const = default;
};

// The kind named `name` (an op's name, or "none"); nullopt for any other name.
std::optional<Activation::Kind> activation_kind(std::string_view name);
// What tells two activations apart in a cache key: the name and exact parameters.
std::string activation_key(const Activation& a);

// out = act(out) in place for an f32 or f64 tensor whose elements fill their buffer in
// some order (contiguous, channels-last, or a plan's channel-blocked one); others are
// copied out and back.
void apply_activation(const Activation& a, const Tensor& out);
// out = act(out + residual) as add and then the activation op compute it (two passes, so
// each rounds as the separate ops do). residual: out's shape, any strides.
void add_then_activate(const Tensor& out, const Tensor* residual, const Activation& a);

}  // namespace baton::kernels
