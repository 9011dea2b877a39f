// ONNX reductions (ReduceSum, ReduceMean, ... ReduceLogSumExp), ArgMax/ArgMin, and the
// softmax family (Softmax, LogSoftmax, Hardmax).
#include <numeric>

#include "baton/ops.h"
#include "io/onnx/importer.h"

namespace baton::onnx::detail {
namespace {

// The dims a Reduce* node reduces: its axes (an attribute, or an input from opset 13 for
// ReduceSum and 18 for the rest), all dims when none, nothing with noop_with_empty_axes.
// Returns nullopt for "no reduction".
std::optional<std::vector<int64_t>> reduce_dims(const NodeContext& c, int64_t input_since, int64_t rank) {
  std::vector<int64_t> axes = c.opset >= input_since ? (c.has_input(1) ? c.ints_input(1) : std::vector<int64_t>{})
                                                     : c.attr_ints("axes");
  if (axes.empty()) {
    if (c.attr_int("noop_with_empty_axes", 0) != 0) return std::nullopt;
    axes.resize(size_t(rank));
    std::iota(axes.begin(), axes.end(), 0);
  }
  for (int64_t& a : axes) a = normalize_axis(c, a, rank);
  return axes;
}

// Registers Reduce<name>: reduce(x, dims, keepdim) over the node's dims, with ONNX's
// result type (the input's: baton sums integers into i64). `by_values` reduces over axes
// read when the model runs, where an op can (ReduceSum: sum_over).
template <class Reduce>
void register_reduce(const char* op_type, int64_t axes_input_since, Reduce reduce,
                     Tensor (*by_values)(const Tensor&, const Tensor&, bool) = nullptr) {
  register_importer(op_type, [=](NodeContext& c) -> Outputs {
    const Tensor& x = c.input(0);
    const bool keep = c.attr_int("keepdims", 1) != 0;
    auto as_input_type = [&](const Tensor& y) { return y.dtype() == x.dtype() ? y : cast(y, x.dtype()); };
    // Axes computed from the inputs (no axes mean every dim, or none: known either way).
    if (by_values && x.dim() > 0 && c.opset >= axes_input_since && c.list_computed_from_input_values(1))
      return {as_input_type(by_values(x, c.input(1), keep))};
    std::optional<std::vector<int64_t>> dims = reduce_dims(c, axes_input_since, x.dim());
    if (!dims) return {x};
    if (x.dim() == 0) return {x};
    return {as_input_type(reduce(x, *dims, keep))};
  });
}

Tensor sum_over_axes(const Tensor& x, const Tensor& axes, bool keep) { return sum_over(x, axes, keep); }

const bool reductions_registered = [] {
  register_reduce("ReduceSum", 13, [](const Tensor& x, const Dims& d, bool k) { return sum(x, d, k); }, sum_over_axes);
  register_reduce("ReduceMean", 18, [](const Tensor& x, const Dims& d, bool k) { return mean(x, d, k); });
  register_reduce("ReduceMax", 18, [](const Tensor& x, const Dims& d, bool k) { return max(x, d, k); });
  register_reduce("ReduceMin", 18, [](const Tensor& x, const Dims& d, bool k) { return min(x, d, k); });
  register_reduce("ReduceProd", 18, [](const Tensor& x, const Dims& d, bool k) { return prod(x, d, k); });
  register_reduce("ReduceSumSquare", 18, [](const Tensor& x, const Dims& d, bool k) { return sum(x * x, d, k); });
  register_reduce("ReduceL1", 18, [](const Tensor& x, const Dims& d, bool k) { return sum(abs(x), d, k); });
  register_reduce("ReduceL2", 18, [](const Tensor& x, const Dims& d, bool k) {
    return sqrt(sum(x * x, d, k));
  });
  register_reduce("ReduceLogSum", 18, [](const Tensor& x, const Dims& d, bool k) { return log(sum(x, d, k)); });
  register_reduce("ReduceLogSumExp", 18, [](const Tensor& x, const Dims& d, bool k) {
    return logsumexp(x, d, k);
  });
  return true;
}();

// ArgMax/ArgMin; select_last_index picks the last of equal extremes: the first one of
// x reversed along the axis, counted from the end.
template <class Arg>
Outputs arg_reduce(NodeContext& c, Arg arg) {
  const Tensor& x = c.input(0);
  const int64_t axis = axis_attr(c, "axis", 0, x.dim());
  const bool keep = c.attr_int("keepdims", 1) != 0;
  if (c.attr_int("select_last_index", 0) == 0) return {arg(x, axis, keep)};
  const int64_t n = x.dim() == 0 ? 1 : x.shape()[size_t(axis)];
  if (sym::is_symbol(n)) c.fail(str("select_last_index needs a static size along the axis, got ", x.shape()));
  if (x.dim() == 0) return {arg(x, axis, keep)};
  const Tensor reversed = index_select(x, axis, arange(double(n - 1), -1.0, -1.0, DType::i64));
  return {(n - 1) - arg(reversed, axis, keep)};
}

// Softmax-like ops: from opset 13 along one axis (default -1); before, over the input
// flattened to 2-D at axis (default 1), everything from axis on as one row.
template <class F>
Outputs softmax_like(NodeContext& c, F f) {
  const Tensor& x = c.input(0);
  if (c.opset >= 13) return {f(x, axis_attr(c, "axis", -1, x.dim()))};
  const int64_t axis = axis_attr(c, "axis", 1, x.dim());
  return {reshape(f(reshape(x, flattened_at(x.shape(), axis)), 1), x.shape())};
}

Tensor hardmax(const Tensor& x, int64_t axis) {
  Tensor index = argmax(x, axis, /*keepdim=*/true);
  Tensor positions = arange(x.shape()[size_t(axis)]);
  Shape along(size_t(x.dim()), 1);
  along[size_t(axis)] = x.shape()[size_t(axis)];
  return cast(eq(reshape(positions, along), index), x.dtype());
}

}  // namespace

BATON_ONNX_IMPORTER("ArgMax", [](NodeContext& c) -> Outputs {
  return arg_reduce(c, [](const Tensor& x, int64_t d, bool k) { return argmax(x, d, k); });
});
BATON_ONNX_IMPORTER("ArgMin", [](NodeContext& c) -> Outputs {
  return arg_reduce(c, [](const Tensor& x, int64_t d, bool k) { return argmin(x, d, k); });
});
BATON_ONNX_IMPORTER("Softmax", [](NodeContext& c) -> Outputs {
  return softmax_like(c, [](const Tensor& x, int64_t d) { return softmax(x, d); });
});
BATON_ONNX_IMPORTER("LogSoftmax", [](NodeContext& c) -> Outputs {
  return softmax_like(c, [](const Tensor& x, int64_t d) { return log_softmax(x, d); });
});
BATON_ONNX_IMPORTER("Hardmax", [](NodeContext& c) -> Outputs { return softmax_like(c, hardmax); });

}  // namespace baton::onnx::detail
