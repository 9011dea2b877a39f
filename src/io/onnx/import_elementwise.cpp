// ONNX element-wise ops: activations, arithmetic, comparisons, logic, Cast, Clip, Where.
// Ops that map one to one onto a baton op with no attributes (Add, Relu, Exp...) need no
// entry here: their OpDef names them (importer.cpp, direct_op).
#include <cmath>
#include <limits>

#include "baton/ops.h"
#include "io/onnx/importer.h"

namespace baton::onnx::detail {
namespace {

// Element-wise fold of a variadic op (Max, Min, Sum) over its inputs, broadcasting.
template <class F>
Tensor fold_inputs(const NodeContext& c, F f) {
  if (c.num_inputs() == 0) c.fail("needs at least one input");
  Tensor acc = c.input(0);
  for (size_t i = 1; i < c.num_inputs(); ++i) acc = f(acc, c.input(i));
  return acc;
}

Tensor hard_sigmoid(const Tensor& x, double alpha, double beta) { return clamp(x * alpha + beta, 0.0, 1.0); }

Tensor as_bool(const NodeContext& c, size_t i) {
  const Tensor& t = c.input(i);
  if (t.dtype() != DType::b8) c.fail(str("input ", i, " must be bool, not ", t.dtype()));
  return t;
}

// The second operand of Add/Sub/Mul/Div. Before opset 7 it broadcast only with
// broadcast = 1, aligned at `axis` (default: its trailing dims) instead of numpy's rule.
Tensor legacy_broadcast(const NodeContext& c) {
  const Tensor &a = c.input(0), &b = c.input(1);
  if (c.opset >= 7 || c.attr_int("broadcast", 0) == 0 || !c.has_attr("axis")) return b;
  const int64_t axis = normalize_axis(c, c.attr_int("axis"), a.dim());
  if (axis + b.dim() > a.dim()) c.fail(str("cannot align ", b.shape(), " at axis ", axis, " of ", a.shape()));
  Shape aligned = b.shape();
  while (int64_t(aligned.size()) < a.dim() - axis) aligned.push_back(1);
  return reshape(b, aligned);
}

}  // namespace

BATON_ONNX_IMPORTER("Reciprocal", [](NodeContext& c) -> Outputs { return {1.0 / c.input(0)}; });
BATON_ONNX_IMPORTER("Softsign", [](NodeContext& c) -> Outputs {
  const Tensor& x = c.input(0);
  return {x / (abs(x) + 1.0)};
});
BATON_ONNX_IMPORTER("LeakyRelu", [](NodeContext& c) -> Outputs {
  return {leaky_relu(c.input(0), c.attr_float("alpha", 0.01))};
});
BATON_ONNX_IMPORTER("Elu", [](NodeContext& c) -> Outputs { return {elu(c.input(0), c.attr_float("alpha", 1.0))}; });
BATON_ONNX_IMPORTER("Selu", [](NodeContext& c) -> Outputs {
  double alpha = c.attr_float("alpha", 1.67326319217681884765625);
  double gamma = c.attr_float("gamma", 1.05070102214813232421875);
  return {elu(c.input(0), alpha) * gamma};
});
BATON_ONNX_IMPORTER("Celu", [](NodeContext& c) -> Outputs {
  const Tensor& x = c.input(0);
  double alpha = c.attr_float("alpha", 1.0);
  return {elu(x / alpha, 1.0) * alpha};  // max(0,x) + min(0, alpha*(exp(x/alpha)-1))
});
BATON_ONNX_IMPORTER("HardSigmoid", [](NodeContext& c) -> Outputs {
  return {hard_sigmoid(c.input(0), c.attr_float("alpha", 0.2), c.attr_float("beta", 0.5))};
});
BATON_ONNX_IMPORTER("HardSwish", [](NodeContext& c) -> Outputs {
  return {c.input(0) * hard_sigmoid(c.input(0), 1.0 / 6.0, 0.5)};
});
BATON_ONNX_IMPORTER("ThresholdedRelu", [](NodeContext& c) -> Outputs {
  const Tensor& x = c.input(0);
  return {where(x > c.attr_float("alpha", 1.0), x, zeros_like(x))};
});
BATON_ONNX_IMPORTER("PRelu", [](NodeContext& c) -> Outputs {
  const Tensor& x = c.input(0);
  Tensor slope = c.input(1);
  // Before opset 7 a slope of [C] applies per channel (dim 1), not along the last dim.
  if (slope.dim() == 1 && x.dim() > 2 && slope.shape()[0] == x.shape()[1] && slope.shape()[0] != x.shape().back())
    slope = per_channel(slope, x.dim());
  return {where(x < 0.0, x * slope, x)};
});
BATON_ONNX_IMPORTER("Shrink", [](NodeContext& c) -> Outputs {
  const Tensor& x = c.input(0);
  double bias = c.attr_float("bias", 0.0), lambd = c.attr_float("lambd", 0.5);
  return {where(x < -lambd, x + bias, where(x > lambd, x - bias, zeros_like(x)))};
});
BATON_ONNX_IMPORTER("IsNaN", [](NodeContext& c) -> Outputs { return {ne(c.input(0), c.input(0))}; });
BATON_ONNX_IMPORTER("IsInf", [](NodeContext& c) -> Outputs {
  const Tensor& x = c.input(0);
  const double inf = std::numeric_limits<double>::infinity();
  Tensor pos = eq(x, inf), neg = eq(x, -inf);
  bool want_pos = c.attr_int("detect_positive", 1) != 0, want_neg = c.attr_int("detect_negative", 1) != 0;
  if (want_pos && want_neg) return {where(pos, pos, neg)};
  if (want_pos) return {pos};
  if (want_neg) return {neg};
  return {zeros_like(x).to(DType::b8)};
});

// Arithmetic whose ONNX form differs from baton's: Pow's exponent may have another type
// (the result has the base's), Div of integers truncates.
BATON_ONNX_IMPORTER("Pow", [](NodeContext& c) -> Outputs {
  const Tensor& x = c.input(0);
  return {pow(x, cast(c.input(1), x.dtype()))};
});
BATON_ONNX_IMPORTER("Div", [](NodeContext& c) -> Outputs {
  const Tensor& a = c.input(0);
  Tensor q = div(a, legacy_broadcast(c));
  return {q.dtype() == a.dtype() ? q : cast(q, a.dtype())};
});
BATON_ONNX_IMPORTER("Add", [](NodeContext& c) -> Outputs { return {add(c.input(0), legacy_broadcast(c))}; });
BATON_ONNX_IMPORTER("Sub", [](NodeContext& c) -> Outputs { return {sub(c.input(0), legacy_broadcast(c))}; });
BATON_ONNX_IMPORTER("Mul", [](NodeContext& c) -> Outputs { return {mul(c.input(0), legacy_broadcast(c))}; });
BATON_ONNX_IMPORTER("Max", [](NodeContext& c) -> Outputs {
  return {fold_inputs(c, [](const Tensor& a, const Tensor& b) { return maximum(a, b); })};
});
BATON_ONNX_IMPORTER("Min", [](NodeContext& c) -> Outputs {
  return {fold_inputs(c, [](const Tensor& a, const Tensor& b) { return minimum(a, b); })};
});
BATON_ONNX_IMPORTER("Sum", [](NodeContext& c) -> Outputs {
  return {fold_inputs(c, [](const Tensor& a, const Tensor& b) { return a + b; })};
});
BATON_ONNX_IMPORTER("Mean", [](NodeContext& c) -> Outputs {
  return {fold_inputs(c, [](const Tensor& a, const Tensor& b) { return a + b; }) / double(c.num_inputs())};
});

BATON_ONNX_IMPORTER("Equal", [](NodeContext& c) -> Outputs { return {eq(c.input(0), c.input(1))}; });
BATON_ONNX_IMPORTER("Less", [](NodeContext& c) -> Outputs { return {lt(c.input(0), c.input(1))}; });
BATON_ONNX_IMPORTER("LessOrEqual", [](NodeContext& c) -> Outputs { return {le(c.input(0), c.input(1))}; });
BATON_ONNX_IMPORTER("Greater", [](NodeContext& c) -> Outputs { return {gt(c.input(0), c.input(1))}; });
BATON_ONNX_IMPORTER("GreaterOrEqual", [](NodeContext& c) -> Outputs { return {ge(c.input(0), c.input(1))}; });
// Logic on bools with select: a && b = a ? b : a, a || b = a ? a : b, a ^ b = a != b.
BATON_ONNX_IMPORTER("And", [](NodeContext& c) -> Outputs {
  Tensor a = as_bool(c, 0), b = as_bool(c, 1);
  return {where(a, b, a)};
});
BATON_ONNX_IMPORTER("Or", [](NodeContext& c) -> Outputs {
  Tensor a = as_bool(c, 0), b = as_bool(c, 1);
  return {where(a, a, b)};
});
BATON_ONNX_IMPORTER("Xor", [](NodeContext& c) -> Outputs { return {ne(as_bool(c, 0), as_bool(c, 1))}; });
BATON_ONNX_IMPORTER("Not", [](NodeContext& c) -> Outputs { return {logical_not(as_bool(c, 0))}; });

BATON_ONNX_IMPORTER("Cast", [](NodeContext& c) -> Outputs {
  const int64_t to = c.attr_int("to");
  std::optional<DType> dtype = to_dtype(int32_t(to));
  if (!dtype) c.fail(str("casts to ", onnx_type_name(int32_t(to)), ", which baton has no tensors of"));
  return {cast(c.input(0), *dtype)};
});
BATON_ONNX_IMPORTER("CastLike", [](NodeContext& c) -> Outputs { return {cast(c.input(0), c.onnx_dtype(1))}; });

// Clip: bounds are attributes before opset 11, optional inputs after.
BATON_ONNX_IMPORTER("Clip", [](NodeContext& c) -> Outputs {
  Tensor y = c.input(0);
  if (c.opset < 11) {
    const double inf = std::numeric_limits<double>::infinity();
    return {clamp(y, c.attr_float("min", -inf), c.attr_float("max", inf))};
  }
  if (c.has_input(1)) y = maximum(y, cast(c.input(1), y.dtype()));
  if (c.has_input(2)) y = minimum(y, cast(c.input(2), y.dtype()));
  return {y};
});

BATON_ONNX_IMPORTER("Where", [](NodeContext& c) -> Outputs {
  return {where(as_bool(c, 0), c.input(1), c.input(2))};
});

}  // namespace baton::onnx::detail
