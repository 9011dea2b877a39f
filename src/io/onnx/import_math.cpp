// ONNX math ops with attributes or known operands: Trilu (tril/triu) and CumSum. The
// unary math ops without attributes (Floor, Tan, Asinh...) need no entry: their OpDefs
// name them (importer.cpp, direct_op).
#include "baton/ops.h"
#include "io/onnx/importer.h"

namespace baton::onnx::detail {
namespace {

// A known integer input holding one value (Trilu's k, CumSum's axis).
int64_t one_int_input(const NodeContext& c, size_t i, const char* what) {
  const std::vector<int64_t> v = c.ints_input(i);
  if (v.size() != 1) c.fail(str(what, " (input ", i, ") must hold one integer, not ", v.size()));
  return v[0];
}

// The triangle of x with a diagonal offset k read when the model runs: the elements whose
// column minus row is at least k (upper) or at most k, the rest 0.
Tensor triangle_by_value(const NodeContext& c, const Tensor& x, const Tensor& k, bool upper) {
  if (k.numel() != 1) c.fail(str("k (input 1) must hold one integer, not shape ", k.shape()));
  const int64_t rows = c.static_dim(x, x.dim() - 2, "a triangle with k computed"),
                cols = c.static_dim(x, x.dim() - 1, "a triangle with k computed");
  const Tensor offset = reshape(arange(cols), Shape{1, cols}) - reshape(arange(rows), Shape{rows, 1});
  const Tensor diagonal = reshape(cast(k, DType::i64), Shape{});
  return where(upper ? ge(offset, diagonal) : le(offset, diagonal), x, full_like(x, 0, x.dtype()));
}

}  // namespace

// Trilu(x, k = 0) {upper = 1}: the triangle of the last two dims, k the diagonal offset.
BATON_ONNX_IMPORTER("Trilu", [](NodeContext& c) -> Outputs {
  const Tensor& x = c.input(0);
  if (x.dim() < 2) c.fail(str("input 0 must have at least 2 dims, not shape ", x.shape()));
  if (c.computed_from_input_values(1)) return {triangle_by_value(c, x, c.input(1), c.attr_int("upper", 1) != 0)};
  const int64_t k = c.has_input(1) ? one_int_input(c, 1, "k") : 0;
  return {c.attr_int("upper", 1) != 0 ? triu(x, k) : tril(x, k)};
});

// CumSum(x, axis) {exclusive = 0, reverse = 0}; an axis computed from the model inputs'
// values is read when the model runs.
BATON_ONNX_IMPORTER("CumSum", [](NodeContext& c) -> Outputs {
  const Tensor& x = c.input(0);
  const bool exclusive = c.attr_int("exclusive", 0) != 0, reverse = c.attr_int("reverse", 0) != 0;
  if (c.computed_from_input_values(1)) return {cumsum(x, c.input(1), exclusive, reverse)};
  const int64_t axis = normalize_axis(c, one_int_input(c, 1, "axis"), x.dim());
  return {cumsum(x, axis, exclusive, reverse)};
});

}  // namespace baton::onnx::detail
