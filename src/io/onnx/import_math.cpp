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

}  // namespace

// Trilu(x, k = 0) {upper = 1}: the triangle of the last two dims, k the diagonal offset.
BATON_ONNX_IMPORTER("Trilu", [](NodeContext& c) -> Outputs {
  const Tensor& x = c.input(0);
  const int64_t k = c.has_input(1) ? one_int_input(c, 1, "k") : 0;
  if (x.dim() < 2) c.fail(str("input 0 must have at least 2 dims, not shape ", x.shape()));
  return {c.attr_int("upper", 1) != 0 ? triu(x, k) : tril(x, k)};
});

// CumSum(x, axis) {exclusive = 0, reverse = 0}.
BATON_ONNX_IMPORTER("CumSum", [](NodeContext& c) -> Outputs {
  const Tensor& x = c.input(0);
  const int64_t axis = normalize_axis(c, one_int_input(c, 1, "axis"), x.dim());
  return {cumsum(x, axis, c.attr_int("exclusive", 0) != 0, c.attr_int("reverse", 0) != 0)};
});

}  // namespace baton::onnx::detail
