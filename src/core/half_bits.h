// The 16-bit float formats (f16: 5 exponent bits, 10 fraction bits; bf16: the top half
// of a float) from float and back in a few integer operations, which loops over many
// elements vectorize. Inline, for the kernels' loops (kernels/cpu/convert.h); Half and
// BFloat16 decode with them too (core/dtype.cpp), so there is one decoder. From float
// they give the bits Half(double) and BFloat16(double), which round through double, give
// (tests/core/storage_dtype_test.cpp checks every f16 and bf16 value against decoding by
// the formats' definition, and the float neighbourhoods of every rounding boundary).
#pragma once
#include <bit>
#include <cstdint>
#include <limits>

namespace baton::half_bits {

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

}  // namespace baton::half_bits
