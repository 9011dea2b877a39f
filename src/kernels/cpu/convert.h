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
#include <bit>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "baton/dtype.h"

namespace baton::kernels {

template <class T>
inline constexpr bool is_small_float_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// The 16-bit formats from float and back in a few integer operations, which loops over
// many elements vectorize (Half(double) and decoding through ldexp took 7-11 ns an element).
// Each gives the bits the exact conversions in core/dtype.cpp give
// (tests/core/storage_dtype_test.cpp checks every f16 and bf16 value and the float
// neighbourhoods of every rounding boundary).
namespace half_bits {

// float -> bf16: the top 16 bits, the 16 dropped ones rounded to nearest, ties to even.
// A subnormal float is zero, as baton's threads read it everywhere (denormals-are-zero,
// docs/ARCHITECTURE.md), and as the conversion through double gave.
inline uint16_t from_float_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7F800000u) == 0) return uint16_t((x >> 16) & 0x8000u);                      // zero or subnormal
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return uint16_t(((x >> 16) & 0x8000u) | 0x7FC0u);  // NaN
  return uint16_t((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);  // a carry may reach the exponent: right
}

// float -> f16 (5 exponent bits, 10 fraction bits).
inline uint16_t from_float_f16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f), sign = (x >> 16) & 0x8000u, a = x & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return uint16_t(sign | 0x7E00u);  // NaN
  if (a >= 0x47800000u) return uint16_t(sign | 0x7C00u);  // from 2^16 up: infinity
  if (a < 0x38800000u) {  // below 2^-14, f16's smallest normal: a multiple of 2^-24
    // In 0.5 + a the float's last bit is worth 2^-24, so the addition rounds a to f16's
    // subnormal steps (to nearest, ties to even); the bits above 0.5's are the steps.
    const float aligned = std::bit_cast<float>(a) + 0.5f;
    return uint16_t(sign | (std::bit_cast<uint32_t>(aligned) - 0x3F000000u));
  }
  // Normal: the exponent rebiased (127 -> 15), 13 fraction bits dropped, rounded to
  // nearest, ties to even; a carry past 65504 makes infinity.
  const uint32_t rounded = a - ((127u - 15u) << 23) + 0xFFFu + ((a >> 13) & 1u);
  return uint16_t(sign | (rounded >> 13));
}

inline float to_float_bf16(uint16_t bits) { return std::bit_cast<float>(uint32_t(bits) << 16); }

// (Selects rather than branches, so that a loop of it vectorizes.)
inline float to_float_f16(uint16_t bits) {
  const uint32_t sign = uint32_t(bits & 0x8000u) << 16, magnitude = bits & 0x7FFFu;
  const uint32_t normal = (magnitude << 13) + ((127u - 15u) << 23);         // the exponent rebiased
  const uint32_t subnormal = std::bit_cast<uint32_t>(float(magnitude) * 0x1p-24f);  // exact
  const uint32_t unsigned_bits = magnitude < 0x0400u ? subnormal : magnitude < 0x7C00u ? normal : 0x7F800000u;
  const float value = std::bit_cast<float>(sign | unsigned_bits);
  return magnitude > 0x7C00u ? std::numeric_limits<float>::quiet_NaN() : value;
}

}  // namespace half_bits

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
