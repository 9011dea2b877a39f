// Remainders with numpy broadcasting: fmod (C's, the sign of the dividend, ONNX's Mod with
// fmod=1) and remainder (Python's %, the sign of the divisor, ONNX's Mod with fmod=0).
// Integers are exact over the whole range (INT_MIN % -1 is 0); an integer divisor of 0 is
// a ValueError, as in PyTorch. Floats follow IEEE fmod.
#include <atomic>
#include <cmath>
#include <limits>
#include <type_traits>

#include "baton/ops.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/loops.h"
#include "ops/common.h"

namespace baton::ops {
namespace {

// a - trunc(a / b) * b: the sign of a.
template <class T>
T truncated(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::fmod(a, b);
  } else {
    if (b == T(-1)) return T(0);  // INT_MIN % -1 overflows in C++
    return a % b;
  }
}

// a - floor(a / b) * b: the sign of b (a zero keeps b's sign for floats).
template <class T>
T floored(T a, T b) {
  T r = truncated(a, b);
  if (r != T(0) && ((r < T(0)) != (b < T(0)))) r += b;
  if constexpr (std::is_floating_point_v<T>)
    if (r == T(0)) r = std::copysign(T(0), b);
  return r;
}

template <bool kFloored>
void remainder_kernel(const KernelContext& c) {
  std::atomic<bool> divided_by_zero{false};
  kernels::visit_dtype(c.output().dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, bool>) {
      c.fail<DTypeError>("expects numeric tensors, not ", b8);
    } else {
      kernels::map_elements<T, T, T>(
          c.output(),
          [&](T a, T b) {  // divided_by_zero: integers only
            if constexpr (std::is_integral_v<T>) {
              if (b == T(0)) {
                divided_by_zero.store(true, std::memory_order_relaxed);
                return T(0);
              }
            }
            return kFloored ? floored(a, b) : truncated(a, b);
          },
          c.input(0), c.input(1));
    }
  });
  if (divided_by_zero.load()) c.fail<ValueError>("integer division by zero");
}

TensorMeta numeric_broadcast(const InferContext& c) {
  require_same_dtype(c);
  if (c.input(0).dtype() == b8) c.fail<DTypeError>("expects numeric tensors, not ", b8);
  return {c.input(0).dtype(), broadcast_shapes(c.input(0).shape(), c.input(1).shape(), c)};
}

// d/da = 1; d/db = -(a - r) / b (the quotient, truncated or floored, as a - r over b).
Grads remainder_grad(const GradContext& c) {
  const Tensor& g = c.grad_output();
  Tensor gb;
  if (c.needs_grad(1)) gb = sum_to_size(neg(g * (c.input(0) - c.output()) / c.input(1)), c.input(1));
  return Grads{c.needs_grad(0) ? sum_to_size(g, c.input(0)) : Tensor{}, gb};
}

Cost per_element(const CallContext&, std::span<const TensorMeta> out) {
  const double n = double(out[0].shape.numel());
  return {4 * n, 3 * n * double(dtype_size(out[0].dtype))};
}

}  // namespace

BATON_OP(fmod_op, "fmod")
    .inputs(2)
    .fusion(Fusion::Broadcast)
    .infer(numeric_broadcast)
    .cpu(remainder_kernel<false>)
    .layout_follows_inputs()
    .grad(remainder_grad)
    .cost(per_element)
    .onnx("");  // ONNX's Mod with fmod=1 (an attribute): see io/onnx

BATON_OP(remainder_op, "remainder")
    .inputs(2)
    .fusion(Fusion::Broadcast)
    .infer(numeric_broadcast)
    .cpu(remainder_kernel<true>)
    .layout_follows_inputs()
    .grad(remainder_grad)
    .cost(per_element)
    .onnx("Mod");

}  // namespace baton::ops

namespace baton {

BATON_DEFINE_BINARY(fmod, { return ops::call(ops::fmod_op, {a, b}, {}, loc); })
BATON_DEFINE_BINARY(remainder, { return ops::call(ops::remainder_op, {a, b}, {}, loc); })

}  // namespace baton
