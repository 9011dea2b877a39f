// Element-wise ops: unary math, binary arithmetic with numpy broadcasting, comparisons.
// Mixed dtypes promote (docs/dtypes.md); integer inputs to float-only math become f32.
#pragma once
#include "baton/tensor.h"

namespace baton {

#define BATON_UNARY(name) Tensor name(const Tensor& x, SourceLoc loc = SourceLoc::current());
BATON_UNARY(neg)
BATON_UNARY(abs)
BATON_UNARY(exp)
BATON_UNARY(log)
BATON_UNARY(sqrt)
BATON_UNARY(rsqrt)
BATON_UNARY(sin)
BATON_UNARY(cos)
BATON_UNARY(tanh)
BATON_UNARY(tan)
BATON_UNARY(asin)  // NaN outside [-1, 1]
BATON_UNARY(acos)  // NaN outside [-1, 1]
BATON_UNARY(atan)
BATON_UNARY(sinh)
BATON_UNARY(cosh)
BATON_UNARY(asinh)
BATON_UNARY(acosh)  // NaN below 1
BATON_UNARY(atanh)  // NaN outside [-1, 1], +-inf at +-1
BATON_UNARY(sigmoid)
BATON_UNARY(relu)
BATON_UNARY(gelu)  // exact (erf) form
BATON_UNARY(gelu_tanh)  // tanh approximation (PyTorch's gelu(x, approximate="tanh"))
BATON_UNARY(silu)
BATON_UNARY(softplus)
BATON_UNARY(erf)
BATON_UNARY(sign)
// Rounding keeps the dtype (integers pass unchanged); round sends halves to the even
// neighbour (2.5 -> 2, like numpy and ONNX). No gradient flows through them.
BATON_UNARY(floor)
BATON_UNARY(ceil)
BATON_UNARY(round)
BATON_UNARY(logical_not)
#undef BATON_UNARY
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01, SourceLoc loc = SourceLoc::current());
Tensor elu(const Tensor& x, double alpha = 1.0, SourceLoc loc = SourceLoc::current());
Tensor clamp(const Tensor& x, double min, double max, SourceLoc loc = SourceLoc::current());

#define BATON_BINARY(name)                                                               \
  Tensor name(const Tensor& a, const Tensor& b, SourceLoc loc = SourceLoc::current());   \
  Tensor name(const Tensor& a, Scalar b, SourceLoc loc = SourceLoc::current());          \
  Tensor name(Scalar a, const Tensor& b, SourceLoc loc = SourceLoc::current());
BATON_BINARY(add)
BATON_BINARY(sub)
BATON_BINARY(mul)
BATON_BINARY(div)
BATON_BINARY(pow)
BATON_BINARY(maximum)
BATON_BINARY(minimum)
// Remainders: fmod has the dividend's sign (C's fmod), remainder the divisor's (Python's %).
// An integer divisor of 0 is a ValueError.
BATON_BINARY(fmod)
BATON_BINARY(remainder)
// Bit shifts of integers as unsigned numbers: a << n, a >> n (0 once n reaches the width).
BATON_BINARY(shift_left)
BATON_BINARY(shift_right)
BATON_BINARY(eq)
BATON_BINARY(ne)
BATON_BINARY(lt)
BATON_BINARY(le)
BATON_BINARY(gt)
BATON_BINARY(ge)
#undef BATON_BINARY

// Elements of a where cond is true, else of b (broadcast together).
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b,
             SourceLoc loc = SourceLoc::current());

// Conversions. A plain `Tensor` operand is captured as TensorArg so that operators (which
// cannot take a defaulted argument) still know the caller's file:line.
struct TensorArg {
  TensorArg(const Tensor& t, SourceLoc loc = SourceLoc::current()) : tensor(t), loc(loc) {
    if (!t.defined()) [[unlikely]] throw_undefined_operand(loc);
  }
  [[noreturn]] static void throw_undefined_operand(SourceLoc loc);
  const Tensor& tensor;
  SourceLoc loc;
};

Tensor operator-(TensorArg x);
#define BATON_OPERATOR(sym)                          \
  Tensor operator sym(TensorArg a, const Tensor& b); \
  Tensor operator sym(TensorArg a, Scalar b);        \
  Tensor operator sym(Scalar a, TensorArg b);
BATON_OPERATOR(+)
BATON_OPERATOR(-)
BATON_OPERATOR(*)
BATON_OPERATOR(/)
BATON_OPERATOR(<)
BATON_OPERATOR(<=)
BATON_OPERATOR(>)
BATON_OPERATOR(>=)
BATON_OPERATOR(==)
BATON_OPERATOR(!=)
#undef BATON_OPERATOR

}  // namespace baton
