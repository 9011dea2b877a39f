// Storage dtypes (u8, i8, i16, u16, u32, u64, f16, bf16): tensors hold them, cast and views
// handle them, every other op refuses them with a DTypeError saying to cast first.
#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>

#include "harness/op_harness.h"
#include "kernels/cpu/convert.h"

namespace baton::testing {
namespace {

TEST(StorageDtypes, NamesSizesAndComputeDtypes) {
  const std::vector<std::tuple<DType, const char*, size_t, DType>> expected{
      {u8, "u8", 1, i32},   {i8, "i8", 1, i32},   {i16, "i16", 2, i32},  {u16, "u16", 2, i32},
      {u32, "u32", 4, i64}, {u64, "u64", 8, i64}, {f16, "f16", 2, f32}, {bf16, "bf16", 2, f32}};
  for (auto [t, name, size, compute] : expected) {
    EXPECT_EQ(dtype_name(t), name);
    EXPECT_EQ(dtype_size(t), size);
    EXPECT_EQ(compute_dtype(t), compute);
    EXPECT_TRUE(is_storage_only(t));
  }
  for (DType t : {b8, i32, i64, f32, f64}) {
    EXPECT_FALSE(is_storage_only(t));
    EXPECT_EQ(compute_dtype(t), t);
  }
  EXPECT_EQ(promote_types(u8, f32), f32);
  EXPECT_EQ(promote_types(u32, i32), i64);
  EXPECT_EQ(promote_types(f16, i64), f32);
}

TEST(StorageDtypes, HalfRoundsToNearestEven) {
  const std::vector<std::pair<double, uint16_t>> cases{
      {1.0, 0x3C00},     {-2.0, 0xC000},         {65504.0, 0x7BFF},  {65519.0, 0x7BFF},
      {65520.0, 0x7C00},  // halfway to the next binade rounds up to infinity
      {std::ldexp(1.0, -24), 0x0001},  // the smallest subnormal
      {std::ldexp(1.0, -25), 0x0000},  // half of it: a tie, to even (zero)
      {std::ldexp(3.0, -25), 0x0002},  // 1.5 steps: a tie, to even (2)
      {std::ldexp(1.0, -14), 0x0400},  // the smallest normal
      {1.0 + std::ldexp(1.0, -11), 0x3C00},  // a tie between 1 and 1+2^-10: to even (1)
      {1.0 + std::ldexp(3.0, -11), 0x3C02},  // a tie between 1+2^-10 and 1+2^-9: to even
      {0.1, 0x2E66},     {-0.0, 0x8000},         {INFINITY, 0x7C00}, {-INFINITY, 0xFC00}, {1e10, 0x7C00}};
  for (auto [v, bits] : cases) {
    SCOPED_TRACE(v);
    EXPECT_EQ(Half(v).bits, bits);
  }
  EXPECT_TRUE(std::isnan(Half(NAN).to_float()));
  for (uint32_t b = 0; b < 0x10000; ++b) {  // every finite half survives a round trip
    Half h;
    h.bits = uint16_t(b);
    const float f = h.to_float();
    if (std::isnan(f)) continue;
    ASSERT_EQ(Half(double(f)).bits, h.bits) << b;
  }
  Half smallest;
  smallest.bits = 1;
  EXPECT_EQ(smallest.to_float(), std::ldexp(1.f, -24));
}

TEST(StorageDtypes, BFloat16RoundsToNearestEven) {
  EXPECT_EQ(BFloat16(1.0).bits, 0x3F80);
  EXPECT_EQ(BFloat16(1.0 + std::ldexp(1.0, -8)).bits, 0x3F80);  // a tie: to even
  EXPECT_EQ(BFloat16(1.0 + std::ldexp(3.0, -8)).bits, 0x3F82);  // a tie: to even
  EXPECT_EQ(BFloat16(1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -20)).bits, 0x3F81);
  EXPECT_EQ(BFloat16(3.0e38).bits, 0x7F62);
  EXPECT_EQ(BFloat16(3.4e38).bits, 0x7F80);  // past the largest bf16: infinity
  EXPECT_EQ(BFloat16(-1.5).to_float(), -1.5f);
  EXPECT_TRUE(std::isnan(BFloat16(NAN).to_float()));
}

// An f16's value by the format's definition (a sign, 5 exponent bits biased by 15, 10
// fraction bits; the top exponent infinity or NaN, zero subnormal), in double: the
// oracle for the decoder by bits (core/half_bits.h) that Half::to_float and cast share.
// (bf16 is by definition the float whose top half it is.)
double f16_by_definition(uint16_t bits) {
  const int exp = (bits >> 10) & 0x1F, frac = bits & 0x3FF;
  const double sign = bits & 0x8000 ? -1 : 1;
  if (exp == 0x1F) return frac ? NAN : sign * INFINITY;
  if (exp == 0) return sign * std::ldexp(frac, -14 - 10);
  return sign * std::ldexp(frac + 0x400, exp - 15 - 10);
}

TEST(StorageDtypes, HalfDecodesAsItsFormatDefines) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    Half h;
    h.bits = uint16_t(b);
    const double want = f16_by_definition(h.bits);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(h.to_float())) << b;
      ASSERT_TRUE(std::isnan(kernels::to_float(h))) << b;
    } else {
      ASSERT_EQ(double(h.to_float()), want) << b;
      ASSERT_EQ(std::signbit(h.to_float()), std::signbit(want)) << b;  // -0 too
      ASSERT_EQ(double(kernels::to_float(h)), want) << b;
    }
    BFloat16 g;
    g.bits = uint16_t(b);
    ASSERT_EQ(std::bit_cast<uint32_t>(g.to_float()), b << 16) << b;
  }
}

