// conv2d_backward_weight_bias_pooled's kernel: its f32 path for channels-last gradients
// (what plans hand it; 3x3 convolutions under 2x2 windows) against the op's generic loops
// in f64 (which the op harness checks against an independent reference), for a plain
// convolution, one with padding (windows at the image's edge) and a strided one, the input
// plain or channels-last; and its errors.
#include <gtest/gtest.h>

#include <cmath>

#include "dispatch/registry.h"
#include "harness/op_harness.h"
#include "kernels/cpu/conv_through_pool.h"

namespace baton::testing {
namespace {

Tensor channels_last(const Tensor& t) { return t.permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2}); }

struct PooledCase {
  const char* name;
  Shape x, w;
  int64_t stride, pad;
};

ops::Attrs attrs(const PooledCase& k) {
  return {{"stride", std::vector<int64_t>{k.stride, k.stride}}, {"padding", std::vector<int64_t>{k.pad, k.pad}},
          {"dilation", std::vector<int64_t>{1, 1}},           {"groups", int64_t(1)},
          {"weight_shape", k.w.vec()},                         {"pool_kernel", std::vector<int64_t>{2, 2}},
          {"pool_stride", std::vector<int64_t>{2, 2}}};
}

std::vector<Tensor> pooled_gradients(const Inputs& in, const PooledCase& k) {
  return ops::call_many(*ops::find_op("conv2d_backward_weight_bias_pooled"), in, attrs(k), SourceLoc::current());
}

// The pooled shape of case k's convolution output under 2x2 windows.
Shape pooled_shape(const PooledCase& k) {
  const int64_t out = (k.x[2] + 2 * k.pad - 3) / k.stride + 1;
  return {k.x[0], k.w[0], out / 2, out / 2};
}

// Tolerance: f32 sums of up to ~800 products of values in [-1, 1] in another order than
// the f64 loops: ~1e-5 of the largest gradient measured; 1e-4 of it leaves room without
// hiding a wrong tap (off by ~1e-1).
TEST(ConvThroughPool, ChannelsLastF32MatchesTheLoopsInDouble) {
  for (const PooledCase& k : {PooledCase{"unpadded", {3, 1, 12, 12}, {16, 1, 3, 3}, 1, 0},
                              PooledCase{"padded", {2, 3, 9, 9}, {16, 3, 3, 3}, 1, 1},
                              PooledCase{"strided", {2, 1, 13, 13}, {8, 1, 3, 3}, 2, 1}}) {
    const Shape pooled = pooled_shape(k);
    const Tensor gy = uniform(pooled, -1, 1, 1), maxima = uniform(pooled, -1, 1, 2), x = uniform(k.x, -1, 1, 3);
    const Tensor offsets = floor(uniform(pooled, 0, 4, 4)).to(i32);
    const std::vector<Tensor> want = pooled_gradients({gy, offsets, x, maxima}, k);
    for (bool x_last : {false, true}) {  // x plain, or channels-last (the row pairs gathered lane by lane)
      const Tensor input = x_last ? channels_last(x.to(f32)) : x.to(f32);
      const std::vector<Tensor> got = pooled_gradients(
          {channels_last(gy.to(f32)), channels_last(offsets), input, channels_last(maxima.to(f32))}, k);
      for (size_t i = 0; i < 2; ++i) {
        const double largest = max(abs(want[i])).item<double>();
        EXPECT_ALL_CLOSE(got[i].to(f64), want[i], 1e-4 * largest, 0)
            << k.name << (i ? " bias" : " weight") << (x_last ? ", x channels-last" : "");
      }
    }
  }
}

