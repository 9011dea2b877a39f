// sum_over: the sum over the dims a 1-D integer tensor holds, read when the op runs (ONNX
// ReduceSum's axes input, TensorFlow's reduce_sum with an axis tensor). Which dims shrink
// is a value, so a graph node's output dims are symbols a run binds (OpDef::sized_by_values,
// as for reshape_to), except a static size of 1, which stays 1 with keepdim:
//   %2 = sum_over(%x, %axes) {keepdim=1, dims=[sum_over_1, 1, sum_over_2]}
// The rank is known: x's with keepdim, else x's less the number of dims given.
//
// Gradient: the output gradient reshaped to x's rank with 1 at each summed dim, then
// expanded to x; that shape is computed in the graph from the dims, so it too is read
// when it runs.
#include "baton/ops.h"
#include "ops/common.h"

namespace baton::ops {
namespace {

// The dims input: 1-D integers, at least one (no dims would mean every dim, a rank no
// graph could know from the length alone).
void check_dims_input(const CallContext& c) {
  const Tensor& dims = c.input(1);
  if (!(dims.dtype() == DType::i64 || dims.dtype() == DType::i32) || dims.dim() != 1)
    c.fail<DTypeError>("the dims must be a 1-D tensor of integers, got ", dims.dtype(), dims.shape());
  if (dims.shape()[0] == 0) c.fail("needs at least one dim to sum over (sum sums every dim)");
}

std::vector<int64_t> dims_values(const CallContext& c) {
  check_dims_input(c);
  return integer_values(c.input(1));
}

TensorMeta infer_sum_over(const InferContext& c) {
  check_dims_input(c);
  const Tensor& x = c.input(0);
  const int64_t count = c.input(1).shape()[0];
  if (sym::is_symbol(count)) c.fail("the number of dims must be known, got ", c.input(1).shape());
  if (!c.attrs.has("dims"))
    c.fail<ValueError>("which dims it sums are values: a graph node of it needs `dims` symbols");
  const Shape dims(c.attrs.ints("dims"));
  const int64_t rank = c.attrs.i("keepdim") != 0 ? x.dim() : x.dim() - count;
  if (int64_t(dims.size()) != rank) c.fail("dims ", dims, " must give the ", rank, " dims of the result");
  for (int64_t d : dims)
    if (!sym::is_valid_dim(d)) c.fail<ValueError>("dims must be sizes or symbols, got ", dims);
  return {is_floating(x.dtype()) ? x.dtype() : DType::i64, dims};
}

// 1 at each dim the dims tensor names (negative ones count from the end), x's size elsewhere.
Tensor kept_sizes(const Tensor& x, const Tensor& dims) {
  const int64_t rank = x.dim();
  const Tensor named = cast(dims, DType::i64).reshape({1, -1});
  const Tensor wrapped = where(lt(named, int64_t(0)), named + rank, named);
  const Tensor summed = sum(cast(eq(arange(0, double(rank), 1, DType::i64).reshape({rank, 1}), wrapped), DType::i64), {1});
  return where(gt(summed, int64_t(0)), ones({rank}, DType::i64), sizes_of(x));
}

Tensor sum_over_back(const GradContext& c) {
  const Tensor& x = c.input(0);
  return expand_to(reshape_to(c.grad_output(), kept_sizes(x, c.input(1))), sizes_of(x));
}

}  // namespace

BATON_OP(sum_over_op, "sum_over")
    .inputs(2)
    .int_attr("keepdim")
    .ints_attr("dims", -1, OpDef::optional)
    .value_sized([](const CallContext& c) {
      return std::vector<Tensor>{sum(c.input(0), dims_values(c), c.attrs.i("keepdim") != 0, c.loc)};
    })
    .infer(infer_sum_over)
    .grad([](const GradContext& c) { return Grads{sum_over_back(c), Tensor()}; })
    .cost([](const CallContext& c, std::span<const TensorMeta>) {
      const double n = double(c.input(0).numel());
      return Cost{n, n * double(dtype_size(c.input(0).dtype()))};
    });

}  // namespace baton::ops

namespace baton {

Tensor sum_over(const Tensor& x, const Tensor& dims, bool keepdim, SourceLoc loc) {
  const Tensor inputs[] = {x, dims};
  const int64_t count = dims.dim() == 1 ? dims.shape()[0] : 0;
  const int64_t rank = keepdim ? x.dim() : x.dim() - count;
  // With keepdim a static size of 1 stays 1 whether summed or not; all else is a value.
  std::vector<int64_t> known(size_t(std::max<int64_t>(rank, 0)), -1);
  if (keepdim)
    for (size_t d = 0; d < known.size(); ++d)
      if (x.shape()[d] == 1) known[d] = 1;
  const ops::Attrs attrs{{"keepdim", int64_t(keepdim)}};
  return ops::call_many(ops::sum_over_op, inputs, ops::with_dim_symbols(attrs, inputs, "sum_over", known), loc)[0];
}

}  // namespace baton
