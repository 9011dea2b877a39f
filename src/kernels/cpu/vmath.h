// Element-wise math that the compiler can vectorize.
//
// std::exp, std::tanh, std::erf are calls into libm, one element at a time, so a loop
// calling them never vectorizes. The f32 versions here are straight-line code (selects,
// no branches, no calls) that GCC turns into AVX2 inside map_elements' loops: 8 floats
// per instruction. Coefficients were fitted for this file (least squares on Chebyshev
// nodes, relative error); the relative error against f64 libm is tested to stay under
// 1e-6 (a few f32 ulps) in tests/ops/vmath_test.cpp.
// The f64 overloads call libm: f64 is the reference precision, not the fast path.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>

namespace baton::vm {

// Always inlined: a call left in map_elements' loop would keep it scalar.
#define BATON_VM_INLINE [[gnu::always_inline]] inline

inline double exp(double x) { return std::exp(x); }
inline double tanh(double x) { return std::tanh(x); }
inline double erf(double x) { return std::erf(x); }
inline double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// c ? a : b on already computed values, written with bit masks. A plain ?: whose arm does
// float arithmetic stays a branch under GCC's default -ftrapping-math (it will not
// compute an arm speculatively), and a branch stops vectorization; bit masks do not.
template <class T>
BATON_VM_INLINE T select(bool c, T a, T b) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
    const U m = U(0) - U(c);
    return std::bit_cast<T>((std::bit_cast<U>(a) & m) | (std::bit_cast<U>(b) & ~m));
  } else {
    return c ? a : b;
  }
}

namespace detail {

// 2^n for integer n in [-126, 127], built from the exponent bits.
inline float pow2i(int32_t n) { return std::bit_cast<float>((n + 127) << 23); }

// Round to nearest integer by the 1.5 * 2^23 trick (valid for |x| < 2^22).
inline float round_nearest(float x) {
  constexpr float magic = 12582912.0f;
  return (x + magic) - magic;
}

}  // namespace detail

// e^x = 2^n * e^r with n = round(x / ln 2), |r| <= ln2 / 2, e^r by a degree-6 polynomial.
BATON_VM_INLINE float exp(float x) {
  constexpr float log2e = 1.44269504088896341f;
  constexpr float ln2_hi = 0.693145751953125f, ln2_lo = 1.428606765330187e-06f;  // hi + lo = ln 2
  // Clamped so that n fits an int; a NaN fails both tests and becomes -87.5 here (its
  // result is the NaN itself, below), never a NaN converted to int.
  const float xc = select(x > -87.5f, select(x < 88.75f, x, 88.75f), -87.5f);
  const float n = detail::round_nearest(xc * log2e);
  const float r = (xc - n * ln2_hi) - n * ln2_lo;
  float p = 0.00138355667360385f;
  p = p * r + 0.00837480816374797f;
  p = p * r + 0.04166824838982261f;
  p = p * r + 0.16666420284119793f;
  p = p * r + 0.4999999197873523f;
  p = p * r + 1.0000000362891588f;
  p = p * r + 1.0000000005606933f;
  // n reaches 128 near the overflow threshold: scale in two halves.
  const int32_t ni = int32_t(n), half = ni / 2;
  float y = p * detail::pow2i(half) * detail::pow2i(ni - half);
  y = select(x > 88.7228394f, INFINITY, y);
  y = select(x < -87.3365479f, 0.0f, y);  // below the normal range (PyTorch gives denormals)
  return select(x != x, x, y);
}

BATON_VM_INLINE float sigmoid(float x) { return 1.0f / (1.0f + exp(-x)); }

// Near 0, x * P(x^2) (no cancellation); elsewhere 1 - 2 / (e^2|x| + 1), sign restored.
BATON_VM_INLINE float tanh(float x) {
  const float a = std::abs(x);
  const float u = x * x;
  float p = -0.00566678740717389f;
  p = p * u + 0.0205980938142568f;
  p = p * u - 0.05372373394295187f;
  p = p * u + 0.1333117023903171f;
  p = p * u - 0.3333326316702426f;
  p = p * u + 0.9999999964541101f;
  const float small = x * p;
  const float big = 1.0f - 2.0f / (exp(2.0f * a) + 1.0f);
  return select(a < 0.625f, small, select(x < 0, -big, big));
}

