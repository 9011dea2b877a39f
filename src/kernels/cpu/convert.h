// convert<D>(s): one element converted between any two dtypes, as cast and copy_into do it.
//   - to bool: nonzero is true;
//   - integer to integer: modulo 2^bits of the target (u8(300) = 44, i8(200) = -56);
//   - floating to integer: truncated toward zero and saturated at the target's limits,
//     NaN to 0 (C++ leaves these undefined; numpy's answers vary by machine);
//   - to f16 and bf16: rounded to nearest, ties to even (through double, so exactly once);
//   - from f16 and bf16: exactly, through float.
#pragma once
#include <cmath>
#include <concepts>
#include <limits>
#include <type_traits>

#include "baton/dtype.h"

namespace baton::kernels {

template <class T>
inline constexpr bool is_small_float_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

template <class D, class S>
inline D convert(S s) {
  if constexpr (is_small_float_v<S>) {
    return convert<D>(s.to_float());
  } else if constexpr (is_small_float_v<D>) {
    return D(double(s));
  } else if constexpr (std::is_same_v<D, bool>) {
    return s != S(0);
  } else if constexpr (std::is_integral_v<D> && std::is_floating_point_v<S>) {
    if (s != s) return D(0);
    constexpr double lo = double(std::numeric_limits<D>::lowest());
    constexpr double hi = double(std::numeric_limits<D>::max());
    // hi may round up to 2^bits in double (int64): compare with >= to stay in range.
    if (double(s) <= lo) return std::numeric_limits<D>::lowest();
    if (double(s) >= hi) return std::numeric_limits<D>::max();
    return D(s);
  } else {
    return D(s);
  }
}

}  // namespace baton::kernels
