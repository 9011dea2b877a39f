// unsqueeze_at and squeeze_at: insert or remove size-1 dims at the positions a 1-D integer
// tensor holds, read when the op runs (ONNX's Unsqueeze and Squeeze take their axes as an
// input from opset 13). Which dims move is a value, so a graph node's output dims are fresh
// symbols a run binds (OpDef::sized_by_values, as for reshape_to); the rank is known from
// the number of positions. The output is a copy, never a view of x.
//   %2 = unsqueeze_at(%x, %axes) {dims=[unsqueeze_at_1, unsqueeze_at_2, unsqueeze_at_3]}
// Gradient: the output gradient reshaped back to x's sizes.
#include <algorithm>

#include "baton/ops.h"
#include "ops/common.h"

namespace baton::ops {
namespace {

void check_positions_input(const CallContext& c) {
  const Tensor& p = c.input(1);
  if (!(p.dtype() == DType::i64 || p.dtype() == DType::i32) || p.dim() != 1 || sym::is_symbol(p.shape()[0]))
    c.fail<DTypeError>("the dims must be a 1-D tensor of integers of a known length, got ", p.dtype(), p.shape());
}

// The positions, each normalized into [0, rank) and listed once.
std::vector<int64_t> positions(const CallContext& c, int64_t rank) {
  check_positions_input(c);
  std::vector<int64_t> dims = integer_values(c.input(1));
  for (int64_t& d : dims) {
    if (d < -rank || d >= rank) c.fail<IndexError>("dim ", d, " is out of range for rank ", rank);
    d = d < 0 ? d + rank : d;
  }
  std::vector<int64_t> sorted = dims;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    c.fail<ValueError>("lists a dim twice: ", Shape(dims));
  return dims;
}

Shape unsqueezed_shape(const CallContext& c) {
  const Shape& x = c.input(0).shape();
  const int64_t rank = int64_t(x.size()) + c.input(1).numel();
  std::vector<char> inserted(size_t(rank), 0);
  for (int64_t d : positions(c, rank)) inserted[size_t(d)] = 1;
  Shape out(static_cast<size_t>(rank));
  for (size_t d = 0, from = 0; d < out.size(); ++d) out[d] = inserted[d] ? 1 : x[from++];
  return out;
}

Shape squeezed_shape(const CallContext& c) {
  const Shape& x = c.input(0).shape();
  std::vector<char> removed(x.size(), 0);
  for (int64_t d : positions(c, int64_t(x.size()))) {
    if (x[size_t(d)] != 1) c.fail<ValueError>("squeezes dim ", d, " of ", x, ", which is not 1");
    removed[size_t(d)] = 1;
  }
  Shape out;
  for (size_t d = 0; d < x.size(); ++d)
    if (!removed[d]) out.push_back(x[d]);
  return out;
}

// A graph node's dims: `rank` fresh symbols (or sizes, from graph text).
TensorMeta infer_dims(const InferContext& c, int64_t rank) {
  check_positions_input(c);
  if (!c.attrs.has("dims"))
    c.fail<ValueError>("which dims move are values: a graph node of it needs `dims` symbols");
  const Shape dims(c.attrs.ints("dims"));
  if (int64_t(dims.size()) != rank) c.fail("dims ", dims, " must give the ", rank, " dims of the result");
  for (int64_t d : dims)
    if (!sym::is_valid_dim(d)) c.fail<ValueError>("dims must be sizes or symbols, got ", dims);
  return {c.input(0).dtype(), dims};
}

Grads back_to_x(const GradContext& c) { return Grads{reshape_to(c.grad_output(), sizes_of(c.input(0))), Tensor()}; }

}  // namespace

BATON_OP(unsqueeze_at_op, "unsqueeze_at")
    .inputs(2)
    .ints_attr("dims", -1, OpDef::optional)
    .value_sized([](const CallContext& c) { return std::vector<Tensor>{reshape(c.input(0), unsqueezed_shape(c)).clone()}; })
    .infer([](const InferContext& c) { return infer_dims(c, c.input(0).dim() + c.input(1).numel()); })
    .grad(back_to_x)
    .cost(copy_cost);

BATON_OP(squeeze_at_op, "squeeze_at")
    .inputs(2)
    .ints_attr("dims", -1, OpDef::optional)
    .value_sized([](const CallContext& c) { return std::vector<Tensor>{reshape(c.input(0), squeezed_shape(c)).clone()}; })
    .infer([](const InferContext& c) { return infer_dims(c, c.input(0).dim() - c.input(1).numel()); })
    .grad(back_to_x)
    .cost(copy_cost);

}  // namespace baton::ops

namespace baton {
namespace {

Tensor call_moving_dims(const ops::OpDef& op, const Tensor& x, const Tensor& dims, int64_t rank, SourceLoc loc) {
  const Tensor inputs[] = {x, dims};
  const std::vector<int64_t> unknown(size_t(std::max<int64_t>(rank, 0)), -1);
  return ops::call_many(op, inputs, ops::with_dim_symbols({}, inputs, op.name, unknown), loc)[0];
}

int64_t count_of(const Tensor& dims) { return dims.dim() == 1 && !sym::is_symbol(dims.shape()[0]) ? dims.shape()[0] : 0; }

}  // namespace

Tensor unsqueeze_at(const Tensor& x, const Tensor& dims, SourceLoc loc) {
  return call_moving_dims(ops::unsqueeze_at_op, x, dims, x.dim() + count_of(dims), loc);
}

Tensor squeeze_at(const Tensor& x, const Tensor& dims, SourceLoc loc) {
  return call_moving_dims(ops::squeeze_at_op, x, dims, x.dim() - count_of(dims), loc);
}

}  // namespace baton