// |x| <= 1: x * P(x^2). 1 < |x| < 4: 1 - e^(-x^2) * Q(1/|x|), Q fitted to erfc(x) e^(x^2).
// |x| >= 4: +-1 (erfc(4) = 1.5e-8, under half an f32 ulp of 1). erf_given takes e^(-x^2)
// from a caller that needs it too (gelu's gradient: it is the normal density's); only
// where 1 < |x| < 4 is it read.
inline double erf_given(double x, double) { return std::erf(x); }
BATON_VM_INLINE float erf_given(float x, float exp_minus_square);
BATON_VM_INLINE float erf(float x) {
  const float a = std::abs(x);
  const float ac = select(a > 4.0f, 4.0f, a);
  return erf_given(x, exp(-ac * ac));
}
BATON_VM_INLINE float erf_given(float x, float exp_minus_square) {
  const float a = std::abs(x);
  const float u = x * x;
  float p = -5.6380048308615760e-04f;
  p = p * u + 4.9193242274701288e-03f;
  p = p * u - 2.6713028323675336e-02f;
  p = p * u + 1.1280251302732819e-01f;
  p = p * u - 3.7612337630417692e-01f;
  p = p * u + 1.1283791267998391e+00f;
  const float small = x * p;
  const float t = 1.0f / select(a < 1.0f, 1.0f, a);
  float q = -1.1493533523403265e-02f;
  q = q * t + 3.8584363803744130e-02f;
  q = q * t + 2.8018731869442273e-03f;
  q = q * t - 2.1764468814460319e-01f;
  q = q * t + 4.7993598678300758e-01f;
  q = q * t - 4.6422957474498688e-01f;
  q = q * t + 4.0044533099324514e-02f;
  q = q * t + 5.5933251610317869e-01f;
  q = q * t + 2.5207114771563099e-04f;
  float big = 1.0f - exp_minus_square * q;
  big = select(a >= 4.0f, 1.0f, big);
  return select(a <= 1.0f, small, select(x < 0, -big, big));
}

// log x = e ln2 + log m for x = m 2^e with m in [sqrt(1/2), sqrt(2)): log m = 2 atanh(s),
// s = (m - 1) / (m + 1) in [-0.172, 0.172], by its Taylor series to s^9 (the rest is under
// 5e-9 of it); m - 1 is exact, so results near x = 1 keep their relative precision.
// Denormal x is scaled by 2^23 first; 0 gives -inf, negatives NaN, +inf and NaN themselves.
inline double log(double x) { return std::log(x); }
BATON_VM_INLINE float log(float x) {
  constexpr float ln2_hi = 0.693145751953125f, ln2_lo = 1.428606765330187e-06f;  // hi + lo = ln 2
  const bool tiny = x < 1.17549435e-38f;  // below the normal range (also 0 and negatives)
  const int32_t bits = std::bit_cast<int32_t>(select(tiny, x * 8388608.0f, x));
  int32_t e = ((bits >> 23) & 0xff) - 127 - (tiny ? 23 : 0);
  float m = std::bit_cast<float>((bits & 0x007fffff) | 0x3f800000);  // in [1, 2)
  const bool high = m > 1.41421356f;
  m = select(high, 0.5f * m, m);
  e += int32_t(high);
  const float f = m - 1.0f;
  const float s = f / (2.0f + f);
  const float u = s * s;
  float p = 2.0f / 9;
  p = p * u + 2.0f / 7;
  p = p * u + 2.0f / 5;
  p = p * u + 2.0f / 3;
  p = p * u + 2.0f;
  const float k = float(e);
  float y = k * ln2_hi + (k * ln2_lo + s * p);
  y = select(x == 0.0f, -INFINITY, y);
  y = select(x < 0.0f, NAN, y);
  y = select(x == INFINITY, INFINITY, y);
  return select(x != x, x, y);
}

