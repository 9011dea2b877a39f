// The activation attributes of the fused ops (conv2d_fused, linear_fused): `activation`
// names the op applied last ("none", "relu", "sigmoid", "tanh", "gelu", "gelu_tanh",
// "silu", "softplus", "leaky_relu", "elu", "clamp"), and that op's own parameters follow under its own names
// (negative_slope, alpha, min and max).
#pragma once
#include <vector>

#include "dispatch/registry.h"
#include "kernels/cpu/epilogue.h"

namespace baton::ops {

// The call's activation; a ValueError naming the op for an unknown one or missing or
// extra parameters.
kernels::Activation activation_of(const CallContext& c);
// The names of the parameters `kind` takes, in order (alpha, then beta).
std::vector<const char*> activation_param_names(kernels::Activation::Kind kind);

}  // namespace baton::ops
