// max_unpool (ONNX MaxUnpool, PyTorch max_unpool): the inverse of max pooling with
// indices. The output, of the shape given, is zero but for out.flat[indices.flat[i]] =
// x.flat[i], the indices counting over the whole flattened output (ONNX's MaxPool Indices).
// Where indices repeat, the last write wins (pooling windows that overlap on one maximum
// write the same value). An index outside the output is an IndexError.
//
// Gradient wrt x: the output gradient read back at the indices (index_select); none for
// the integer indices. Where indices repeat, each x written there gets that gradient,
// though only the last shows (max pooling repeats an index only with one value).
//
//   %2 = max_unpool(%x, %indices) {output_shape=[1, 1, 4, 4]}
#include <algorithm>
#include <cstring>

#include "baton/ops.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/dispatch.h"
#include "ops/common.h"

namespace baton::ops {
namespace {

TensorMeta infer(const InferContext& c) {
  const Tensor &x = c.input(0), &indices = c.input(1);
  if (x.dtype() == b8) c.fail<DTypeError>("expects a numeric tensor, got ", x.dtype());
  if (indices.dtype() != i64) c.fail<DTypeError>("indices must be i64, got ", indices.dtype());
  if (!(indices.shape() == x.shape())) c.fail("indices must have x's shape ", x.shape(), ", got ", indices.shape());
  const Shape out(c.attrs.ints("output_shape"));
  for (int64_t d : out)
    if (d < 0) c.fail<ValueError>("output_shape must not be negative, got ", out);
  return {x.dtype(), out};
}

void kernel(const KernelContext& c) {
  const Tensor x = kernels::dense(c.input(0)), indices = kernels::dense(c.input(1));
  const Tensor& out = c.output();
  std::memset(out.raw_data(), 0, out.nbytes());
  const int64_t n = x.numel(), size = out.numel();
  const int64_t* at = indices.data<int64_t>();
  for (int64_t i = 0; i < n; ++i)
    if (at[i] < 0 || at[i] >= size)
      c.fail<IndexError>("index ", at[i], " at flat position ", i, " is outside the output of ", size,
                         " elements ", out.shape());
  kernels::visit_numeric(x.dtype(), "max_unpool", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* in = x.data<T>();
    T* o = out.data<T>();
    for (int64_t i = 0; i < n; ++i) o[at[i]] = in[i];  // in order: the last write wins
  });
}

}  // namespace

BATON_OP(max_unpool_op, "max_unpool")
    .inputs(2)
    .ints_attr("output_shape")
    .infer(infer)
    .cpu(kernel)
    .grad([](const GradContext& c) {
      const Tensor flat_grad = reshape(c.grad_output(), Shape{-1}, c.loc);
      const Tensor flat_indices = reshape(c.input(1), Shape{-1}, c.loc);
      return Grads{reshape(index_select(flat_grad, 0, flat_indices, c.loc), c.input(0).shape(), c.loc), Tensor()};
    })
    .cost([](const CallContext& c, std::span<const TensorMeta> out) {
      return Cost{0, double(out[0].shape.numel() + 2 * c.input(0).numel()) * double(dtype_size(out[0].dtype))};
    })
    .onnx("MaxUnpool");

}  // namespace baton::ops

namespace baton {

Tensor max_unpool(const Tensor& x, const Tensor& indices, const Shape& output_shape, SourceLoc loc) {
  return ops::call(ops::max_unpool_op, {x, indices}, {{"output_shape", output_shape.vec()}}, loc);
}

}  // namespace baton