// cast converts float to f16 and bf16 by their bits (core/half_bits.h), where Half(double)
// and BFloat16(double) round through double: the same bits for the floats at and beside
// every rounding boundary (the midpoints between neighbouring 16-bit values), and for a
// million random floats.
template <class H>
void expect_by_bits_as_exactly(float f) {
  ASSERT_EQ(kernels::convert<H>(f).bits, H(double(f)).bits) << std::hexfloat << f;
}

TEST(StorageDtypes, FloatConversionsByBitsGiveTheExactOnesBits) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    Half h;
    BFloat16 g;
    h.bits = g.bits = uint16_t(b);
    Half next_h;
    BFloat16 next_g;
    next_h.bits = next_g.bits = uint16_t(b + 1);
    for (auto [low, high] : {std::pair{h.to_float(), next_h.to_float()}, std::pair{g.to_float(), next_g.to_float()}}) {
      if (!std::isfinite(low) || !std::isfinite(high)) continue;
      const float mid = float((double(low) + double(high)) / 2);  // exact: 12 significant bits at most
      for (float f : {low, mid, std::nextafter(mid, -INFINITY), std::nextafter(mid, INFINITY)}) {
        expect_by_bits_as_exactly<Half>(f);
        expect_by_bits_as_exactly<BFloat16>(f);
      }
    }
  }
  std::mt19937 bits(7);
  for (int i = 0; i < 1'000'000; ++i) {
    const float f = std::bit_cast<float>(uint32_t(bits()));
    expect_by_bits_as_exactly<Half>(f);
    expect_by_bits_as_exactly<BFloat16>(f);
  }
  for (float f : {INFINITY, -INFINITY, NAN, -NAN, std::numeric_limits<float>::max(),
                  std::numeric_limits<float>::denorm_min()}) {
    expect_by_bits_as_exactly<Half>(f);
    expect_by_bits_as_exactly<BFloat16>(f);
  }
}

