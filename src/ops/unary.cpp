// Unary element-wise math: neg abs exp log sqrt rsqrt sin cos tanh erf sign logical_not.
// Activations (relu, sigmoid, gelu...) are in activation.cpp.
#include <cmath>
#include <numbers>
#include <type_traits>

#include "kernels/cpu/element_fns.h"
#include "kernels/cpu/vmath.h"
#include "ops/unary.h"

namespace baton::ops {

BATON_OP(neg_op, "neg")
    .inputs(1)
    .fusion(Fusion::Elementwise)
    .layout_follows_inputs()
    .infer(unary_numeric_infer)
    .cpu(unary_numeric_kernel(kernels::ew::Neg{}))
    .grad([](const GradContext& c) { return Grads{neg(c.grad_output())}; })
    .cost(unary_cost)
    .onnx("Neg");

BATON_OP(abs_op, "abs")
    .inputs(1)
    .fusion(Fusion::Elementwise)
    .layout_follows_inputs()
    .infer(unary_numeric_infer)
    .cpu(unary_numeric_kernel(kernels::ew::Abs{}))
    .grad([](const GradContext& c) { return Grads{c.grad_output() * sign(c.input(0))}; })
    .cost(unary_cost)
    .onnx("Abs");

BATON_OP(exp_op, "exp")
    .inputs(1)
    .fusion(Fusion::Elementwise)
    .layout_follows_inputs()
    .infer(unary_float_infer)
    .cpu(unary_float_kernel(kernels::ew::Exp{}))
    .grad([](const GradContext& c) { return Grads{c.grad_output() * c.output()}; })
    .cost(unary_cost_flops(10))
    .onnx("Exp");

BATON_OP(log_op, "log")
    .inputs(1)
    .fusion(Fusion::Elementwise)
    .layout_follows_inputs()
    .infer(unary_float_infer)
    .cpu(unary_float_kernel(kernels::ew::Log{}))
    .grad([](const GradContext& c) { return Grads{c.grad_output() / c.input(0)}; })
    .cost(unary_cost_flops(10))
    .onnx("Log");

BATON_OP(sqrt_op, "sqrt")
    .inputs(1)
    .fusion(Fusion::Elementwise)
    .layout_follows_inputs()
    .infer(unary_float_infer)
    .cpu(unary_float_kernel(kernels::ew::Sqrt{}))
    .grad([](const GradContext& c) { return Grads{c.grad_output() * 0.5 / c.output()}; })
    .cost(unary_cost_flops(4))
    .onnx("Sqrt");

// d/dx x^(-1/2) = -x^(-3/2) / 2 = -out^3 / 2.
BATON_OP(rsqrt_op, "rsqrt")
    .inputs(1)
    .fusion(Fusion::Elementwise)
    .layout_follows_inputs()
    .infer(unary_float_infer)
    .cpu(unary_float_kernel(kernels::ew::Rsqrt{}))
    .grad([](const GradContext& c) {
      const Tensor& y = c.output();
      return Grads{c.grad_output() * (y * y * y) * -0.5};
    })
    .cost(unary_cost_flops(5))
    .onnx("");  // ONNX has no Rsqrt: the exporter writes Reciprocal(Sqrt(x))

BATON_OP(sin_op, "sin")
    .inputs(1)
    .fusion(Fusion::Elementwise)
    .layout_follows_inputs()
    .infer(unary_float_infer)
    .cpu(unary_float_block_kernel(kernels::ew::Sin{}))
    .grad([](const GradContext& c) { return Grads{c.grad_output() * cos(c.input(0))}; })
    .cost(unary_cost_flops(10))
    .onnx("Sin");

BATON_OP(cos_op, "cos")
    .inputs(1)
    .fusion(Fusion::Elementwise)
    .layout_follows_inputs()
    .infer(unary_float_infer)
    .cpu(unary_float_block_kernel(kernels::ew::Cos{}))
    .grad([](const GradContext& c) { return Grads{neg(c.grad_output() * sin(c.input(0)))}; })
    .cost(unary_cost_flops(10))
    .onnx("Cos");

BATON_OP(tanh_op, "tanh")
    .inputs(1)
    .fusion(Fusion::Elementwise)
    .layout_follows_inputs()
    .infer(unary_float_infer)
    .cpu(unary_float_kernel(kernels::ew::Tanh{}))
    .grad([](const GradContext& c) { return Grads{tanh_backward(c.grad_output(), c.output(), c.loc)}; })
    .cost(unary_cost_flops(12))
    .onnx("Tanh");

// d/dx erf(x) = 2/sqrt(pi) * exp(-x^2).
BATON_OP(erf_op, "erf")
    .inputs(1)
    .fusion(Fusion::Elementwise)
    .layout_follows_inputs()
    .infer(unary_float_infer)
    .cpu(unary_float_kernel(kernels::ew::Erf{}))
    .grad([](const GradContext& c) {
      const Tensor& x = c.input(0);
      return Grads{c.grad_output() * exp(neg(x * x)) * std::numbers::inv_sqrtpi * 2.0};
    })
    .cost(unary_cost_flops(15))
    .onnx("Erf");

// Not differentiable (its derivative is zero wherever it exists): no grad rule.
BATON_OP(sign_op, "sign")
    .inputs(1)
    .fusion(Fusion::Elementwise)
    .layout_follows_inputs()
    .infer(unary_numeric_infer)
    .cpu(unary_numeric_kernel([](auto x) BATON_ELEMENT_FN {
      using T = decltype(x);
      return T(T(0) < x) - T(x < T(0));
    }))
    .cost(unary_cost)
    .onnx("Sign");

// Any dtype, like PyTorch: true where the element is zero (or false).
BATON_OP(logical_not_op, "logical_not")
    .inputs(1)
    .fusion(Fusion::Elementwise)
    .infer([](const InferContext& c) { return TensorMeta{b8, c.input(0).shape()}; })
    .cpu([](const KernelContext& c) {
      kernels::visit_dtype(c.input(0).dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        kernels::map_elements<bool, T>(c.output(), [](T x) BATON_ELEMENT_FN { return x == T(0); }, c.input(0));
      });
    })
    .cost(unary_cost)
    .onnx("Not");

}  // namespace baton::ops

namespace baton {

Tensor neg(const Tensor& x, SourceLoc loc) { return ops::call(ops::neg_op, {x}, {}, loc); }
Tensor abs(const Tensor& x, SourceLoc loc) { return ops::call(ops::abs_op, {x}, {}, loc); }
Tensor sign(const Tensor& x, SourceLoc loc) { return ops::call(ops::sign_op, {x}, {}, loc); }
Tensor logical_not(const Tensor& x, SourceLoc loc) {
  return ops::call(ops::logical_not_op, {x}, {}, loc);
}

BATON_DEFINE_FLOAT_UNARY(exp)
BATON_DEFINE_FLOAT_UNARY(log)
BATON_DEFINE_FLOAT_UNARY(sqrt)
BATON_DEFINE_FLOAT_UNARY(rsqrt)
BATON_DEFINE_FLOAT_UNARY(sin)
BATON_DEFINE_FLOAT_UNARY(cos)
BATON_DEFINE_FLOAT_UNARY(tanh)
BATON_DEFINE_FLOAT_UNARY(erf)

}  // namespace baton
