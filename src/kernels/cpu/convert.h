// convert<D>(s): one element converted between any two dtypes, as cast and copy_into do it.
//   - to bool: nonzero is true;
//   - integer to integer: modulo 2^bits of the target (u8(300) = 44, i8(200) = -56);
//   - floating to integer: truncated toward zero and saturated at the target's limits,
//     NaN to 0 (C++ leaves these undefined; numpy's answers vary by machine);
//   - to f16 and bf16: rounded to nearest, ties to even, exactly once (from float by its
//     bits, below; from anything else through double, Half(double) and BFloat16(double));
//     NaN becomes the quiet NaN of its sign;
//   - from f16 and bf16: exactly, through float (f16's NaN becomes float's quiet NaN).
#pragma once
#include <cmath>
#include <concepts>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "baton/dtype.h"
#include "core/half_bits.h"

namespace baton::kernels {

template <class T>
inline constexpr bool is_small_float_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;


// Inline (Half::to_float is the same function out of line), so that loops vectorize.
inline float to_float(Half h) { return half_bits::to_float_f16(h.bits); }
inline float to_float(BFloat16 h) { return half_bits::to_float_bf16(h.bits); }

template <class D, class S>
inline D convert(S s) {
  if constexpr (is_small_float_v<S>) {
    return convert<D>(to_float(s));
  } else if constexpr (is_small_float_v<D> && std::is_same_v<S, float>) {
    D d;
    d.bits = std::is_same_v<D, Half> ? half_bits::from_float_f16(s) : half_bits::from_float_bf16(s);
    return d;
  } else if constexpr (is_small_float_v<D>) {
    return D(double(s));
  } else if constexpr (std::is_same_v<D, bool>) {
    return s != S(0);
  } else if constexpr (std::is_same_v<S, bool>) {
    return s ? D(1) : D(0);  // a select, which loops vectorize (D(s) they leave scalar)
  } else if constexpr (std::is_integral_v<D> && std::is_floating_point_v<S>) {
    // The limits in S: lowest is exact (0 or -2^(bits-1)); max may round up to 2^bits
    // (int64 in double, int32 in float), so compare with >=: every S below it is in range.
    // Selects, not branches, so that a loop of them vectorizes.
    constexpr S lo = S(std::numeric_limits<D>::lowest());
    constexpr S hi = S(std::numeric_limits<D>::max());
    if (s != s) return D(0);  // (first: D(NaN) is undefined, even unselected)
    return s <= lo ? std::numeric_limits<D>::lowest() : s >= hi ? std::numeric_limits<D>::max() : D(s);
  } else {
    return D(s);
  }
}

}  // namespace baton::kernels
