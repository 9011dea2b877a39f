// sum (and mean, sum_to_size built on it).
#include "baton/ops.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/reduce.h"
#include "ops/common.h"

namespace baton::ops {
namespace {

std::vector<int64_t> dims_of(const CallContext& c) {
  return reduction_dims(c.attrs.ints("dims"), c.input(0).dim(), c);
}

// Gradient of a reduction: the output gradient broadcast back over the reduced dims.
Tensor expand_back(const Tensor& g, const CallContext& c) {
  const Tensor& x = c.input(0);
  Shape kept = reduced_shape(x.shape(), dims_of(c), /*keepdim=*/true);
  return expand(reshape(g, kept), x.shape());
}

}  // namespace

BATON_OP(sum_op, "sum")
    .fusion(Fusion::Reduction)
    .infer([](const InferContext& c) {
      DType t = c.input(0).dtype();
      return TensorMeta{t == b8 || t == i32 ? i64 : t,
                        reduced_shape(c.input(0).shape(), dims_of(c), c.attrs.i("keepdim") != 0)};
    })
    .cpu([](const KernelContext& c) {
      auto rows = kernels::reduction_rows(c.input(0), dims_of(c));
      kernels::visit_dtype(c.input(0).dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        kernels::visit_dtype(c.output().dtype(), [&](auto out_tag) {
          using O = typename decltype(out_tag)::type;
          kernels::reduce_rows<O, T>(rows, c.output().data<O>(),
                                     [](const T* p, int64_t n) { return O(kernels::sum_row<O>(p, n)); });
        });
      });
    })
    .grad([](const GradContext& c) { return Grads{expand_back(c.grad_output(), c)}; })
    .onnx("ReduceSum");

}  // namespace baton::ops

namespace baton {

Tensor sum(const Tensor& x, const Dims& dims, bool keepdim, SourceLoc loc) {
  return ops::call(ops::sum_op, {x}, {{"dims", dims}, {"keepdim", int64_t(keepdim)}}, loc);
}

Tensor mean(const Tensor& x, const Dims& dims, bool keepdim, SourceLoc loc) {
  ops::Attrs none;
  ops::CallContext c{ops::sum_op, {&x, 1}, none, loc};
  int64_t count = 1;
  for (int64_t d : ops::reduction_dims(dims, x.dim(), c)) count *= x.shape()[size_t(d)];
  Tensor total = sum(is_floating(x.dtype()) ? x : cast(x, f32, loc), dims, keepdim, loc);
  return div(total, Scalar(double(count)), loc);
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
