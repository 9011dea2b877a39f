// The building blocks of unary element-wise ops: one functor, one line of kernel.
#pragma once
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/element_fns.h"
#include "kernels/cpu/loops.h"
#include "baton/ops.h"
#include "ops/common.h"

// Functor lambdas are marked `[](auto x) BATON_ELEMENT_FN { ... }` (element_fns.h says why).

namespace baton::ops {

// f applied to every element of a floating input.
template <class F>
void map_unary_float(const KernelContext& c, F f) {
  kernels::visit_float(c.output().dtype(), c.op_name().c_str(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    kernels::map_elements<T, T>(c.output(), [f](T x) BATON_ELEMENT_FN { return T(f(x)); }, c.input(0));
  });
}

// Kernel applying f to every element, for floating dtypes.
template <class F>
KernelFn unary_float_kernel(F f) {
  return [f](const KernelContext& c) { map_unary_float(c, f); };
}

// The same for an element function with a block form (f.block(d, a, n): f's values over n
// contiguous elements, computed faster: sin, cos). A contiguous output goes through it in
// pieces over threads, in place after a copy of an input laid out otherwise (a transposing
// copy costs less than the element function's slower form); other outputs element by element.
template <class F>
KernelFn unary_float_block_kernel(F f) {
  return [f](const KernelContext& c) {
    const Tensor &x = c.input(0), &out = c.output();
    if (!out.is_contiguous() || !(x.shape() == out.shape())) return map_unary_float(c, f);
    if (!x.is_contiguous()) kernels::copy_into(out, x);
    kernels::visit_float(out.dtype(), c.op_name().c_str(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* d = out.data<T>();
      const T* a = x.is_contiguous() ? x.data<T>() : d;
      kernels::parallel_range(out.numel(), [&](int64_t b, int64_t e) { kernels::map_block(f, d + b, a + b, e - b); });
    });
  };
}

// Kernel applying f to every element, for every numeric dtype.
template <class F>
KernelFn unary_numeric_kernel(F f) {
  return [f](const KernelContext& c) {
    kernels::visit_numeric(c.output().dtype(), c.op_name().c_str(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      kernels::map_elements<T, T>(c.output(), [f](T x) BATON_ELEMENT_FN { return T(f(x)); }, c.input(0));
    });
  };
}

// Kernel of float ops with attributes: make(c) reads them once and returns the functor.
template <class Make>
KernelFn unary_float_kernel_with(Make make) {
  return [make](const KernelContext& c) {
    kernels::visit_float(c.output().dtype(), c.op_name().c_str(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      auto f = make(c, tag);
      kernels::map_elements<T, T>(c.output(), [f](T x) BATON_ELEMENT_FN { return T(f(x)); }, c.input(0));
    });
  };
}

// Shape rule of float-only unary ops (the public function casts integers to f32 first).
inline TensorMeta unary_float_infer(const InferContext& c) {
  require_float(c);
  return same_as_input(c);
}

// Shape rule of ops defined on numbers but not on bool (neg, abs, relu, sign, clamp).
inline TensorMeta unary_numeric_infer(const InferContext& c) {
  if (c.input(0).dtype() == b8) c.fail<DTypeError>("expects a numeric tensor, got ", c.input(0).dtype());
  return same_as_input(c);
}

inline Cost unary_cost(const CallContext&, std::span<const TensorMeta> out) {
  double n = double(out[0].shape.numel());
  return {n, 2 * n * double(dtype_size(out[0].dtype))};
}

// Cost of ops that take about `flops` arithmetic operations per element (exp, erf...).
inline CostFn unary_cost_flops(double flops) {
  return [flops](const CallContext& c, std::span<const TensorMeta> out) {
    Cost cost = unary_cost(c, out);
    cost.flops *= flops;
    return cost;
  };
}

// The public function of a float-only unary op `name` (OpDef ops::name##_op), in namespace
// baton: integer and bool inputs are cast to f32 first.
#define BATON_DEFINE_FLOAT_UNARY(name)                                            \
  Tensor name(const Tensor& x, SourceLoc loc) {                                   \
    return ops::call(ops::name##_op, {ops::float_input(x, loc)}, {}, loc);        \
  }

// relu's gradient in one pass: g where out > 0, else 0. Exposed for tests.
Tensor relu_backward(const Tensor& g, const Tensor& out, SourceLoc loc = SourceLoc::current());
// The smooth activations' gradients in one pass each: g times the derivative, from the
// result (sigmoid, tanh) or the input (gelu, gelu_tanh, silu).
Tensor sigmoid_backward(const Tensor& g, const Tensor& y, SourceLoc loc = SourceLoc::current());
Tensor tanh_backward(const Tensor& g, const Tensor& y, SourceLoc loc = SourceLoc::current());
Tensor gelu_backward(const Tensor& g, const Tensor& x, SourceLoc loc = SourceLoc::current());
Tensor gelu_tanh_backward(const Tensor& g, const Tensor& x, SourceLoc loc = SourceLoc::current());
Tensor silu_backward(const Tensor& g, const Tensor& x, SourceLoc loc = SourceLoc::current());

}  // namespace baton::ops
