// Unary element-wise ops.
#include "ops/unary.h"

#include <cmath>

#include "baton/ops.h"

namespace baton::ops {

BATON_OP(neg_op, "neg")
    .fusion(Fusion::Elementwise)
    .infer(same_as_input)
    .cpu(unary_numeric_kernel([](auto x) { return -x; }))
    .grad([](const GradContext& c) { return Grads{neg(c.grad_output())}; })
    .cost(unary_cost)
    .onnx("Neg");

BATON_OP(exp_op, "exp")
    .fusion(Fusion::Elementwise)
    .infer(unary_float_infer)
    .cpu(unary_float_kernel([](auto x) { return std::exp(x); }))
    .grad([](const GradContext& c) { return Grads{c.grad_output() * c.output()}; })
    .cost(unary_cost)
    .onnx("Exp");

BATON_OP(relu_op, "relu")
    .fusion(Fusion::Elementwise)
    .infer(same_as_input)
    .cpu(unary_numeric_kernel([](auto x) { return x > 0 ? x : decltype(x)(0); }))
    .grad([](const GradContext& c) {
      return Grads{where(c.output() > 0, c.grad_output(), zeros_like(c.grad_output()))};
    })
    .cost(unary_cost)
    .onnx("Relu");

}  // namespace baton::ops

namespace baton {

// Float-only math promotes integer inputs to f32, as PyTorch does.
static Tensor float_input(const Tensor& x, SourceLoc loc) {
  return x.defined() && !is_floating(x.dtype()) ? cast(x, f32, loc) : x;
}

Tensor neg(const Tensor& x, SourceLoc loc) { return ops::call(ops::neg_op, {x}, {}, loc); }
Tensor exp(const Tensor& x, SourceLoc loc) { return ops::call(ops::exp_op, {float_input(x, loc)}, {}, loc); }
Tensor relu(const Tensor& x, SourceLoc loc) { return ops::call(ops::relu_op, {x}, {}, loc); }

}  // namespace baton
