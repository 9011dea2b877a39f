// slice: a strided view along one dim, and slice_backward, which scatters a gradient
// back into zeros of the sliced tensor's shape (the two are each other's gradient).
#include <algorithm>

#include "baton/ops.h"
#include "kernels/cpu/copy.h"
#include "ops/common.h"

namespace baton::ops {
namespace {

struct Range {
  int64_t dim, start, size, step;
};

// Python slicing rules: negative start/end count from the end, both clamp to [0, n].
Range resolve(const Shape& shape, const CallContext& c) {
  const int64_t rank = int64_t(shape.size());
  if (rank == 0) c.fail("cannot slice a 0-d tensor");
  const int64_t dim = normalize_dim(c.attrs.i("dim"), rank, c);
  const int64_t step = c.attrs.i("step");
  if (step <= 0) c.fail<ValueError>("step must be positive, got ", step);
  const int64_t n = shape[size_t(dim)];
  auto clamp = [n](int64_t v) { return std::clamp(v < 0 ? v + n : v, int64_t(0), n); };
  int64_t start = clamp(c.attrs.i("start")), end = clamp(c.attrs.i("end"));
  int64_t size = end > start ? (end - start + step - 1) / step : 0;
  return {dim, start, size, step};
}

// The region of `full` that a slice with these attrs selects.
Tensor region(const Tensor& full, const Range& r) {
  Shape shape = full.shape(), strides = full.strides();
  int64_t offset = full.offset() + r.start * strides[size_t(r.dim)];
  shape[size_t(r.dim)] = r.size;
  strides[size_t(r.dim)] *= r.step;
  return make_view(full, shape, strides, offset);
}

Attrs slice_attrs(const Attrs& a) {
  return {{"dim", a.i("dim")}, {"start", a.i("start")}, {"end", a.i("end")}, {"step", a.i("step")}};
}

}  // namespace

extern OpDef& slice_backward_op;

BATON_OP(slice_op, "slice")
    .fusion(Fusion::Injective)
    .view([](const CallContext& c) { return region(c.input(0), resolve(c.input(0).shape(), c)); })
    .grad([](const GradContext& c) {
      Attrs a = slice_attrs(c.attrs);
      a.set("shape", c.input(0).shape().vec());
      return Grads{call(slice_backward_op, {c.grad_output()}, a, c.loc)};
    })
    .cost([](const CallContext&, std::span<const TensorMeta>) { return Cost{}; })
    .onnx("Slice");

// Input: the gradient of a slice; attr "shape": the shape of the sliced tensor.
OpDef& slice_backward_op = define_op("slice_backward")
    .fusion(Fusion::Injective)
    .infer([](const InferContext& c) {
      Shape shape(c.attrs.ints("shape"));
      Range r = resolve(shape, c);
      Shape expected = shape;
      expected[size_t(r.dim)] = r.size;
      if (!(expected == c.input(0).shape()))
        c.fail("gradient shape does not match the slice ", expected, " of ", shape);
      return TensorMeta{c.input(0).dtype(), shape};
    })
    .cpu([](const KernelContext& c) {
      Tensor& out = c.output();
      kernels::copy_into(out, scalar_tensor(0, out.dtype()));
      kernels::copy_into(region(out, resolve(out.shape(), c)), c.input(0));
    })
    .grad([](const GradContext& c) {
      return Grads{call(slice_op, {c.grad_output()}, slice_attrs(c.attrs), c.loc)};
    });

}  // namespace baton::ops

namespace baton {

Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step,
             SourceLoc loc) {
  return ops::call(ops::slice_op, {x},
                   {{"dim", dim}, {"start", start}, {"end", end}, {"step", step}}, loc);
}

}  // namespace baton
