// Bit shifts with numpy broadcasting (ONNX's BitShift): shift_left(a, n) = a * 2^n and
// shift_right(a, n) = a / 2^n rounded down, on the bits of a as an unsigned number (so a
// u8, u16 or u32 value held in i32 or i64 shifts as it would in its own type, and the
// importer's rounding back into that type drops the bits shifted out). Shifting by the
// width or more gives 0; a negative count is a ValueError. Integers only; no gradient.
#include <atomic>
#include <type_traits>

#include "baton/ops.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/loops.h"
#include "ops/common.h"

namespace baton::ops {
namespace {

template <bool kLeft>
void shift_kernel(const KernelContext& c) {
  std::atomic<bool> negative{false};
  kernels::visit_dtype(c.output().dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      using U = std::make_unsigned_t<T>;
      kernels::map_elements<T, T, T>(
          c.output(),
          [&negative](T a, T n) {
            if (n < 0) {
              negative.store(true, std::memory_order_relaxed);
              return T(0);
            }
            if (n >= T(8 * sizeof(T))) return T(0);
            return T(kLeft ? U(U(a) << n) : U(U(a) >> n));
          },
          c.input(0), c.input(1));
    }
  });
  if (negative.load()) c.fail<ValueError>("a shift count is negative");
}

TensorMeta integer_broadcast(const InferContext& c) {
  require_same_dtype(c);
  if (!is_integral(c.input(0).dtype())) c.fail<DTypeError>("expects integer tensors, not ", c.input(0).dtype());
  return {c.input(0).dtype(), broadcast_shapes(c.input(0).shape(), c.input(1).shape(), c)};
}

}  // namespace

BATON_OP(shift_left_op, "shift_left")
    .inputs(2)
    .fusion(Fusion::Broadcast)
    .infer(integer_broadcast)
    .cpu(shift_kernel<true>)
    .layout_follows_inputs()
    .onnx("");  // ONNX's BitShift with direction="LEFT" (an attribute): see io/onnx

BATON_OP(shift_right_op, "shift_right")
    .inputs(2)
    .fusion(Fusion::Broadcast)
    .infer(integer_broadcast)
    .cpu(shift_kernel<false>)
    .layout_follows_inputs()
    .onnx("");

}  // namespace baton::ops

namespace baton {

BATON_DEFINE_BINARY(shift_left, { return ops::call(ops::shift_left_op, {a, b}, {}, loc); })
BATON_DEFINE_BINARY(shift_right, { return ops::call(ops::shift_right_op, {a, b}, {}, loc); })

}  // namespace baton
