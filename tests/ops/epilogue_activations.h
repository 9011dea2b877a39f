// The activations a fused step (conv2d_fused, linear_fused) applies, for op-harness and
// pass tests: the step's attributes and baton's own op as the reference.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "baton/ops.h"
#include "dispatch/registry.h"

namespace baton::testing {

struct EpilogueActivation {
  std::string name;   // a case's name
  ops::Attrs attrs;   // the fused step's activation attributes
  std::function<Tensor(const Tensor&)> op;
};

inline std::vector<EpilogueActivation> epilogue_activations() {
  auto act = [](const char* name) { return ops::Attrs{{"activation", std::string(name)}}; };
  return {
      {"sigmoid", act("sigmoid"), [](const Tensor& y) { return sigmoid(y); }},
      {"tanh", act("tanh"), [](const Tensor& y) { return tanh(y); }},
      {"gelu", act("gelu"), [](const Tensor& y) { return gelu(y); }},
      {"gelu_tanh", act("gelu_tanh"), [](const Tensor& y) { return gelu_tanh(y); }},
      {"silu", act("silu"), [](const Tensor& y) { return silu(y); }},
      {"softplus", act("softplus"), [](const Tensor& y) { return softplus(y); }},
      {"leaky_relu", {{"activation", std::string("leaky_relu")}, {"negative_slope", 0.1}},
       [](const Tensor& y) { return leaky_relu(y, 0.1); }},
      {"elu", {{"activation", std::string("elu")}, {"alpha", 0.7}}, [](const Tensor& y) { return elu(y, 0.7); }},
      {"relu6", {{"activation", std::string("clamp")}, {"min", 0.0}, {"max", 6.0}},
       [](const Tensor& y) { return clamp(y, 0.0, 6.0); }},
      {"hardtanh", {{"activation", std::string("clamp")}, {"min", -0.5}, {"max", 0.5}},
       [](const Tensor& y) { return clamp(y, -0.5, 0.5); }},
  };
}

}  // namespace baton::testing
