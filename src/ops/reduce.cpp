// prod, max, min, logsumexp, argmax, argmin (ops) and var (composite).

#include <limits>

#include "kernels/cpu/arg_extreme.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/logsumexp.h"
#include "kernels/cpu/reduce.h"
#include "ops/reduce.h"

namespace baton::ops {
namespace {

using kernels::MaxFn;
using kernels::MinFn;

template <class T>
T lowest() {
  return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                              : std::numeric_limits<T>::lowest();
}
template <class T>
T highest() {
  return std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity()
                                              : std::numeric_limits<T>::max();
}

// Kernel folding f over the reduced elements; init(tag) gives the identity. The output
// keeps the input's dtype, or is i64 (prod of integers): only those pairs are compiled.
template <class F, class Init>
KernelFn fold_kernel(F f, Init init) {
  return [f, init](const KernelContext& c) {
    kernels::visit_dtype(c.input(0).dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      auto fold_into = [&](auto out_tag) {
        using O = typename decltype(out_tag)::type;
        kernels::fold<O, T>(c.input(0), c.params<Dims>(), c.output().data<O>(), O(init(out_tag)), f);
      };
      if (c.output().dtype() == c.input(0).dtype()) return fold_into(tag);
      if (c.output().dtype() != i64)
        throw DTypeError(c.op_name(), str("cannot fold ", c.input(0).dtype(), " into ", c.output().dtype()),
                         c.loc);
      fold_into(kernels::TypeTag<int64_t>{});
    });
  };
}

TensorMeta extremum_infer(const InferContext& c) {
  require_nonempty_reduction(c);
  return reduce_meta(c, c.input(0).dtype());
}

// The gradient goes to the elements equal to the max (min); ties share it evenly.
Grads extremum_grad(const GradContext& c) {
  const Tensor& x = c.input(0);
  Tensor hits = cast(eq(x, expand_back(c.output(), c)), x.dtype());
  Tensor share = hits / sum(hits, reduce_dims(c), /*keepdim=*/true);
  return {share * expand_back(c.grad_output(), c)};
}

// d prod / d x_i is the product of the other elements, computed without dividing by a
// zero: with no zero it is p / x_i; with one zero only that element gets the product of
// the rest; with more every element gets 0.
Grads prod_grad(const GradContext& c) {
  const Tensor& x = c.input(0);
  std::vector<int64_t> dims = reduce_dims(c);
  Tensor zero = scalar_tensor(0.0, x.dtype()), one = scalar_tensor(1.0, x.dtype());
  Tensor is_zero = eq(x, zero);
  Tensor zeros_in = sum(cast(is_zero, x.dtype()), dims, /*keepdim=*/true);
  Tensor safe = where(is_zero, one, x);
  Tensor p = prod(safe, dims, /*keepdim=*/true);
  Tensor others = where(is_zero, where(eq(zeros_in, one), p, zero),
                        where(eq(zeros_in, zero), p / safe, zero));
  return {others * expand_back(c.grad_output(), c)};
}

void logsumexp_kernel(const KernelContext& c) {
  kernels::visit_float(c.output().dtype(), c.op_name().c_str(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    kernels::logsumexp_into(c.input(0), c.params<Dims>(), c.output().data<T>());
  });
}

template <bool kMax>
void arg_kernel(const KernelContext& c) {
  kernels::arg_extreme_into(c.input(0), c.params<Dims>(), kMax, c.output().data<int64_t>());
}

TensorMeta arg_infer(const InferContext& c) {
  require_nonempty_reduction(c);
  return reduce_meta(c, i64);
}

}  // namespace

BATON_OP(prod_op, "prod")
    .inputs(1)
    .ints_attr("dims")
    .int_attr("keepdim")
    .fusion(Fusion::Reduction)
    .params(reduce_dims)
    .infer([](const InferContext& c) {
      DType t = c.input(0).dtype();
      return reduce_meta(c, is_floating(t) ? t : i64);
    })
    .cpu(fold_kernel(kernels::MulFn{}, [](auto) { return 1; }))
    .grad(prod_grad)
    .cost(reduce_cost)
    .onnx("ReduceProd");

