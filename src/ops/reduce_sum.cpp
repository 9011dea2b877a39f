// sum (and mean, sum_to_size built on it).
#include "baton/ops.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/reduce.h"
#include "ops/reduce.h"

namespace baton::ops {
namespace {

// Integers and bools sum to i64 (as in PyTorch), floats keep their dtype.
DType sum_dtype(DType t) { return is_floating(t) ? t : i64; }

void sum_kernel(const KernelContext& c) {
  kernels::visit_dtype(c.input(0).dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    kernels::visit_dtype(c.output().dtype(), [&](auto out_tag) {
      using O = typename decltype(out_tag)::type;
      kernels::sum_into<T>(c.input(0), reduce_dims(c), c.output().data<O>());
    });
  });
}

}  // namespace

BATON_OP(sum_op, "sum")
    .inputs(1)
    .ints_attr("dims")
    .int_attr("keepdim")
    .fusion(Fusion::Reduction)
    .reads_channels_last({0})  // a conv bias gradient: a column sum over memory order
    .infer([](const InferContext& c) { return reduce_meta(c, sum_dtype(c.input(0).dtype())); })
    .cpu(sum_kernel)
    .grad([](const GradContext& c) { return Grads{expand_back(c.grad_output(), c)}; })
    .cost(reduce_cost)
    .onnx("ReduceSum");

}  // namespace baton::ops

namespace baton {

Tensor sum(const Tensor& x, const Dims& dims, bool keepdim, SourceLoc loc) {
  return ops::call(ops::sum_op, {x}, ops::reduce_attrs(dims, keepdim), loc);
}

// Integers average to f32, as their sum would be truncated otherwise.
Tensor mean(const Tensor& x, const Dims& dims, bool keepdim, SourceLoc loc) {
  const DType t = is_floating(x.dtype()) ? x.dtype() : f32;
  ops::SizeCount count = ops::reduced_count("mean", x, dims, t, loc);
  Tensor total = sum(x.dtype() == t ? x : cast(x, t, loc), dims, keepdim, loc);
  return count.apply([&](auto n) { return div(total, n, loc); });
}

Tensor sum_to_size(const Tensor& x, const Shape& shape, SourceLoc loc) {
  if (x.shape() == shape) return x;
  const size_t lead = size_t(x.dim()) - shape.size();
  if (x.dim() < int64_t(shape.size()))
    throw ShapeError("sum_to_size", str("cannot sum shape ", x.shape(), " to ", shape), loc);
  Dims dims;
  for (size_t d = 0; d < size_t(x.dim()); ++d) {
    if (d < lead) dims.push_back(int64_t(d));
    else if (shape[d - lead] == 1 && x.shape()[d] != 1) dims.push_back(int64_t(d));
    else if (shape[d - lead] != x.shape()[d])
      throw ShapeError("sum_to_size", str("cannot sum shape ", x.shape(), " to ", shape), loc);
  }
  Tensor s = sum(x, dims, /*keepdim=*/true, loc);
  return reshape(s, shape, loc);
}

Tensor Tensor::sum(SourceLoc loc) const { return baton::sum(*this, {}, false, loc); }
Tensor Tensor::mean(SourceLoc loc) const { return baton::mean(*this, {}, false, loc); }

}  // namespace baton
