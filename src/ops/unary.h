// The building blocks of unary element-wise ops: one functor, one line of kernel.
#pragma once
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/loops.h"
#include "ops/common.h"

namespace baton::ops {

// Kernel applying f to every element, for floating dtypes.
template <class F>
KernelFn unary_float_kernel(F f) {
  return [f](const KernelContext& c) {
    kernels::visit_float(c.output().dtype(), c.op_name().c_str(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      kernels::map_elements<T, T>(c.output(), [f](T x) { return T(f(x)); }, c.input(0));
    });
  };
}

// Kernel applying f to every element, for every numeric dtype.
template <class F>
KernelFn unary_numeric_kernel(F f) {
  return [f](const KernelContext& c) {
    kernels::visit_numeric(c.output().dtype(), c.op_name().c_str(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      kernels::map_elements<T, T>(c.output(), [f](T x) { return T(f(x)); }, c.input(0));
    });
  };
}

// Shape rule of float-only unary ops (the public function casts integers to f32 first).
inline TensorMeta unary_float_infer(const InferContext& c) {
  require_float(c);
  return same_as_input(c);
}

inline Cost unary_cost(const CallContext&, std::span<const TensorMeta> out) {
  double n = double(out[0].shape.numel());
  return {n, 2 * n * double(dtype_size(out[0].dtype))};
}

}  // namespace baton::ops
