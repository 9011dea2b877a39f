// exp(x - m) over rows shifted by their max: softmax's and cross-entropy's exponentials.
#pragma once
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/cpu/reduce.h"
#include "kernels/cpu/vec16.h"

namespace baton::kernels {

// The larger of two values; a NaN b is passed over (the shift then keeps the row's NaN).
template <class T>
T max_of(T a, T b) { return MaxPassingNaN{}(a, b); }

// The max a row of n values is shifted by before exp (its 8 chains as vector lanes).
template <class T>
T row_max(const T* x, int64_t n) {
  return fold_row<T>(x, n, -std::numeric_limits<T>::infinity(), MaxPassingNaN{});
}

// exp(x) for x <= 0 (the callers shift by the max first), branch-free so loops over it
// vectorize, unlike std::exp. x = k ln2 + r with |r| <= ln2/2; e^r by its Taylor series
// to r^7 (truncation < 6e-9, below float precision); 2^k built in the exponent bits.
// Below -87 (where e^x is a float denormal) it returns 0; NaN stays NaN.
[[gnu::always_inline]] inline float exp_nonpositive(float x) {
  const float magic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float xc = std::max(x, -87.0f);  // NaN stays NaN
  const float t = xc * 1.44269504088896341f + magic;
  const float k = t - magic;
  const int32_t ki = std::bit_cast<int32_t>(t) - std::bit_cast<int32_t>(magic);
  const float r = (xc - k * 0.693359375f) + k * 2.12194440e-4f;  // ln2 split in two parts
  float p = 1.0f / 5040;
  p = p * r + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const float scale = std::bit_cast<float>((ki + 127) << 23);
  return p * scale * float(x >= -87.0f);  // a mask, not a branch (NaN * 0 is NaN)
}
inline double exp_nonpositive(double x) { return std::exp(x); }

// y[i] = exp(x[i] - m), compiled for AVX-512: 16 floats a vector where the library's
// baseline (x86-64-v3) gives 8, the same operations on each (the same bits).
__attribute__((target("avx512f"))) inline void exp_shifted_wide(const float* x, float* y, int64_t n, float m) {
  for (int64_t i = 0; i < n; ++i) y[i] = exp_nonpositive(x[i] - m);
}

template <class T>
void exp_shifted(const T* x, T* y, int64_t n, T m) {
  if constexpr (std::is_same_v<T, float>)
    if (kHasAvx512) return exp_shifted_wide(x, y, n, m);
  for (int64_t i = 0; i < n; ++i) y[i] = exp_nonpositive(x[i] - m);
}

// y[i] = exp(x[i] - m[i]), each element shifted by its own max (a column's).
__attribute__((target("avx512f"))) inline void exp_shifted_each_wide(const float* x, const float* m, float* y,
                                                                     int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = exp_nonpositive(x[i] - m[i]);
}

template <class T>
void exp_shifted_each(const T* x, const T* m, T* y, int64_t n) {
  if constexpr (std::is_same_v<T, float>)
    if (kHasAvx512) return exp_shifted_each_wide(x, m, y, n);
  for (int64_t i = 0; i < n; ++i) y[i] = exp_nonpositive(x[i] - m[i]);
}

}  // namespace baton::kernels
