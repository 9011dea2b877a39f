#include "baton/dtype.h"

#include <algorithm>
#include <cmath>
#include <ostream>

#include "baton/error.h"
#include "core/half_bits.h"

namespace baton {
namespace {

// A binary floating-point format of 16 bits: sign, exp_bits of exponent, the rest fraction.
struct Format16 {
  int exp_bits;
  int frac_bits() const { return 15 - exp_bits; }
  int bias() const { return (1 << (exp_bits - 1)) - 1; }
  uint16_t exp_mask() const { return uint16_t(((1u << exp_bits) - 1) << frac_bits()); }
};
constexpr Format16 kHalf{5}, kBFloat16{8};

// v rounded to the nearest value of format f (ties to even), as its bits. Works in double,
// which holds every float and every 16-bit value exactly: no double rounding through float.
uint16_t encode(Format16 f, double v) {
  const uint16_t sign = std::signbit(v) ? uint16_t(0x8000) : uint16_t(0);
  if (std::isnan(v)) return uint16_t(sign | f.exp_mask() | (1u << (f.frac_bits() - 1)));  // a quiet NaN
  const double a = std::fabs(v);
  if (std::isinf(a)) return uint16_t(sign | f.exp_mask());
  if (a == 0) return sign;
  const int min_exp = 1 - f.bias();  // the exponent of the smallest normal
  int e = 0;
  std::frexp(a, &e);  // a = m 2^e with m in [0.5, 1): the binade's exponent is e - 1
  int exp = std::max(e - 1, min_exp);
  const double one = std::ldexp(1.0, f.frac_bits());  // the implicit leading bit
  double q = std::nearbyint(std::ldexp(a, f.frac_bits() - exp));  // fraction steps, rounded
  if (q >= 2 * one) {  // rounding carried into the next binade
    q /= 2;
    ++exp;
  }
  if (q < one) return uint16_t(sign | uint16_t(q));  // subnormal
  const int biased = exp + f.bias();
  if (biased >= (1 << f.exp_bits) - 1) return uint16_t(sign | f.exp_mask());  // overflow: infinity
  return uint16_t(sign | (biased << f.frac_bits()) | uint16_t(q - one));
}

}  // namespace

Half::Half(double v) : bits(encode(kHalf, v)) {}
float Half::to_float() const { return half_bits::to_float_f16(bits); }
BFloat16::BFloat16(double v) : bits(encode(kBFloat16, v)) {}
float BFloat16::to_float() const { return half_bits::to_float_bf16(bits); }

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::b8: return "bool";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::u8: return "u8";
    case DType::i8: return "i8";
    case DType::i16: return "i16";
    case DType::u16: return "u16";
    case DType::u32: return "u32";
    case DType::u64: return "u64";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::string: return "string";
  }
  return "?";
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::b8: case DType::u8: case DType::i8: return 1;
    case DType::i16: case DType::u16: case DType::f16: case DType::bf16: return 2;
    case DType::i32: case DType::u32: case DType::f32: return 4;
    case DType::i64: case DType::u64: case DType::f64: return 8;
    case DType::string: return sizeof(std::string);
  }
  return 0;
}

DType compute_dtype(DType t) {
  switch (t) {
    case DType::u8: case DType::i8: case DType::i16: case DType::u16: return DType::i32;
    case DType::u32: case DType::u64: return DType::i64;
    case DType::f16: case DType::bf16: return DType::f32;
    default: return t;
  }
}

DType promote_types(DType a, DType b) {
  if (a == b) return compute_dtype(a);
  if (a == DType::string || b == DType::string)
    throw DTypeError("promote_types", str("no dtype holds both ", a, " and ", b, ": string tensors take no arithmetic"),
                     SourceLoc::current());
  a = compute_dtype(a);
  b = compute_dtype(b);
  return a > b ? a : b;
}

std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

}  // namespace baton
