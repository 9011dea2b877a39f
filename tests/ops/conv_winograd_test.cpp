// baton's Winograd F(4x4, 3x3) convolution: the kernel against f64 direct convolution on
// both layouts it reads (nChw8c and channels-last), partial tiles, several blocks of tiles
// and chunks of channels, and as input and weight gradients; plans that take it (forced,
// so on any machine): inference with non-finite inputs, the plain weights made again for
// a later batch size, the record explain() keeps, and training steps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "baton/baton.h"
#include "harness/op_harness.h"
#include "kernels/cpu/conv_winograd.h"
#include "kernels/cpu/layout.h"

namespace baton {
namespace {

// t ([n, c, h, w]) as 8-channel vectors: channel-blocked (nChw8c) or channels-last.
std::vector<float> as_vectors(const Tensor& t, bool blocked) {
  const int64_t n = t.size(0), c = t.size(1), h = t.size(2), w = t.size(3);
  const Tensor v = blocked ? t.reshape({n, c / 8, 8, h, w}).permute({0, 1, 3, 4, 2}) : t.permute({0, 2, 3, 1});
  return v.contiguous().to(f32).to_vector<float>();
}

Tensor from_vectors(const std::vector<float>& v, const Shape& s, bool blocked) {
  if (!blocked) return tensor(v, {s[0], s[2], s[3], s[1]}).permute({0, 3, 1, 2}).contiguous();
  return tensor(v, {s[0], s[1] / 8, s[2], s[3], 8}).permute({0, 1, 4, 2, 3}).reshape(s).contiguous();
}

kernels::VectorLayout layout_of(const Shape& s, bool blocked) {
  return blocked ? kernels::blocked8_vectors(s) : kernels::channels_last_vectors(s);
}

// The 16-lane transforms (on AVX-512, where 16 channels lie one stride apart) against the
// 8-lane ones (blocks of 8): each value goes through the same operations, and in the
// Release build the results are the same bits. They are not bound to be: the compiler may
// fuse a multiply and an add in one path and not in the other (an ASan build, which
// inlines differently, gave results 1 ulp apart). So within 1e-6 of the largest value,
// ~8 ulp, where a lane or channel mixed up is off by the values' own size.
void expect_same_values(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  float largest = 0;
  for (float v : want) largest = std::max(largest, std::abs(v));
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-6 * largest) << what << ", element " << i;
}

struct KernelCase {
  const char* name;
  int64_t n, c, h, w, o, pad;
  bool blocked, bias, residual, relu;
  bool in_place = false;  // the result written over the residual
};

void PrintTo(const KernelCase& c, std::ostream* os) { *os << c.name; }

class WinogradKernel : public ::testing::TestWithParam<KernelCase> {};

// Against f64 direct convolution of the same f32 values. Tolerance: the transforms scale
// values by up to 8 and 1/15, so f32 Winograd's error is ~1e-6 of the largest result
// (measured 0.6-2.6e-6 on these shapes, 3e-6 with 256 channels, 5e-6 with 512); 3e-5 of
// it leaves room without hiding a wrong tap, which is off by ~1e-1. With either block size.
kernels::ConvGeom geom_of(const KernelCase& k) {
  return {k.n, k.c, k.h, k.w, k.o, 3, 3, k.h + 2 * k.pad - 2, k.w + 2 * k.pad - 2, 1, 1, 1, k.pad, k.pad, 1, 1};
}

// The kernel's result for case k in f32 ([n, o, h, w]), its activations channel-blocked or
// channels-last, with blocks of tiles of `block` bytes.
Tensor winograd_result(const KernelCase& k, bool blocked, int64_t block) {
  const kernels::ConvGeom g = geom_of(k);
  const Tensor x = testing::uniform(g.input_shape(), -1, 1, 1).to(f32);
  const Tensor w = testing::uniform(g.weight_shape(), -0.3, 0.3, 2).to(f32);
  const std::vector<float> xv = as_vectors(x, blocked);
  const std::vector<float> bv = testing::uniform({k.o}, -1, 1, 3).to(f32).to_vector<float>();
  std::vector<float> rv = as_vectors(testing::uniform(g.output_shape(), -1, 1, 4).to(f32), blocked);
  std::vector<float> out(size_t(g.output_shape().numel()));
  const Tensor packed = kernels::winograd_pack_weights(g, w);
  const kernels::VectorLayout out_layout = layout_of(g.output_shape(), blocked);
  float* result = k.in_place ? rv.data() : out.data();
  kernels::conv_winograd_f32(g, {.x = xv.data(),
                                 .x_layout = layout_of(g.input_shape(), blocked),
                                 .packed_weights = packed.data<float>(),
                                 .bias = k.bias ? bv.data() : nullptr,
                                 .residual = k.residual ? rv.data() : nullptr,
                                 .residual_layout = out_layout,
                                 .relu = k.relu,
                                 .out = result,
                                 .out_layout = out_layout,
                                 .block_bytes = block});
  return from_vectors(k.in_place ? rv : out, g.output_shape(), blocked);
}

TEST_P(WinogradKernel, MatchesDirectConvolutionInDouble) {
  const KernelCase& k = GetParam();
  const kernels::ConvGeom g = geom_of(k);
  ASSERT_TRUE(kernels::winograd_fits(g));
  const Tensor x = testing::uniform(g.input_shape(), -1, 1, 1).to(f32);  // as winograd_result's operands
  const Tensor w = testing::uniform(g.weight_shape(), -0.3, 0.3, 2).to(f32);
  const Tensor b = testing::uniform({k.o}, -1, 1, 3).to(f32);
  const Tensor r = testing::uniform(g.output_shape(), -1, 1, 4).to(f32);
  Tensor want = conv2d(x.to(f64), w.to(f64), k.bias ? b.to(f64) : Tensor(), {.padding = {k.pad, k.pad}});
  if (k.residual) want = want + r.to(f64);
  if (k.relu) want = relu(want);
  const double largest = max(abs(want)).item<double>();
  for (int64_t block : {kernels::kWinogradSmallBlock, kernels::kWinogradLargeBlock}) {
    const Tensor got = winograd_result(k, k.blocked, block).to(f64);
    EXPECT_ALL_CLOSE(got, want, 3e-5 * largest, 0) << (block >> 20) << " MiB blocks";
    EXPECT_LT(max(abs(got - want)).item<double>(), 1e-5 * largest);  // as measured, with margin
  }
}

// Channels-last activations of channels in 16s take the 16-lane transforms on AVX-512;
// channel blocks of 8 take the 8-lane ones (expect_same_values; without AVX-512 both take
// 8 lanes).
TEST_P(WinogradKernel, ChannelsLastMatchesBlocksOfEight) {
  const KernelCase& k = GetParam();
  expect_same_values(winograd_result(k, false, kernels::kWinogradSmallBlock).to_vector<float>(),
                     winograd_result(k, true, kernels::kWinogradSmallBlock).to_vector<float>(), k.name);
}

// One thread takes every tile and every output; two take a run of the tiles each, or,
// with few tiles, every tile and a share of the outputs. Each output sums the same
// products in the same order either way (expect_same_values).
TEST_P(WinogradKernel, TwoThreadsMatchOne) {
  const KernelCase& k = GetParam();
  const int threads = get_num_threads();
  set_num_threads(1);
  const std::vector<float> one = winograd_result(k, k.blocked, kernels::kWinogradSmallBlock).to_vector<float>();
  set_num_threads(2);
  const std::vector<float> two = winograd_result(k, k.blocked, kernels::kWinogradSmallBlock).to_vector<float>();
  set_num_threads(threads);
  expect_same_values(two, one, k.name);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, WinogradKernel,
    ::testing::Values(
        KernelCase{"one_tile_blocked", 1, 8, 4, 4, 16, 1, true, true, false, false},
        // 9x7 outputs: tiles cut at the bottom and the right
        KernelCase{"partial_tiles_channels_last", 2, 16, 9, 7, 16, 1, false, true, true, true},
        // 136 channels: a chunk of 128 and one of 8; no padding
        KernelCase{"channel_chunks", 1, 136, 10, 10, 32, 0, true, false, true, true},
        // 289 tiles of 64 + 64 channels: several blocks of 2 MiB (fewer of 8); padding 2
        KernelCase{"several_blocks", 1, 64, 66, 66, 64, 2, true, true, false, true},
        KernelCase{"result_over_the_residual", 2, 8, 6, 6, 16, 1, false, true, true, true, true},
        // 3 panels of 16 outputs: on AVX-512 a product call of two panels, then one of one
        KernelCase{"odd_panel_count", 2, 16, 11, 11, 48, 1, false, true, false, true},
        // 16 tiles: fewer than two product calls a thread, so the threads split the outputs
        KernelCase{"few_tiles_split_outputs", 1, 32, 14, 14, 64, 1, false, true, true, true},
        // 4 tiles, the outputs split into one group of two panels and one of one (AVX-512)
        KernelCase{"few_tiles_odd_groups", 1, 16, 7, 7, 48, 1, true, true, true, false}),
    [](const auto& info) { return std::string(info.param.name); });

// The input gradient as the kernel's forward convolution (weights transposed and flipped)
// against autograd's, in f64, for paddings 0, 1 and 2 (the gradient's 2, 1 and 0).
TEST(WinogradKernel, InputGradientMatchesAutogradInDouble) {
  for (int64_t pad : {0, 1, 2}) {
    const kernels::ConvGeom g{2, 16, 9, 8, 8, 3, 3, 9 + 2 * pad - 2, 8 + 2 * pad - 2, 1, 1, 1, pad, pad, 1, 1};
    const kernels::ConvGeom gi = kernels::winograd_input_gradient_geom(g);
    ASSERT_TRUE(kernels::winograd_fits(gi)) << pad;
    const Tensor x = testing::uniform(g.input_shape(), -1, 1, 1).to(f64).requires_grad_();
    const Tensor w = testing::uniform(g.weight_shape(), -0.3, 0.3, 2).to(f32);
    const Tensor gy = testing::uniform(g.output_shape(), -1, 1, 3).to(f32);
    const Tensor want = grad(sum(conv2d(x, w.to(f64), {}, {.padding = {pad, pad}}) * gy.to(f64)), {x}).at(0);
    const std::vector<float> gyv = as_vectors(gy, true);
    std::vector<float> out(size_t(g.input_shape().numel()));
    const Tensor packed = kernels::winograd_pack_input_gradient_weights(g, w);
    kernels::conv_winograd_f32(gi, {.x = gyv.data(),
                                    .x_layout = layout_of(g.output_shape(), true),
                                    .packed_weights = packed.data<float>(),
                                    .bias = nullptr,
                                    .residual = nullptr,
                                    .residual_layout = {},
                                    .relu = false,
                                    .out = out.data(),
                                    .out_layout = layout_of(g.input_shape(), true)});
    const double largest = max(abs(want)).item<double>();
    EXPECT_ALL_CLOSE(from_vectors(out, g.input_shape(), true).to(f64), want, 3e-5 * largest, 0) << "padding " << pad;
  }
}

// The input gradient by the forward's transforms transposed against autograd's, in f64:
// paddings 0, 1 and 2 with partial tiles, both layouts, and 50x50 images of 64 channels
// (13 rows of 13 tiles; on two threads the second's run starts at row 6, inside the image,
// so its first two rows go through its strip; each thread's rows go in blocks of 4 (2 MiB)
// or 6 (8 MiB), so a block's first row adds to the rows the one before wrote).
TEST(WinogradKernel, TransposedInputGradientMatchesAutogradInDouble) {
  struct Case {
    int64_t n, c, side, o, pad;
    bool blocked;
  };
  for (const Case& k : {Case{2, 16, 9, 8, 0, true}, Case{2, 16, 9, 8, 1, false}, Case{3, 32, 10, 16, 2, true},
                        Case{1, 64, 50, 64, 1, false}}) {
    const int64_t out = k.side + 2 * k.pad - 2;
    const kernels::ConvGeom g{k.n, k.c, k.side, k.side, k.o, 3, 3, out, out, 1, 1, 1, k.pad, k.pad, 1, 1};
    ASSERT_TRUE(kernels::winograd_input_gradient_fits(g));
    const Tensor x = testing::uniform(g.input_shape(), -1, 1, 1).to(f64).requires_grad_();
    const Tensor w = testing::uniform(g.weight_shape(), -0.3, 0.3, 2).to(f32);
    const Tensor gy = testing::uniform(g.output_shape(), -1, 1, 3).to(f32);
    const Tensor want = grad(sum(conv2d(x, w.to(f64), {}, {.padding = {k.pad, k.pad}}) * gy.to(f64)), {x}).at(0);
    const Tensor packed = kernels::winograd_pack_transposed_weights(g, w);
    auto input_gradient = [&](bool blocked, int64_t block) {
      const std::vector<float> gyv = as_vectors(gy, blocked);
      std::vector<float> result(size_t(g.input_shape().numel()), std::numeric_limits<float>::quiet_NaN());
      kernels::conv_winograd_input_grad_f32(g, gyv.data(), layout_of(g.output_shape(), blocked),
                                            packed.data<float>(), result.data(), layout_of(g.input_shape(), blocked),
                                            nullptr, block);
      return from_vectors(result, g.input_shape(), blocked);
    };
    const double largest = max(abs(want)).item<double>();
    for (int64_t block : {kernels::kWinogradSmallBlock, kernels::kWinogradLargeBlock})
      EXPECT_ALL_CLOSE(input_gradient(k.blocked, block).to(f64), want, 3e-5 * largest, 0)
          << k.c << " channels of " << k.side << "x" << k.side << ", padding " << k.pad << ", " << (block >> 20)
          << " MiB blocks";
    // Channels-last takes 16-lane transforms on AVX-512 where the channels come in 16s, blocks
    // of 8 the 8-lane ones (expect_same_values).
    expect_same_values(input_gradient(false, kernels::kWinogradSmallBlock).to_vector<float>(),
                       input_gradient(true, kernels::kWinogradSmallBlock).to_vector<float>(),
                       str(k.c, " channels, padding ", k.pad));
  }
}

// The weight gradient in the transformed domain against autograd's, in f64, for paddings
// 0, 1 and 2, partial tiles (7x7 outputs at padding 0 of 9x9), 48 channels (3 panels of
// 16 outputs: a product call of two and one of one on AVX-512), 32x32 images of 64
// channels (128 tiles, each thread's run in several blocks with 2 MiB, products summed
// over blocks and then over the threads' sums), and 96 channels, whose products (1.3 MB)
// are too big to have one per thread: the threads share each block.
TEST(WinogradKernel, WeightGradientMatchesAutogradInDouble) {
  struct Case {
    int64_t channels, side, pad;
  };
  for (const Case& k : {Case{16, 9, 0}, Case{16, 9, 1}, Case{16, 9, 2}, Case{48, 9, 1}, Case{64, 32, 1},
                        Case{96, 10, 1}}) {
    const int64_t out = k.side + 2 * k.pad - 2;
    const kernels::ConvGeom g{2, k.channels, k.side, k.side, k.channels, 3, 3, out, out, 1, 1, 1, k.pad, k.pad, 1, 1};
    const Tensor x = testing::uniform(g.input_shape(), -1, 1, 1).to(f32);
    const Tensor w = testing::uniform(g.weight_shape(), -0.3, 0.3, 2).to(f64).requires_grad_();
    const Tensor gy = testing::uniform(g.output_shape(), -1, 1, 3).to(f32);
    const Tensor want = grad(sum(conv2d(x.to(f64), w, {}, {.padding = {k.pad, k.pad}}) * gy.to(f64)), {w}).at(0);
    const std::vector<float> xv = as_vectors(x, true);
    auto weight_gradient = [&](bool dy_blocked, int64_t block) {
      const std::vector<float> gyv = as_vectors(gy, dy_blocked);
      std::vector<float> got(size_t(g.weight_shape().numel()));
      kernels::conv_winograd_weight_grad_f32(g, xv.data(), layout_of(g.input_shape(), true), gyv.data(),
                                             layout_of(g.output_shape(), dy_blocked), got.data(), nullptr, block);
      return got;
    };
    const double largest = max(abs(want)).item<double>();
    for (int64_t block : {kernels::kWinogradSmallBlock, kernels::kWinogradLargeBlock})
      EXPECT_ALL_CLOSE(tensor(weight_gradient(false, block), g.weight_shape()).to(f64), want, 3e-5 * largest, 0)
          << k.channels << " channels, padding " << k.pad << ", " << (block >> 20) << " MiB blocks";
    // dy channels-last takes the 16-lane transform on AVX-512 where its channels come in 16s,
    // blocks of 8 the 8-lane one (expect_same_values).
    expect_same_values(weight_gradient(false, kernels::kWinogradSmallBlock),
                       weight_gradient(true, kernels::kWinogradSmallBlock),
                       str(k.channels, " channels, padding ", k.pad));
  }
}

// Element (n, c, y, x) of a result in 8-channel vectors whose lanes lie `lane` apart.
template <class T>
T element(const std::vector<T>& v, const kernels::VectorLayout& l, int64_t lane, int64_t n, int64_t c, int64_t y,
          int64_t x) {
  return v[size_t(n * l.image + c / 8 * l.block + y * l.row + x * l.pixel + c % 8 * lane)];
}

// The pooling in the output transform: into channels-last or planes (NCHW), 16 channels a
// vector on AVX-512 machines; into blocks of 8, 8 channels a vector. The same comparisons
// on the same values (expect_same_values); and the same window offsets (a flip would need
// two of a window's values within rounding of each other: with these values neither the
// Release nor the ASan build has one). 11x11
// outputs: the last row and column of tiles hold a partial window, which the pooling
// leaves out.
TEST(WinogradKernel, PoolingMatchesInEveryLayout) {
  const kernels::ConvGeom g{2, 16, 13, 13, 32, 3, 3, 11, 11, 1, 1, 1, 0, 0, 1, 1};
  const int64_t oh = 5, ow = 5, plane = oh * ow;
  const Shape pooled{g.n, g.o, oh, ow};
  const Tensor x = testing::uniform(g.input_shape(), -1, 1, 1).to(f32);
  const Tensor w = testing::uniform(g.weight_shape(), -0.3, 0.3, 2).to(f32);
  const std::vector<float> xv = as_vectors(x, false), bv = testing::uniform({g.o}, -1, 1, 3).to(f32).to_vector<float>();
  const Tensor packed = kernels::winograd_pack_weights(g, w);
  struct Layout {
    const char* name;
    kernels::VectorLayout vectors;
    int64_t lane;
  };
  const Layout layouts[] = {{"channels-last", kernels::channels_last_vectors(pooled), 1},
                            {"blocks of 8", kernels::blocked8_vectors(pooled), 1},
                            {"planes", {.image = g.o * plane, .block = 8 * plane, .row = ow, .pixel = 1}, plane}};
  std::vector<std::vector<float>> maxima;
  std::vector<std::vector<int32_t>> offsets;
  for (const Layout& l : layouts) {
    maxima.emplace_back(size_t(pooled.numel()));
    offsets.emplace_back(size_t(pooled.numel()));
    const kernels::WinogradPooling pool{maxima.back().data(), l.vectors, l.lane, offsets.back().data(), l.vectors,
                                        l.lane, oh, ow};
    kernels::conv_winograd_f32(g, {.x = xv.data(),
                                   .x_layout = kernels::channels_last_vectors(g.input_shape()),
                                   .packed_weights = packed.data<float>(),
                                   .bias = bv.data(),
                                   .relu = true,
                                   .pool = &pool});
  }
  // Each layout's results in NCHW order.
  auto in_nchw = [&](const auto& values, const Layout& l) {
    std::vector<std::decay_t<decltype(values[0])>> out;
    for (int64_t n = 0; n < g.n; ++n)
      for (int64_t c = 0; c < g.o; ++c)
        for (int64_t y = 0; y < oh; ++y)
          for (int64_t xx = 0; xx < ow; ++xx) out.push_back(element(values, l.vectors, l.lane, n, c, y, xx));
    return out;
  };
  for (size_t k = 1; k < std::size(layouts); ++k) {
    expect_same_values(in_nchw(maxima[k], layouts[k]), in_nchw(maxima[0], layouts[0]), layouts[k].name);
    EXPECT_EQ(in_nchw(offsets[k], layouts[k]), in_nchw(offsets[0], layouts[0])) << layouts[k].name;
  }
}

// The pooling with few tiles (9), where two threads split the outputs: the maxima and
// window offsets one thread gives (expect_same_values; offsets equal).
TEST(WinogradKernel, PoolingWithSplitOutputsMatchesOneThread) {
  const kernels::ConvGeom g{1, 16, 13, 13, 64, 3, 3, 11, 11, 1, 1, 1, 0, 0, 1, 1};
  const Shape pooled{g.n, g.o, 5, 5};
  const Tensor x = testing::uniform(g.input_shape(), -1, 1, 1).to(f32);
  const Tensor packed = kernels::winograd_pack_weights(g, testing::uniform(g.weight_shape(), -0.3, 0.3, 2).to(f32));
  const std::vector<float> xv = as_vectors(x, false);
  auto pool_with = [&](int threads) {
    std::pair<std::vector<float>, std::vector<int32_t>> out{std::vector<float>(size_t(pooled.numel())),
                                                            std::vector<int32_t>(size_t(pooled.numel()))};
    const kernels::VectorLayout l = kernels::channels_last_vectors(pooled);
    const kernels::WinogradPooling pool{out.first.data(), l, 1, out.second.data(), l, 1, 5, 5};
    const int before = get_num_threads();
    set_num_threads(threads);
    kernels::conv_winograd_f32(g, {.x = xv.data(),
                                   .x_layout = kernels::channels_last_vectors(g.input_shape()),
                                   .packed_weights = packed.data<float>(),
                                   .relu = true,
                                   .pool = &pool});
    set_num_threads(before);
    return out;
  };
  const auto one = pool_with(1), two = pool_with(2);
  expect_same_values(two.first, one.first, "maxima");
  EXPECT_EQ(two.second, one.second);
}

// Both gradients from a pooled gradient, its operands (gradient, window offsets, maxima) in
// planes (NCHW: 16 channels a vector on AVX-512, gathered a plane apart) or in blocks of 8
// (8 channels a vector); x and dx channels-last in both. The same operations on the same
// values (expect_same_values).
TEST(WinogradKernel, PooledGradientMatchesInEitherLayout) {
  const kernels::ConvGeom g{2, 16, 13, 13, 32, 3, 3, 11, 11, 1, 1, 1, 0, 0, 1, 1};
  const int64_t oh = 5, ow = 5, plane = oh * ow;
  const Shape pooled{g.n, g.o, oh, ow};
  ASSERT_TRUE(kernels::winograd_backward_pooled_fits(g));
  const Tensor x = testing::uniform(g.input_shape(), -1, 1, 1).to(f32);
  const Tensor w = testing::uniform(g.weight_shape(), -0.3, 0.3, 2).to(f32);
  const Tensor gy = testing::uniform(pooled, -1, 1, 3).to(f32), maxima = testing::uniform(pooled, -1, 1, 4).to(f32);
  const Tensor offsets = floor(testing::uniform(pooled, 0, 3.999, 5)).to(f32);  // window positions 0-3
  const std::vector<float> xv = as_vectors(x, false);
  const Tensor packed = kernels::winograd_pack_transposed_weights(g, w);
  const kernels::VectorLayout planes{.image = g.o * plane, .block = 8 * plane, .row = ow, .pixel = 1};
  struct Result {
    std::vector<float> dx, gw, gb;
  };
  auto run = [&](bool blocked) {
    auto lay = [&](const Tensor& t) { return blocked ? as_vectors(t, true) : t.contiguous().to_vector<float>(); };
    const std::vector<float> gyv = lay(gy), maxv = lay(maxima), offv = lay(offsets);
    const std::vector<int32_t> offi(offv.begin(), offv.end());
    const kernels::VectorLayout l = blocked ? kernels::blocked8_vectors(pooled) : planes;
    const int64_t lane = blocked ? 1 : plane;
    Result r{std::vector<float>(size_t(g.input_shape().numel())), std::vector<float>(size_t(g.weight_shape().numel())),
             std::vector<float>(size_t(g.o))};
    const bool inside = kernels::conv_winograd_backward_pooled_f32(
        g, {gyv.data(), l, lane, offi.data(), l, lane, maxv.data(), l, lane, oh, ow}, packed.data<float>(),
        xv.data(), kernels::channels_last_vectors(g.input_shape()), r.dx.data(),
        kernels::channels_last_vectors(g.input_shape()), r.gw.data(), r.gb.data(), nullptr,
        kernels::kWinogradSmallBlock);
    EXPECT_TRUE(inside);
    return r;
  };
  const Result in_planes = run(false), in_blocks = run(true);
  for (auto [a, b, what] : {std::tuple{&in_planes.dx, &in_blocks.dx, "dx"},
                            std::tuple{&in_planes.gw, &in_blocks.gw, "gw"},
                            std::tuple{&in_planes.gb, &in_blocks.gb, "gb"}})
    expect_same_values(*a, *b, what);
}

TEST(WinogradKernel, PackedWeightsUnpackToTheSameValues) {
  const kernels::ConvGeom g{1, 24, 6, 6, 32, 3, 3, 6, 6, 1, 1, 1, 1, 1, 1, 1};
  const Tensor w = testing::uniform(g.weight_shape(), -1, 1, 7).to(f32);
  const Tensor back = kernels::winograd_unpack_weights(g, kernels::winograd_pack_weights(g, w));
  EXPECT_EQ(back.to_vector<float>(), w.to_vector<float>());
}

TEST(WinogradKernel, FitsOnlyItsGeometries) {
  auto geom = [](int64_t c, int64_t o, int64_t k, int64_t stride, int64_t pad) {
    return kernels::ConvGeom{1, c, 8, 8, o, k, k, 6, 6, 1, stride, stride, pad, pad, 1, 1};
  };
  EXPECT_TRUE(kernels::winograd_fits(geom(8, 16, 3, 1, 1)));
  EXPECT_FALSE(kernels::winograd_fits(geom(4, 16, 3, 1, 1)));   // channels not in vectors of 8
  EXPECT_FALSE(kernels::winograd_fits(geom(8, 8, 3, 1, 1)));    // outputs not in panels of 16
  EXPECT_FALSE(kernels::winograd_fits(geom(8, 16, 5, 1, 1)));   // 5x5
  EXPECT_FALSE(kernels::winograd_fits(geom(8, 16, 3, 2, 1)));   // stride 2
  EXPECT_FALSE(kernels::winograd_fits(geom(8, 16, 3, 1, 3)));   // padding past the tile
}

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// A stem, a residual block of 16 channels (ResNet's shape, smaller) and a 1x1 head, in
// eval mode and frozen: the batch norms fold into the convolutions, whose weights become
// constants of the plan. The block's two 3x3 convolutions read and write the plan's
// layout (the stem's and the head's reorder at the edges); the second takes the residual
// and the relu in its epilogue.
struct ResidualBlock {
  nn::Conv2d stem{3, 16, 3, Conv2dOptions{.padding = {1, 1}}}, head{16, 16, 1};
  nn::Conv2d conv1{16, 16, 3, Conv2dOptions{.padding = {1, 1}}}, conv2{16, 16, 3, Conv2dOptions{.padding = {1, 1}}};
  nn::BatchNorm2d bn1{16}, bn2{16};
  Graph g{"residual_block"};
  Tensor x = g.placeholder(f32, {"batch", 3, 10, 10}, "x");
  Tensor y;
  ResidualBlock() {
    bn1.running_var.copy_(testing::uniform({16}, 0.5, 2, 4).to(f32));
    bn2.running_mean.copy_(testing::uniform({16}, -0.5, 0.5, 5).to(f32));
    bn1.eval();
    bn2.eval();
    const Tensor h = relu(stem.forward(x));
    y = head.forward(relu(bn2.forward(conv2.forward(relu(bn1.forward(conv1.forward(h))))) + h));
  }
  Tensor input(int64_t batch, uint64_t seed) const { return testing::uniform({batch, 3, 10, 10}, -1, 1, seed).to(f32); }
};

// Plans whose activations are nChw8c (AVX2's choice) or channels-last (AVX-512's).
class WinogradPlans : public ::testing::TestWithParam<int64_t> {
 protected:
  kernels::onednn::ChannelBlockOverride block_{GetParam()};
};

// Tolerance against direct convolution (O0): as the kernel's, ~1e-6 of results of ~3.
constexpr double kPlanTolerance = 1e-4;

TEST_P(WinogradPlans, TakeTheKernelAndMatchDirectConvolution) {
  ResidualBlock net;
  const Tensor value = net.input(2, 5);
  Session direct(net.g, {.level = OptLevel::O0});
  const Tensor want = direct.run({net.y}, {{net.x, value}}).at(0);
  kernels::WinogradOverride use(true);
  Session planned(net.g, {.freeze = true});
  EXPECT_ALL_CLOSE(planned.run({net.y}, {{net.x, value}}).at(0), want, kPlanTolerance, 0);
  const std::string report = planned.explain();
  EXPECT_EQ(count(report, "baton winograd F(4x4,3x3)"), 2u) << report;
}

TEST_P(WinogradPlans, AreRefusedWhenTheOverrideSaysSo) {
  ResidualBlock net;
  kernels::WinogradOverride refuse(false);
  Session planned(net.g, {.freeze = true});
  planned.run({net.y}, {{net.x, net.input(2, 5)}});
  const std::string report = planned.explain();
  EXPECT_EQ(count(report, "baton winograd"), 0u) << report;
  EXPECT_EQ(count(report, "(winograd refused)"), 2u) << report;
}

// An infinity through Winograd's transforms would become NaN (inf - inf) over its whole
// tile; the step runs oneDNN's direct kernel then, so the result is direct convolution's
// to the element: the same infinities and NaNs in the same places.
TEST_P(WinogradPlans, NonFiniteInputsGetDirectConvolutionsResult) {
  ResidualBlock net;
  Tensor value = net.input(2, 6);
  float* v = value.data<float>();
  auto at = [&](int64_t n, int64_t c, int64_t y, int64_t x) -> float& { return v[((n * 3 + c) * 10 + y) * 10 + x]; };
  at(0, 3, 4, 4) = std::numeric_limits<float>::infinity();
  at(1, 1, 0, 9) = -std::numeric_limits<float>::infinity();
  at(1, 2, 5, 5) = std::numeric_limits<float>::quiet_NaN();
  Session direct(net.g, {.level = OptLevel::O0});
  const Tensor want = direct.run({net.y}, {{net.x, value}}).at(0);
  kernels::WinogradOverride use(true);
  Session planned(net.g, {.freeze = true});
  const Tensor got = planned.run({net.y}, {{net.x, value}}).at(0);
  EXPECT_ALL_CLOSE(got, want, kPlanTolerance, 0);  // NaN where NaN, the same infinities
  const std::vector<float> wanted = want.to_vector<float>();
  EXPECT_GT(std::count_if(wanted.begin(), wanted.end(), [](float e) { return std::isnan(e); }), 0);
}

// The plan keeps the weights only in the kernel's order; a later batch size is prepared
// from the plain weights made again from it, and an empty batch binds them.
TEST_P(WinogradPlans, OtherBatchSizesReadTheWeightsMadeAgain) {
  ResidualBlock net;
  Session direct(net.g, {.level = OptLevel::O0});
  kernels::WinogradOverride use(true);
  Session planned(net.g, {.freeze = true});
  for (int64_t batch : {2, 3, 2}) {
    const Tensor value = net.input(batch, uint64_t(10 + batch));
    EXPECT_ALL_CLOSE(planned.run({net.y}, {{net.x, value}}).at(0), direct.run({net.y}, {{net.x, value}}).at(0),
                     kPlanTolerance, 0);
  }
  EXPECT_EQ(planned.run({net.y}, {{net.x, zeros({0, 3, 10, 10})}}).at(0).shape(), (Shape{0, 16, 10, 10}));
}

struct GradientsCompared {
  std::vector<Tensor> direct;  // at O0
  std::string report;          // the plan's with Winograd forced
};

// The gradients at O0 (direct convolution) and at O2 with Winograd wherever it fits,
// expected equal within kPlanTolerance (NaN where NaN, the same infinities).
GradientsCompared with_and_without_winograd(const Graph& g, const std::vector<Tensor>& grads,
                                            const Session::Feeds& feeds) {
  Session direct(g, {.level = OptLevel::O0});
  const std::vector<Tensor> want = direct.run(grads, feeds);
  kernels::WinogradOverride use(true);
  Session planned(g);
  const std::vector<Tensor> got = planned.run(grads, feeds);
  for (size_t i = 0; i < grads.size(); ++i) EXPECT_ALL_CLOSE(got[i], want[i], kPlanTolerance, 1e-4) << "gradient " << i;
  return {want, planned.explain()};
}

// A training step (layout_test.cpp's): the second convolution's forward and its input
// and weight gradients run the kernel, on weights the run packs (they are variables); the
// gradients match direct convolution's. Forced, the input gradient takes the kernel with
// fewer tiles: with padding 1 both have 4 an image (5x5 in and out) and the flipped one
// runs; with padding 0 the transposed one has 1 (3x3 outputs) against 4.
TEST_P(WinogradPlans, TrainingStepsTakeItForwardAndForTheInputGradient) {
  for (int64_t pad : {1, 0}) {
    Graph g("train");
    Tensor x = g.placeholder(f32, {4, 1, 12, 12}, "x");
    auto uniform = [](const Shape& s, uint64_t seed) { return testing::uniform(s, -1, 1, seed).to(f32); };
    Tensor w1 = g.variable(uniform({16, 1, 3, 3}, 1), "w1"), b1 = g.variable(uniform({16}, 2), "b1");
    Tensor w2 = g.variable(uniform({16, 16, 3, 3}, 3) * 0.2, "w2"), b2 = g.variable(uniform({16}, 4), "b2");
    Tensor h = max_pool2d(relu(conv2d(x, w1, b1)), {.kernel = {2, 2}});  // [4, 16, 5, 5]
    Tensor z = max_pool2d(relu(conv2d(h, w2, b2, {.padding = {pad, pad}})), {.kernel = {2, 2}});
    const GradientsCompared run =
        with_and_without_winograd(g, grad((z * z).sum(), {w1, b1, w2, b2}), {{x, uniform({4, 1, 12, 12}, 5)}});
    const std::string& report = run.report;
    // The second pooling's gradient and the convolution's input and weight gradients are
    // one step (fuse_pool_gradient.cpp): its record names both gradients' kernels, and with
    // the transposed form the one pass they share (which names itself too).
    EXPECT_EQ(count(report, "conv2d_backward_pooled "), 1u) << report;
    EXPECT_EQ(count(report, "baton winograd F(4x4,3x3)"), pad ? 3u : 4u) << report;
    EXPECT_EQ(count(report, pad ? "F(4x4,3x3) flipped" : "F(4x4,3x3) transposed"), 1u) << report;
    EXPECT_EQ(count(report, "both gradients in one pass"), pad ? 0u : 1u) << report;
  }
}

// An infinity in the gradient that reaches the second convolution's input and weight
// gradients (the loss weighs one output by it): planned on Winograd, those steps run
// oneDNN's kernels instead, since the transforms would spread NaN over whole 4x4 tiles
// where direct convolution puts infinities in one 3x3 window. The gradients hold direct
// convolution's infinities and NaNs in the same places.
TEST_P(WinogradPlans, AnInfiniteGradientGetsDirectConvolutionsGradients) {
  Graph g("train");
  Tensor x = g.placeholder(f32, {4, 1, 12, 12}, "x");
  Tensor w1 = g.variable(testing::uniform({16, 1, 3, 3}, -1, 1, 1).to(f32), "w1");
  Tensor w2 = g.variable(testing::uniform({16, 16, 3, 3}, -0.2, 0.2, 3).to(f32), "w2");
  Tensor h = max_pool2d(relu(conv2d(x, w1)), {.kernel = {2, 2}});          // [4, 16, 5, 5]
  Tensor z = max_pool2d(conv2d(h, w2, {}, {.padding = {1, 1}}), {.kernel = {2, 2}});  // [4, 16, 2, 2]
  Tensor scale = ones({4, 16, 2, 2}, f32);
  scale.data<float>()[5] = std::numeric_limits<float>::infinity();
  const GradientsCompared run = with_and_without_winograd(
      g, grad((z * scale).sum(), {w1, w2}), {{x, testing::uniform({4, 1, 12, 12}, -1, 1, 5).to(f32)}});
  EXPECT_EQ(count(run.report, "baton winograd F(4x4,3x3)"), 3u) << run.report;
  const std::vector<float> gw1 = run.direct[0].to_vector<float>();
  EXPECT_GT(std::count_if(gw1.begin(), gw1.end(), [](float e) { return !std::isfinite(e); }), 0);
}

INSTANTIATE_TEST_SUITE_P(Blocks, WinogradPlans, ::testing::Values(0, 8),
                         [](const auto& info) { return info.param ? "nChw8c" : std::string("channels_last"); });

}  // namespace
}  // namespace baton