TEST(StorageDtypes, CastConvertsBothWays) {
  Tensor x = tensor({-1.0, 0.0, 1.5, 255.0, 256.0, 300.7});
  EXPECT_EQ(cast(cast(x, i32), u8).to_vector<int64_t>(), (std::vector<int64_t>{255, 0, 1, 255, 0, 44}));  // modulo 2^8
  EXPECT_EQ(cast(x, u8).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 1, 255, 255, 255}));  // saturated
  EXPECT_EQ(cast(tensor({200, -129}), i8).to_vector<int64_t>(), (std::vector<int64_t>{-56, 127}));
  EXPECT_EQ(cast(tensor({double(NAN), -1e20, 1e20}), i16).to_vector<int64_t>(), (std::vector<int64_t>{0, -32768, 32767}));
  // From f32, saturated at limits f32 cannot hold exactly (2^31 - 1 rounds to 2^31).
  EXPECT_EQ(cast(tensor({NAN, -1e20f, 1e20f, 2147483648.0f, -2147483648.0f, 2147483520.0f, -0.75f}), i32)
                .to_vector<int64_t>(),
            (std::vector<int64_t>{0, INT32_MIN, INT32_MAX, INT32_MAX, INT32_MIN, 2147483520, 0}));
  EXPECT_EQ(cast(tensor({255.5f, -0.5f, 256.0f, 1e30f}), u8).to_vector<int64_t>(),
            (std::vector<int64_t>{255, 0, 255, 255}));
  EXPECT_EQ(cast(tensor<int64_t>({-1}), u64).to_vector<uint64_t>(), (std::vector<uint64_t>{UINT64_MAX}));
  Tensor h = cast(tensor({0.1f, 1.0f, 70000.0f}), f16);
  EXPECT_EQ(h.dtype(), f16);
  EXPECT_EQ(h.data<Half>()[0].bits, 0x2E66);
  EXPECT_EQ(cast(h, f32).to_vector<float>(), (std::vector<float>{Half(0.1).to_float(), 1.0f, INFINITY}));
  EXPECT_EQ(cast(cast(tensor({1.0f, 3.0f}), bf16), f64).to_vector<double>(), (std::vector<double>{1.0, 3.0}));
  EXPECT_EQ(cast(cast(tensor({7, 9}), u16), bf16).to_vector<double>(), (std::vector<double>{7.0, 9.0}));
}

TEST(StorageDtypes, ViewsAndCopiesKeepTheDtype) {
  Tensor x = cast(arange(6, i32), u8).reshape({2, 3});
  EXPECT_EQ(x.dtype(), u8);
  Tensor t = x.t();
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(t.contiguous().to_vector<uint8_t>(), (std::vector<uint8_t>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(x.clone().dtype(), u8);
  std::ostringstream printed;
  printed << cast(tensor({1.5f, -2.f}), f16) << " " << cast(tensor({3, 250}), u8);
  EXPECT_EQ(printed.str(), "tensor([ 1.5000, -2.0000], dtype=f16) tensor([  3, 250], dtype=u8)");
}

TEST(StorageDtypes, OtherOpsRefuseThemAndSayToCast) {
  Tensor x = cast(tensor({1, 2}), u8);
  EXPECT_THROWS_WITH(DTypeError, x + x, "[add]", "u8 is a storage dtype", "cast to i32 first");
  EXPECT_THROWS_WITH(DTypeError, maximum(cast(tensor({1.f}), f16), cast(tensor({1.f}), f16)), "f16 is a storage dtype",
                     "cast to f32 first");
  // Float math casts whatever is not f32 or f64 to f32 first (docs/dtypes.md rule 4).
  EXPECT_EQ(exp(cast(tensor({0.f}), f16)).dtype(), f32);
  EXPECT_THROWS_WITH(DTypeError, sum(x), "u8 is a storage dtype");
}

TEST(StorageDtypes, GraphsCarryThemThroughCasts) {
  Graph g;
  Tensor p = g.placeholder(u8, {3}, "p");
  Tensor y = cast(cast(p, i32) * 100, u8);
  Session s(g);
  Tensor out = s.run({y}, {{p, cast(tensor({1, 2, 3}), u8)}})[0];
  EXPECT_EQ(out.dtype(), u8);
  EXPECT_EQ(out.to_vector<int64_t>(), (std::vector<int64_t>{100, 200, 44}));
}

}  // namespace
}  // namespace baton::testing