// Blocks of 8 channels (a plan's nChw8c) run 8 lanes; channels-last gradients of 16k
// channels run 16 on AVX-512 machines. Each lane sums the same products in the same
// order, so both give the same f32 bits.
TEST(ConvThroughPool, SixteenLanesGiveTheBitsOfEight) {
  const PooledCase k{"padded", {3, 1, 12, 12}, {32, 1, 3, 3}, 1, 1};
  const Shape pooled = pooled_shape(k);
  const int64_t n = k.x[0], o = k.w[0], ph = pooled[2], out = ph * 2;
  const kernels::ConvGeom g{n, 1, k.x[2], k.x[3], o, 3, 3, out, out, 1, 1, 1, k.pad, k.pad, 1, 1};
  const kernels::PoolGeom p{n, o, out, out, 2, 2, 2, 2, 0, 0, ph, ph};
  const Tensor gy = uniform(pooled, -1, 1, 1).to(f32), maxima = uniform(pooled, -1, 1, 2).to(f32);
  const Tensor offsets = floor(uniform(pooled, 0, 4, 4)).to(i32), x = uniform(k.x, -1, 1, 3).to(f32);
  auto blocks_of_8 = [&](const Tensor& t) {  // plain strides over nChw8c bytes
    return t.reshape({n, o / 8, 8, ph, ph}).permute({0, 1, 3, 4, 2}).contiguous().reshape(pooled);
  };
  auto gradients = [&](const Tensor& dy, const Tensor& at, const Tensor& m, int64_t block) {
    Tensor gw = empty(k.w, f32), gb = empty({o}, f32);
    kernels::conv_backward_weight_through_pool(g, p, dy, at, &m, x, gw, gb, {block, block, block, 0});
    return std::vector<std::vector<float>>{gw.to_vector<float>(), gb.to_vector<float>()};
  };
  const auto eight = gradients(blocks_of_8(gy), blocks_of_8(offsets), blocks_of_8(maxima), 8);
  const auto sixteen = gradients(channels_last(gy), channels_last(offsets), channels_last(maxima), 0);
  EXPECT_EQ(sixteen, eight);
}

// Window codes (u8: offset | 4 where the maximum is > 0, as conv2d_max_pool2d writes them
// for this step) give what the i32 offsets and the maxima give: the f32 vector path
// (channels-last, plain input), the loops (f64), and the way through the output gradient
// that a NaN pixel of x takes.
Tensor window_codes(const Tensor& offsets, const Tensor& maxima) {
  const std::vector<int32_t> at = offsets.to_vector<int32_t>();
  const std::vector<double> m = maxima.to_vector<double>();
  std::vector<double> codes(at.size());
  for (size_t i = 0; i < at.size(); ++i) codes[i] = at[i] | (m[i] > 0 ? 4 : 0);
  return tensor(codes, offsets.shape()).to(u8);
}

TEST(ConvThroughPool, WindowCodesGiveWhatOffsetsAndMaximaGive) {
  const PooledCase k{"padded", {2, 3, 9, 9}, {16, 3, 3, 3}, 1, 1};
  const Shape pooled = pooled_shape(k);
  const Tensor gy = uniform(pooled, -1, 1, 1), maxima = uniform(pooled, -1, 1, 2), x = uniform(k.x, -1, 1, 3);
  const Tensor offsets = floor(uniform(pooled, 0, 4, 4)).to(i32), codes = window_codes(offsets, maxima);
  std::vector<double> pixels = x.to_vector<double>();
  pixels[5] = std::nan("");
  for (const Tensor& input : {x, tensor(pixels, k.x)}) {
    const std::vector<Tensor> want = pooled_gradients({gy, offsets, input, maxima}, k);
    const std::vector<Tensor> loops = pooled_gradients({gy, codes, input}, k);
    const std::vector<Tensor> vectors =
        pooled_gradients({channels_last(gy.to(f32)), channels_last(codes), input.to(f32)}, k);
    for (size_t i = 0; i < 2; ++i) {  // (the f32 sums of values in [-1, 1], as above)
      EXPECT_ALL_CLOSE(loops[i], want[i], 0, 0) << i;
      EXPECT_ALL_CLOSE(vectors[i].to(f64), want[i], 1e-4, 1e-4) << i;
    }
  }
}

TEST(ConvThroughPool, AnOffsetOutsideItsWindowIsAnError) {
  const PooledCase k{"unpadded", {1, 1, 6, 6}, {8, 1, 3, 3}, 1, 0};
  const Shape pooled = pooled_shape(k);
  Tensor offsets = zeros(pooled, i32);
  offsets.data<int32_t>()[3] = 4;  // a 2x2 window has positions 0-3
  const Tensor gy = uniform(pooled, -1, 1, 1).to(f32), x = uniform(k.x, -1, 1, 2).to(f32);
  EXPECT_THROWS_WITH(IndexError, pooled_gradients({gy, offsets, x}, k), "conv2d_backward_weight_bias_pooled",
                     "window");
  EXPECT_THROWS_WITH(IndexError, pooled_gradients({channels_last(gy), channels_last(offsets), x}, k),
                     "conv2d_backward_weight_bias_pooled", "window");
  Tensor codes = zeros(pooled, i32).to(u8);
  codes.data<uint8_t>()[3] = 8;  // codes hold 3 bits
  EXPECT_THROWS_WITH(IndexError, pooled_gradients({gy, codes, x}, k), "conv2d_backward_weight_bias_pooled", "window");
  EXPECT_THROWS_WITH(IndexError, pooled_gradients({channels_last(gy), channels_last(codes), x}, k),
                     "conv2d_backward_weight_bias_pooled", "window");
  EXPECT_THROWS_WITH(ShapeError, pooled_gradients({gy, codes, x, gy}, k), "conv2d_backward_weight_bias_pooled",
                     "no maxima input");
}