// log(1 + e) for e in [0, 1] (softplus needs only that range), as 2 atanh(s) with
// s = e / (2 + e) in [0, 1/3]: atanh(s) = s * P(s^2), no cancellation near 0.
inline double log1p_unit(double e) { return std::log1p(e); }
BATON_VM_INLINE float log1p_unit(float e) {
  const float s = e / (2.0f + e);
  const float u = s * s;
  float p = 0.1407533925213818f;
  p = p * u + 0.1398356246291202f;
  p = p * u + 0.20012206482837225f;
  p = p * u + 0.3333316391588451f;
  p = p * u + 1.0000000035790775f;
  return 2.0f * s * p;
}

// sin and cos: x = n pi/2 + r with |r| <= pi/4 (a little more), then sin or cos of r by
// its Taylor series (to r^11 and r^12: under 2e-9 of it) as n's last two bits say. The
// reduction keeps r exact to ~2^-53 of itself for every float, so results near the
// zeros of sin and cos keep their relative precision:
// - |x| < 2^20: n = round(x 2/pi), r = x - n pi/2 in double by fused multiply-adds with
//   pi/2 in two parts (n P1 is exact in the first);
// - larger: x = m 2^e times the bits of 2/pi that matter for that exponent (a window of 96
//   from a table made at compile time) in 64-bit integers: x 2/pi mod 4 as a fixed-point
//   number with 62 fraction bits (Payne and Hanek's reduction).
// Both reductions run for every element (selects, no branches), which keeps the loop
// vectorized; the f64 overloads call libm.
inline double sin(double x) { return std::sin(x); }
inline double cos(double x) { return std::cos(x); }

namespace detail {

// Bits 1..256 of 2/pi after the binary point, 32 at a time.
inline constexpr uint32_t kTwoOverPiWords[8] = {0xA2F9836E, 0x4E441529, 0xFC2757D1, 0xF534DDC0,
                                                0xDB629599, 0x3C439041, 0xFE5163AB, 0xDEBBC561};

// For each float exponent field e: floor(2/pi 2^(e - 56)) mod 2^96 in three words (high,
// middle, low; an array each, which vectorized loops read with gathers). A float
// m 2^(e - 150) (m: 24 bits) times it, shifted right 32, is x 2/pi 2^62 mod 2^64.
struct TwoOverPiWindows {
  uint32_t word[3][256];
};
constexpr TwoOverPiWindows two_over_pi_windows() {
  TwoOverPiWindows w{};
  for (int e = 0; e < 256; ++e) {
    for (int j = 0; j < 96; ++j) {  // bit j of the window is bit e - 56 - j after the point
      const int i = e - 56 - j;
      if (i < 1) break;
      const uint32_t bit = (kTwoOverPiWords[(i - 1) / 32] >> (31 - (i - 1) % 32)) & 1;
      w.word[2 - j / 32][e] |= bit << (j % 32);
    }
  }
  return w;
}
inline constexpr TwoOverPiWindows kTwoOverPiWindows = two_over_pi_windows();

struct QuarterTurns {
  int32_t n;  // its last two bits: the quadrant
  double r;   // x - n pi/2
};

// Below 2^20 the moderate reduction (whose bits sin_moderate and cos_moderate share).
BATON_VM_INLINE bool is_moderate(float x) { return std::abs(x) < 1048576.0f; }

// For |x| < 2^20; larger x, inf and NaN reduce as 0 (their n would not fit an int).
BATON_VM_INLINE QuarterTurns reduce_moderate(float x) {
  constexpr double shifter = 6755399441055744.0;  // 1.5 2^52: adding it rounds to an integer
  const double xd = select(is_moderate(x), x, 0.0f);
  const double n = (xd * 0.6366197723675814 + shifter) - shifter;
  double r = std::fma(-n, 1.5707963267948966, xd);
  r = std::fma(-n, 6.123233995736766e-17, r);
  return {int32_t(n), r};
}

BATON_VM_INLINE QuarterTurns reduce_large(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x) & 0x7fffffffu;
  const uint32_t e = bits >> 23;
  const uint32_t m = (bits & 0x007fffffu) | 0x00800000u;
  // 32 x 32 -> 64-bit products (AVX2 has no 64-bit multiply): x 2/pi mod 4, 62 bits after the point
  const auto& w = kTwoOverPiWindows.word;
  const uint64_t turns = ((uint64_t(m) * w[0][e]) << 32) + uint64_t(m) * w[1][e] + ((uint64_t(m) * w[2][e]) >> 32);
  const uint64_t rounded = turns + (uint64_t(1) << 61);                      // to the nearest quarter turn
  const uint64_t rest = rounded & ((uint64_t(1) << 62) - 1);                 // r + pi/4, in units of 2^-62 quarter turns
  // r in two exact pieces (no 64-bit integer to double conversion in AVX2): high bits
  // less the offset, then the low 31.
  const int32_t high = int32_t(rest >> 31) - (1 << 30), low = int32_t(rest & 0x7fffffffu);
  const double r = (double(high) * 2147483648.0 + double(low)) * 3.4061215800865545e-19;  // pi/2 2^-62
  const int32_t n = int32_t(rounded >> 62);
  const bool negative = x < 0;  // reduced as |x|: -x is -n quarter turns and -r
  return {negative ? -n : n, select(negative, -r, r)};
}

