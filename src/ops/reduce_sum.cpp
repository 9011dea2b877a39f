// sum (and mean, sum_to_size built on it), and sum_to_shape_of.
#include "baton/ops.h"
#include "kernels/cpu/copy.h"
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
      kernels::sum_into<T>(c.input(0), c.params<Dims>(), c.output().data<O>());
    });
  });
}

// The dims of a gradient g that a broadcast to it added or widened from `to`: g's extra
// leading dims, and those where `to` has 1 and g does not. Fails where the sizes differ
// otherwise.
template <class Fail>
Dims broadcast_dims(const Shape& g, const Shape& to, Fail fail) {
  if (g.size() < to.size()) fail();
  const size_t lead = g.size() - to.size();
  Dims dims;
  for (size_t d = 0; d < g.size(); ++d) {
    if (d < lead || (to[d - lead] == 1 && g[d] != 1)) dims.push_back(int64_t(d));
    else if (to[d - lead] != g[d]) fail();
  }
  return dims;
}

// Whether the dims to sum depend on sizes that are symbols the graph cannot compare: a
// value-sized op's `reshape_to_1` against a static 4 (equal, or 1, when it runs).
bool dims_to_sum_unknown(const Shape& g, const Shape& to) {
  if (g.size() < to.size()) return false;
  const size_t lead = g.size() - to.size();
  for (size_t d = lead; d < g.size(); ++d) {
    const int64_t want = to[d - lead], have = g[d];
    if (want != have && want != 1 && (sym::is_symbol(want) || sym::is_symbol(have))) return true;
  }
  return false;
}

// The kernel's parameter: the dims of g to sum, to the shape `like` has when it runs.
Dims dims_to_sum(const CallContext& c) {
  const Shape &g = c.input(0).shape(), &to = c.input(1).shape();
  return broadcast_dims(g, to, [&] { c.fail("cannot sum ", g, " to ", to); });
}

// out = g summed down to like's shape (the summed dims kept or not, the same elements).
void sum_to_shape_of_kernel(const KernelContext& c) {
  const Tensor& g = c.input(0);
  const Dims& dims = c.params<Dims>();
  if (dims.empty()) return kernels::copy_into(c.output(), g);  // g has like's shape (sum_into would sum all)
  kernels::visit_float(g.dtype(), "sum_to_shape_of", [&](auto tag) {
    using T = typename decltype(tag)::type;
    kernels::sum_into<T>(g, dims, c.output().data<T>());
  });
}

}  // namespace

// g summed down to like's shape, the summed dims chosen when it runs: the gradient of a
// broadcast between sizes the graph could not compare (sum_to_size(g, like)).
BATON_OP(sum_to_shape_of_op, "sum_to_shape_of")
    .inputs(2)
    .infer([](const InferContext& c) {
      require_float(c);
      if (c.input(1).dim() > c.input(0).dim()) c.fail("cannot sum ", c.input(0).shape(), " to ", c.input(1).shape());
      return TensorMeta{c.input(0).dtype(), c.input(1).shape()};
    })
    .params(dims_to_sum)
    .cpu(sum_to_shape_of_kernel)
    .grad([](const GradContext& c) {
      return Grads{c.grad_output() * full_like(c.input(0), 1, c.input(0).dtype()), Tensor()};
    })
    .cost(reduce_cost);

BATON_OP(sum_op, "sum")
    .inputs(1)
    .ints_attr("dims")
    .int_attr("keepdim")
    .fusion(Fusion::Reduction)
    .params(reduce_dims)
    .reads_channels_last({0})  // a conv bias gradient: a column sum over memory order
    .column_major({0})  // a linear bias gradient: each output a contiguous run
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
  const Dims dims = ops::broadcast_dims(x.shape(), shape, [&] {
    throw ShapeError("sum_to_size", str("cannot sum shape ", x.shape(), " to ", shape), loc);
  });
  Tensor s = sum(x, dims, /*keepdim=*/true, loc);
  return reshape(s, shape, loc);
}

Tensor sum_to_size(const Tensor& x, const Tensor& like, SourceLoc loc) {
  if (ops::dims_to_sum_unknown(x.shape(), like.shape()))
    return ops::call_many(ops::sum_to_shape_of_op, std::vector<Tensor>{x, like}, {}, loc)[0];
  return sum_to_size(x, like.shape(), loc);
}

Tensor Tensor::sum(SourceLoc loc) const { return baton::sum(*this, {}, false, loc); }
Tensor Tensor::mean(SourceLoc loc) const { return baton::mean(*this, {}, false, loc); }

}  // namespace baton