// A NaN pixel of x: the weight gradients whose taps read it are NaN, as eager's from the
// convolution's output gradient (its zeros times the pixel), the others as before; in f32
// channels-last (the vector path's operands) and f64.
TEST(ConvThroughPool, ANaNInputPixelGivesEagersNaNs) {
  const PooledCase k{"unpadded", {2, 1, 8, 8}, {8, 1, 3, 3}, 1, 0};
  const Shape pooled = pooled_shape(k);
  const Tensor gy = uniform(pooled, -1, 1, 1), maxima = uniform(pooled, -1, 1, 2);
  const Tensor offsets = floor(uniform(pooled, 0, 4, 3)).to(i32);
  std::vector<double> pixels = uniform(k.x, -1, 1, 4).to_vector<double>();
  pixels[0] = std::nan("");  // read by tap (0, 0) only
  const Tensor x = tensor(pixels, k.x);
  // Eager's way: the pooling's gradient scattered (where the maximum is > 0), then the
  // convolution's weight and bias gradients.
  ops::Attrs pool{{"kernel", std::vector<int64_t>{2, 2}}, {"stride", std::vector<int64_t>{2, 2}},
                  {"padding", std::vector<int64_t>{0, 0}}, {"input_shape", std::vector<int64_t>{2, 8, 6, 6}}};
  for (DType t : {f64, f32}) {
    const Tensor dy = ops::call_many(*ops::find_op("max_pool2d_window_backward"),
                                     std::vector<Tensor>{gy.to(t), offsets, maxima.to(t)}, pool, SourceLoc::current())[0];
    const ops::Attrs a{{"stride", std::vector<int64_t>{1, 1}}, {"padding", std::vector<int64_t>{0, 0}},
                       {"dilation", std::vector<int64_t>{1, 1}}, {"groups", int64_t(1)},
                       {"weight_shape", k.w.vec()}};
    const std::vector<Tensor> want = ops::call_many(*ops::find_op("conv2d_backward_weight_bias"),
                                                    std::vector<Tensor>{dy, x.to(t)}, a, SourceLoc::current());
    const bool last = t == f32;
    const std::vector<Tensor> got = pooled_gradients(
        {last ? channels_last(gy.to(t)) : gy, last ? channels_last(offsets) : offsets, x.to(t),
         last ? channels_last(maxima.to(t)) : maxima}, k);
    for (size_t i = 0; i < 2; ++i) EXPECT_ALL_CLOSE(got[i].to(f64), want[i].to(f64), 1e-5, 1e-5) << t << " " << i;
    const std::vector<double> w = got[0].to(f64).to_vector<double>();
    for (int64_t o = 0; o < 8; ++o) EXPECT_TRUE(std::isnan(w[size_t(o * 9)])) << o;  // tap (0, 0)
  }
}

TEST(ConvThroughPool, ShapesThatDoNotMatchNameTheOp) {
  const PooledCase k{"unpadded", {1, 1, 6, 6}, {8, 1, 3, 3}, 1, 0};
  const Tensor x = uniform(k.x, -1, 1, 2).to(f32);
  EXPECT_THROWS_WITH(ShapeError, pooled_gradients({zeros({1, 8, 3, 3}), zeros({1, 8, 3, 3}, i32), x}, k),
                     "conv2d_backward_weight_bias_pooled", "[1,8,2,2]");
  EXPECT_THROWS_WITH(ShapeError, pooled_gradients({zeros({1, 8, 2, 2}), zeros({1, 8, 2, 2}, f32), x}, k),
                     "conv2d_backward_weight_bias_pooled", "i32");
  ops::Attrs overlapping = attrs(k);
  overlapping.set("pool_stride", std::vector<int64_t>{1, 1});
  EXPECT_THROWS_WITH(ValueError,
                     ops::call_many(*ops::find_op("conv2d_backward_weight_bias_pooled"),
                                    std::vector<Tensor>{zeros({1, 8, 3, 3}), zeros({1, 8, 3, 3}, i32), x}, overlapping,
                                    SourceLoc::current()),
                     "conv2d_backward_weight_bias_pooled", "overlap");
}

}  // namespace
}  // namespace baton::testing