BATON_VM_INLINE QuarterTurns reduce_quarter_turns(float x) {
  const QuarterTurns moderate = reduce_moderate(x);
  const QuarterTurns large = reduce_large(x);
  return {is_moderate(x) ? moderate.n : large.n, select(is_moderate(x), moderate.r, large.r)};
}

// sin of n quarter turns plus r (|r| <= pi/4 + a little).
BATON_VM_INLINE float sin_turns(int32_t n, float r) {
  const float u = r * r;
  float s = -2.5052108385441720e-08f;
  s = s * u + 2.7557319223985893e-06f;
  s = s * u - 1.9841269841269841e-04f;
  s = s * u + 8.3333333333333333e-03f;
  s = s * u - 1.6666666666666667e-01f;
  s = r + r * u * s;
  float c = 2.0876756987868099e-09f;
  c = c * u - 2.7557319223985891e-07f;
  c = c * u + 2.4801587301587302e-05f;
  c = c * u - 1.3888888888888889e-03f;
  c = c * u + 4.1666666666666667e-02f;
  c = c * u - 0.5f;
  c = c * u + 1.0f;
  const float y = select((n & 1) != 0, c, s);
  return select((n & 2) != 0, -y, y);
}

// sin x (quarter_turns 0) or cos x = sin(x + pi/2) (1) from x's reduction t. Below 2^-13
// sin x rounds to x (x^3/6 is under half its ulp): -0 and denormals kept.
template <int quarter_turns>
BATON_VM_INLINE float sin_reduced(float x, QuarterTurns t) {
  float y = sin_turns(t.n + quarter_turns, float(t.r));
  if constexpr (quarter_turns == 0) y = select(std::abs(x) < 1.220703125e-4f, x, y);
  y = select(std::abs(x) == INFINITY, NAN, y);
  return select(x != x, x, y);
}

}  // namespace detail

using detail::is_moderate;
BATON_VM_INLINE float sin(float x) { return detail::sin_reduced<0>(x, detail::reduce_quarter_turns(x)); }
BATON_VM_INLINE float cos(float x) { return detail::sin_reduced<1>(x, detail::reduce_quarter_turns(x)); }
// sin and cos where is_moderate(x), bit for bit, without the large reduction (about a third
// of the work); anything else must go to sin and cos.
BATON_VM_INLINE float sin_moderate(float x) { return detail::sin_reduced<0>(x, detail::reduce_moderate(x)); }
BATON_VM_INLINE float cos_moderate(float x) { return detail::sin_reduced<1>(x, detail::reduce_moderate(x)); }

#undef BATON_VM_INLINE

}  // namespace baton::vm
