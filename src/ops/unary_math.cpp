// More unary element-wise math: rounding (floor ceil round), the rest of the trigonometric
// functions (tan asin acos atan) and the hyperbolic ones (sinh cosh asinh acosh atanh).
// The first ones are in unary.cpp. Gradients are written with public ops; outside a
// function's domain the value is NaN (asin(2)), as in C, numpy and PyTorch.
// Each is also an instruction of fused_elementwise's programs (kernels/cpu/ewise_program.cpp),
// so the elementwise-fusion pass fuses them with their neighbours.
#include "kernels/cpu/element_fns.h"
#include "ops/unary.h"

namespace baton::ops {

// Rounding keeps the dtype: integers pass unchanged. Not differentiable (the derivative
// is zero wherever it exists), like sign: no grad rule, so no gradient flows.
#define BATON_ROUNDING_OP(var, name, functor, onnx_name) \
  BATON_OP(var, name)                                    \
      .inputs(1)                                         \
      .fusion(Fusion::Elementwise)                       \
      .layout_follows_inputs()                           \
      .infer(unary_numeric_infer)                        \
      .cpu(unary_numeric_kernel(kernels::ew::functor{})) \
      .cost(unary_cost)                                  \
      .onnx(onnx_name)

BATON_ROUNDING_OP(floor_op, "floor", Floor, "Floor");
BATON_ROUNDING_OP(ceil_op, "ceil", Ceil, "Ceil");
BATON_ROUNDING_OP(round_op, "round", Round, "Round");  // halves to even
#undef BATON_ROUNDING_OP

// Float-only math: `derivative(c)` is dy/dx as a tensor, from c.input(0) or c.output().
#define BATON_FLOAT_MATH_OP(var, name, functor, flops, onnx_name, derivative)             \
  BATON_OP(var, name)                                                                      \
      .inputs(1)                                                                           \
      .fusion(Fusion::Elementwise)                                                         \
      .layout_follows_inputs()                                                             \
      .infer(unary_float_infer)                                                            \
      .cpu(unary_float_kernel(kernels::ew::functor{}))                                     \
      .grad([](const GradContext& c) {                                                     \
        [[maybe_unused]] const Tensor& x = c.input(0);                                     \
        [[maybe_unused]] const Tensor& y = c.output();                                     \
        return Grads{c.grad_output() * (derivative)};                                      \
      })                                                                                   \
      .cost(unary_cost_flops(flops))                                                       \
      .onnx(onnx_name)

// tan' = 1 + tan^2
BATON_FLOAT_MATH_OP(tan_op, "tan", Tan, 15, "Tan", 1.0 + y * y);
// asin' = 1 / sqrt(1 - x^2), acos' = -asin'
BATON_FLOAT_MATH_OP(asin_op, "asin", Asin, 15, "Asin", rsqrt(1.0 - x * x));
BATON_FLOAT_MATH_OP(acos_op, "acos", Acos, 15, "Acos", neg(rsqrt(1.0 - x * x)));
// atan' = 1 / (1 + x^2)
BATON_FLOAT_MATH_OP(atan_op, "atan", Atan, 15, "Atan", 1.0 / (x * x + 1.0));
BATON_FLOAT_MATH_OP(sinh_op, "sinh", Sinh, 15, "Sinh", cosh(x));
BATON_FLOAT_MATH_OP(cosh_op, "cosh", Cosh, 15, "Cosh", sinh(x));
// asinh' = 1 / sqrt(x^2 + 1), acosh' = 1 / sqrt(x^2 - 1), atanh' = 1 / (1 - x^2)
BATON_FLOAT_MATH_OP(asinh_op, "asinh", Asinh, 20, "Asinh", rsqrt(x * x + 1.0));
BATON_FLOAT_MATH_OP(acosh_op, "acosh", Acosh, 20, "Acosh", rsqrt((x - 1.0) * (x + 1.0)));
BATON_FLOAT_MATH_OP(atanh_op, "atanh", Atanh, 20, "Atanh", 1.0 / ((1.0 - x) * (1.0 + x)));
#undef BATON_FLOAT_MATH_OP

}  // namespace baton::ops

namespace baton {

Tensor floor(const Tensor& x, SourceLoc loc) { return ops::call(ops::floor_op, {x}, {}, loc); }
Tensor ceil(const Tensor& x, SourceLoc loc) { return ops::call(ops::ceil_op, {x}, {}, loc); }
Tensor round(const Tensor& x, SourceLoc loc) { return ops::call(ops::round_op, {x}, {}, loc); }

BATON_DEFINE_FLOAT_UNARY(tan)
BATON_DEFINE_FLOAT_UNARY(asin)
BATON_DEFINE_FLOAT_UNARY(acos)
BATON_DEFINE_FLOAT_UNARY(atan)
BATON_DEFINE_FLOAT_UNARY(sinh)
BATON_DEFINE_FLOAT_UNARY(cosh)
BATON_DEFINE_FLOAT_UNARY(asinh)
BATON_DEFINE_FLOAT_UNARY(acosh)
BATON_DEFINE_FLOAT_UNARY(atanh)

}  // namespace baton
