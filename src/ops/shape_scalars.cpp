// Ops that read only their input's shape, never its data: element_count (how many
// elements x has over some dims) and full_like (a constant tensor of x's shape).
//
// They exist for graphs built with symbolic sizes (a graph built once for `batch` and run
// with any batch): a count or a shape taken as a C++ number while the graph is built would
// be baked into it, whereas these kernels read the sizes of the concrete tensor every time
// the graph runs. Eager code keeps its plain numbers (see ops::size_count in common.h).
#include <algorithm>

#include "baton/ops.h"
#include "kernels/cpu/dispatch.h"
#include "ops/common.h"

namespace baton::ops {
namespace {

// The product of `shape` over dims (all when empty). A 0-d shape counts 1 for dim 0 or -1,
// as reductions treat it.
int64_t count_over(const CallContext& c, const Shape& shape) {
  int64_t count = 1;
  for (int64_t d : reduction_dims(c.attrs.ints("dims"), int64_t(shape.size()), c))
    if (d < int64_t(shape.size())) count *= shape[size_t(d)];
  return count;
}

// Writes value, converted, to every element of out (contiguous).
void fill(const Tensor& out, double value) {
  kernels::visit_dtype(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    std::fill_n(out.data<T>(), out.numel(), T(value));
  });
}

Cost no_cost(const CallContext&, std::span<const TensorMeta>) { return {}; }

}  // namespace

// attrs dims (empty = all), dtype. The infer rule only checks dims, so it runs unchanged on
// symbolic shapes; the kernel counts the concrete input's sizes. Not differentiable.
BATON_OP(element_count_op, "element_count")
    .inputs(1)
    .ints_attr("dims")
    .dtype_attr("dtype")
    .infer([](const InferContext& c) {
      reduction_dims(c.attrs.ints("dims"), c.input(0).dim(), c);  // IndexError on a bad dim
      return TensorMeta{c.attrs.dtype("dtype"), {}};
    })
    .params([](const CallContext& c) { return count_over(c, c.input(0).shape()); })  // of the concrete sizes
    .cpu([](const KernelContext& c) { fill(c.output(), double(c.params<int64_t>())); })
    .cost(no_cost)
    .onnx("");  // no single ONNX op: Shape + Gather + ReduceProd (+ Cast)

// attrs value, dtype: the output has x's shape and every element value. Not differentiable.
BATON_OP(full_like_op, "full_like")
    .inputs(1)
    .float_attr("value")
    .dtype_attr("dtype")
    .infer([](const InferContext& c) { return TensorMeta{c.attrs.dtype("dtype"), c.input(0).shape()}; })
    .params([](const CallContext& c) { return c.attrs.f("value"); })
    .cpu([](const KernelContext& c) { fill(c.output(), c.params<double>()); })
    .cost([](const CallContext&, std::span<const TensorMeta> out) {
      return Cost{0, double(out[0].shape.numel()) * double(dtype_size(out[0].dtype))};
    })
    .onnx("ConstantOfShape");

}  // namespace baton::ops

namespace baton {

Tensor element_count(const Tensor& x, std::vector<int64_t> dims, DType dtype, SourceLoc loc) {
  return ops::call(ops::element_count_op, {x}, {{"dims", std::move(dims)}, {"dtype", dtype}}, loc);
}

Tensor full_like(const Tensor& x, Scalar value, DType dtype, SourceLoc loc) {
  if (ops::symbolic_size(value))  // a size known only when the graph runs: added as a graph value
    return add(ops::call(ops::full_like_op, {x}, {{"value", 0.0}, {"dtype", dtype}}, loc), value, loc);
  return ops::call(ops::full_like_op, {x}, {{"value", value.value()}, {"dtype", dtype}}, loc);
}

}  // namespace baton