BATON_OP(max_op, "max")
    .inputs(1)
    .ints_attr("dims")
    .int_attr("keepdim")
    .fusion(Fusion::Reduction)
    .params(reduce_dims)
    .infer(extremum_infer)
    .cpu(fold_kernel(MaxFn{}, [](auto tag) { return lowest<typename decltype(tag)::type>(); }))
    .grad(extremum_grad)
    .cost(reduce_cost)
    .onnx("ReduceMax");

BATON_OP(min_op, "min")
    .inputs(1)
    .ints_attr("dims")
    .int_attr("keepdim")
    .fusion(Fusion::Reduction)
    .params(reduce_dims)
    .infer(extremum_infer)
    .cpu(fold_kernel(MinFn{}, [](auto tag) { return highest<typename decltype(tag)::type>(); }))
    .grad(extremum_grad)
    .cost(reduce_cost)
    .onnx("ReduceMin");

BATON_OP(logsumexp_op, "logsumexp")
    .inputs(1)
    .ints_attr("dims")
    .int_attr("keepdim")
    .fusion(Fusion::Reduction)
    .params(reduce_dims)
    .infer([](const InferContext& c) {
      require_float(c);
      return reduce_meta(c, c.input(0).dtype());
    })
    .cpu(logsumexp_kernel)
    .grad([](const GradContext& c) {
      Tensor weights = exp(c.input(0) - expand_back(c.output(), c));  // softmax over dims
      return Grads{weights * expand_back(c.grad_output(), c)};
    })
    .cost(reduce_cost)
    .onnx("ReduceLogSumExp");

BATON_OP(argmax_op, "argmax")
    .inputs(1)
    .ints_attr("dims")
    .int_attr("keepdim")
    .fusion(Fusion::Reduction)
    .params(reduce_dims)
    .infer(arg_infer)
    .cpu(arg_kernel<true>)
    .cost(reduce_cost)
    .onnx("ArgMax");

BATON_OP(argmin_op, "argmin")
    .inputs(1)
    .ints_attr("dims")
    .int_attr("keepdim")
    .fusion(Fusion::Reduction)
    .params(reduce_dims)
    .infer(arg_infer)
    .cpu(arg_kernel<false>)
    .cost(reduce_cost)
    .onnx("ArgMin");

}  // namespace baton::ops

namespace baton {

Tensor prod(const Tensor& x, const Dims& dims, bool keepdim, SourceLoc loc) {
  return ops::call(ops::prod_op, {x}, ops::reduce_attrs(dims, keepdim), loc);
}

Tensor max(const Tensor& x, const Dims& dims, bool keepdim, SourceLoc loc) {
  return ops::call(ops::max_op, {x}, ops::reduce_attrs(dims, keepdim), loc);
}

Tensor min(const Tensor& x, const Dims& dims, bool keepdim, SourceLoc loc) {
  return ops::call(ops::min_op, {x}, ops::reduce_attrs(dims, keepdim), loc);
}

Tensor logsumexp(const Tensor& x, const Dims& dims, bool keepdim, SourceLoc loc) {
  return ops::call(ops::logsumexp_op, {ops::float_input(x, loc)}, ops::reduce_attrs(dims, keepdim), loc);
}

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim, SourceLoc loc) {
  return ops::call(ops::argmax_op, {x}, ops::reduce_attrs({dim}, keepdim), loc);
}

Tensor argmin(const Tensor& x, int64_t dim, bool keepdim, SourceLoc loc) {
  return ops::call(ops::argmin_op, {x}, ops::reduce_attrs({dim}, keepdim), loc);
}

// Two passes (mean, then squared deviations) keep the error small for data far from 0.
// n - correction <= 0 divides by 0, giving inf or nan as PyTorch does.
Tensor var(const Tensor& x_in, const Dims& dims, bool keepdim, int64_t correction, SourceLoc loc) {
  Tensor x = ops::float_input(x_in, loc);
  ops::SizeCount n = ops::reduced_count("var", x, dims, x.dtype(), loc);
  Tensor d = sub(x, mean(x, dims, /*keepdim=*/true, loc), loc);
  Tensor squares = sum(mul(d, d, loc), dims, keepdim, loc);
  return n.apply([&](auto k) {
    return div(squares, ops::at_least(k - double(correction), 0, loc), loc);
  });
}

}  // namespace baton
