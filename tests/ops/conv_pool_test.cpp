// conv2d_max_pool2d's kernel: its f32 vector path (3x3 convolutions under 2x2 windows of
// stride 2) in every output layout a plan hands it (plain, channels-last, blocks of 8 and
// 16 channels) against the op's loops in f64, which the op harness checks against an
// independent reference (conv_test.cpp); NaN and infinities; and the op's errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "dispatch/registry.h"
#include "harness/op_harness.h"
#include "kernels/cpu/conv_pool.h"

namespace baton::testing {
namespace {

struct FusedCase {
  const char* name;
  Shape x, w;
  int64_t pad;
};

ops::Attrs attrs(const FusedCase& k, const std::string& activation = "relu") {
  const std::vector<int64_t> two{2, 2}, one{1, 1};
  return {{"stride", one},           {"padding", std::vector<int64_t>{k.pad, k.pad}},
          {"dilation", one},         {"groups", int64_t(1)},
          {"activation", activation}, {"pool_kernel", two},
          {"pool_stride", two}};
}

std::vector<Tensor> fused(const Inputs& in, const ops::Attrs& a) {
  return ops::call_many(*ops::find_op("conv2d_max_pool2d"), in, a, SourceLoc::current());
}

Inputs inputs_of(const FusedCase& k, uint64_t seed) {
  return {uniform(k.x, -1, 1, seed), uniform(k.w, -1, 1, seed + 1), uniform({k.w[0]}, -1, 1, seed + 2)};
}

enum class Layout { Plain, ChannelsLast, Blocks8, Blocks16 };

// The kernel's f32 outputs written in `layout`, returned as plain tensors.
std::vector<Tensor> run_kernel(const Inputs& in, const FusedCase& k, Layout layout, bool relu = true,
                               DType offsets_dtype = i32) {
  const int64_t n = k.x[0], o = k.w[0], oh = k.x[2] + 2 * k.pad - 2, ow = k.x[3] + 2 * k.pad - 2;
  const kernels::ConvGeom g{n, k.x[1], k.x[2], k.x[3], o, 3, 3, oh, ow, 1, 1, 1, k.pad, k.pad, 1, 1};
  const kernels::PoolGeom p{n, o, oh, ow, 2, 2, 2, 2, 0, 0, oh / 2, ow / 2};
  const Shape pooled{n, o, p.oh, p.ow};
  const int64_t block = layout == Layout::Blocks8 ? 8 : layout == Layout::Blocks16 ? 16 : 0;
  auto output = [&](DType t) {
    if (layout == Layout::ChannelsLast) return empty({n, p.oh, p.ow, o}, t).permute({0, 3, 1, 2});
    return empty(pooled, t);  // plain strides; a blocked one holds blocked bytes
  };
  Tensor maxima = output(f32), offsets = output(offsets_dtype);
  kernels::conv_max_pool_forward(g, p, relu, in[0].to(f32), in[1].to(f32), in[2].to(f32), maxima, &offsets,
                                 {block, block});
  auto plain = [&](const Tensor& t) {
    if (!block) return t.contiguous();
    return t.reshape({n, o / block, p.oh, p.ow, block}).permute({0, 1, 4, 2, 3}).reshape(pooled);
  };
  return {plain(maxima), plain(offsets)};
}

// Tolerance: f32 sums of up to 27 products of values in [-1, 1], in the f64 loops' order
// but rounded at each step: ~1e-6; 1e-5 leaves room without hiding a wrong tap (~1e-1).
// Every layout gives the same f32 bits: one input channel with outputs whose groups of 16
// channels lie side by side runs 16 lanes on AVX-512 machines, blocks of 8 run 8 lanes,
// and each output sums the same products in the same order.
TEST(ConvPool, F32VectorsInEveryLayoutMatchTheLoopsInDouble) {
  for (const FusedCase& k : {FusedCase{"one_channel", {3, 1, 12, 11}, {16, 1, 3, 3}, 0},
                             FusedCase{"three_channels_padded", {2, 3, 9, 10}, {16, 3, 3, 3}, 1}}) {
    const Inputs in = inputs_of(k, 1);
    const std::vector<Tensor> want = fused(in, attrs(k));
    const std::vector<Tensor> eight_lanes = run_kernel(in, k, Layout::Blocks8);
    for (Layout layout : {Layout::Plain, Layout::ChannelsLast, Layout::Blocks8, Layout::Blocks16}) {
      const std::vector<Tensor> got = run_kernel(in, k, layout);
      EXPECT_ALL_CLOSE(got[0].to(f64), want[0], 1e-5, 0) << k.name << " layout " << int(layout);
      EXPECT_EQ(got[0].to_vector<float>(), eight_lanes[0].to_vector<float>()) << k.name << " layout " << int(layout);
      EXPECT_EQ(got[1].to_vector<int32_t>(), want[1].to_vector<int32_t>()) << k.name << " layout " << int(layout);
    }
  }
}

// Geometries around the vector path's edges: 1-4 input channels (one kept in registers,
// the others read), padding 0-2 (rows copied with zeros), odd sizes (a last row and
// column no window reads), 8-32 output channels (32: 16 lanes on AVX-512 machines for one
// input channel), with and without the relu.
TEST(ConvPool, VectorGeometriesMatchTheLoops) {
  int64_t seed = 100;
  for (int64_t c : {1, 2, 4})
    for (int64_t pad : {0, 1, 2})
      for (int64_t o : {8, 24, 32}) {
        const FusedCase k{"sweep", {2, c, 7 + c, 10 - c}, {o, c, 3, 3}, pad};
        const Inputs in = inputs_of(k, uint64_t(seed += 3));
        for (bool relu : {true, false}) {
          const std::vector<Tensor> want = fused(in, attrs(k, relu ? "relu" : "none"));
          const std::vector<Tensor> got = run_kernel(in, k, Layout::ChannelsLast, relu);
          const std::string at = str("c ", c, " pad ", pad, " o ", o, " relu ", relu);
          EXPECT_ALL_CLOSE(got[0].to(f64), want[0], 1e-5, 0) << at;
          EXPECT_EQ(got[1].to_vector<int32_t>(), want[1].to_vector<int32_t>()) << at;
        }
      }
}

// A NaN in x makes every window over it NaN at the first position whose output is NaN
// (the loops' rule: the vector path's row is done again by them), an infinity an infinite
// maximum; the other windows of those rows keep their values.
TEST(ConvPool, NaNAndInfinitiesFollowTheLoopsRule) {
  for (int64_t o : {8, 16}) {  // 8 or 16 lanes (on AVX-512 machines)
    const FusedCase k{"one_channel", {2, 1, 10, 10}, {o, 1, 3, 3}, 1};
    Inputs in = inputs_of(k, 5);
    std::vector<double> x = in[0].to_vector<double>();
    x[size_t(3 * 10 + 4)] = std::nan("");
    x[size_t(100 + 7 * 10 + 2)] = INFINITY;
    in[0] = tensor(x, k.x);
    const std::vector<Tensor> want = fused(in, attrs(k)), got = run_kernel(in, k, Layout::ChannelsLast);
    const std::vector<double> w = want[0].to_vector<double>(), g = got[0].to(f64).to_vector<double>();
    int nans = 0, infinities = 0;
    for (size_t i = 0; i < w.size(); ++i) {
      nans += std::isnan(w[i]);
      infinities += std::isinf(w[i]);
      if (std::isnan(w[i])) {
        EXPECT_TRUE(std::isnan(g[i])) << i;
      } else if (std::isinf(w[i])) {
        EXPECT_EQ(g[i], w[i]) << i;
      } else {
        EXPECT_NEAR(g[i], w[i], 1e-5) << i;
      }
    }
    EXPECT_GT(nans, 0);
    EXPECT_GT(infinities, 0);
    EXPECT_EQ(got[1].to_vector<int32_t>(), want[1].to_vector<int32_t>());
  }
}

// An infinite weight over padding: the padding is skipped as the loops skip it, never
// multiplied by the weight (0 * inf is NaN), and the windows hold infinities where the
// loops do and no NaN.
TEST(ConvPool, AnInfiniteWeightOverPaddingGivesNoNaN) {
  const FusedCase k{"padded", {1, 2, 8, 8}, {8, 2, 3, 3}, 1};
  Inputs in = inputs_of(k, 7);
  std::vector<double> w = in[1].to_vector<double>();
  w[0] = INFINITY;  // channel 0's top-left tap: over the padding in the first row
  in[1] = tensor(w, k.w);
  const std::vector<Tensor> want = fused(in, attrs(k, "none")), got = run_kernel(in, k, Layout::ChannelsLast, false);
  const std::vector<double> wv = want[0].to_vector<double>(), gv = got[0].to(f64).to_vector<double>();
  for (size_t i = 0; i < wv.size(); ++i) {
    EXPECT_EQ(std::isnan(gv[i]), std::isnan(wv[i])) << i;
    if (std::isinf(wv[i])) {
      EXPECT_EQ(gv[i], wv[i]) << i;
    } else if (!std::isnan(wv[i])) {
      EXPECT_NEAR(gv[i], wv[i], 1e-5) << i;
    }
  }
  EXPECT_EQ(std::count_if(wv.begin(), wv.end(), [](double v) { return std::isnan(v); }), 0);
  EXPECT_GT(std::count_if(wv.begin(), wv.end(), [](double v) { return std::isinf(v); }), 0);
}

// conv2d_max_pool2d_values (inference) returns conv2d_max_pool2d's maxima, in f64 (the
// loops) and f32 (the vector path).
TEST(ConvPool, TheValuesOpReturnsTheMaxima) {
  const FusedCase k{"three_channels_padded", {2, 3, 9, 10}, {16, 3, 3, 3}, 1};
  for (DType t : {f64, f32}) {
    Inputs in = inputs_of(k, 3);
    for (Tensor& i : in) i = i.to(t);
    const std::vector<Tensor> both = fused(in, attrs(k));
    const std::vector<Tensor> values =
        ops::call_many(*ops::find_op("conv2d_max_pool2d_values"), in, attrs(k), SourceLoc::current());
    ASSERT_EQ(values.size(), 1u);
    EXPECT_EQ(values[0].to_vector<double>(), both[0].to_vector<double>()) << t;
  }
}

// Window codes (a u8 offsets output: pool.h's window_code) hold each window's offset and
// whether its maximum is > 0, as the i32 offsets and the maxima say, in every layout, with
// and without the relu, and in rows the loops do again (a NaN); and through the op.
TEST(ConvPool, WindowCodesHoldTheOffsetAndTheMaximumsSign) {
  const FusedCase k{"one_channel", {2, 1, 10, 10}, {16, 1, 3, 3}, 1};  // 16 channels: blocks of 16 hold them
  Inputs in = inputs_of(k, 11);
  std::vector<double> x = in[0].to_vector<double>();
  x[size_t(3 * 10 + 4)] = std::nan("");
  in[0] = tensor(x, k.x);
  for (Layout layout : {Layout::Plain, Layout::ChannelsLast, Layout::Blocks8, Layout::Blocks16})
    for (bool relu : {true, false}) {
      const std::vector<Tensor> offsets = run_kernel(in, k, layout, relu), codes = run_kernel(in, k, layout, relu, u8);
      const std::vector<double> maxima = offsets[0].to(f64).to_vector<double>();
      const std::vector<int32_t> at = offsets[1].to_vector<int32_t>();
      std::vector<int32_t> want(at.size());
      for (size_t i = 0; i < at.size(); ++i) want[i] = at[i] | (maxima[i] > 0 ? 4 : 0);
      EXPECT_EQ(codes[1].to(i32).to_vector<int32_t>(), want) << int(layout) << " " << relu;
      EXPECT_ALL_CLOSE(codes[0], offsets[0], 0, 0);
    }
  ops::Attrs coded = attrs(k);
  coded.set("window_codes", int64_t(1));
  const std::vector<Tensor> by_op = fused(in, coded), plain = fused(in, attrs(k));
  EXPECT_EQ(by_op[1].dtype(), u8);
  const std::vector<int32_t> at = plain[1].to_vector<int32_t>();
  const std::vector<double> maxima = plain[0].to_vector<double>();
  std::vector<int32_t> want(at.size());
  for (size_t i = 0; i < at.size(); ++i) want[i] = at[i] | (maxima[i] > 0 ? 4 : 0);
  EXPECT_EQ(by_op[1].to(i32).to_vector<int32_t>(), want);
}

TEST(ConvPool, ErrorsNameTheOpAndShapes) {
  const FusedCase k{"one_channel", {1, 1, 6, 6}, {8, 1, 3, 3}, 0};
  const Inputs in = inputs_of(k, 9);
  EXPECT_THROWS_WITH(ShapeError, fused({in[0], in[1], zeros({7}, f64)}, attrs(k)), "conv2d_max_pool2d", "bias",
                     "[8]");
  EXPECT_THROWS_WITH(ValueError, fused(in, attrs(k, "gelu")), "conv2d_max_pool2d", "gelu");
  ops::Attrs big = attrs(k);
  big.set("pool_kernel", std::vector<int64_t>{5, 5});
  EXPECT_THROWS_WITH(ShapeError, fused(in, big), "conv2d_max_pool2d", "[1,8,4,4]", "smaller");
  ops::Attrs grouped = attrs(k);
  grouped.set("groups", int64_t(2));
  EXPECT_THROWS_WITH(ShapeError, fused({uniform({1, 2, 6, 6}, -1, 1, 1), in[1], in[2]}, grouped), "conv2d_max_pool2d",
                     "groups");
  ops::Attrs wide = attrs(k);
  wide.set("pool_kernel", std::vector<int64_t>{3, 3});
  wide.set("pool_stride", std::vector<int64_t>{3, 3});
  wide.set("window_codes", int64_t(1));
  EXPECT_THROWS_WITH(ValueError, fused(in, wide), "conv2d_max_pool2d", "at most 4 positions");
}

}  // namespace
}  // namespace baton::testing
