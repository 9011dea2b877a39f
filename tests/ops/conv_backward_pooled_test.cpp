// conv2d_backward_pooled: a convolution's three gradients through the max pooling that
// read its output. In a plan whose backward convolutions both chose baton's Winograd, one
// pass over the output's tiles takes the pooled gradient directly (its tile loads place
// each window's gradient); otherwise, and for operands that are not finite, the output
// gradient is made in the step's scratch and the planned convolutions run on it. Both ways
// against the unfused plan; and the op's errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <tuple>

#include "baton/baton.h"
#include "dispatch/registry.h"
#include "harness/op_harness.h"
#include "kernels/cpu/conv_winograd.h"
#include "kernels/cpu/layout.h"

namespace baton::testing {
namespace {

Tensor uniform32(const Shape& shape, uint64_t seed) { return uniform(shape, -1, 1, seed).to(f32); }

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// Two layers: a convolution (1 channel in, 16 out) and its relu, then one of 16 channels
// in and out (Winograd's geometry for both gradients), its relu and a 2x2 max pooling; with
// `third`, a padded convolution of the pooled values after it; and a loss. The gradients of
// the weights and biases. The first layer's result, the second's input, is kept in the
// convolutions' layout, as is its gradient; the pooled values and their gradient are too
// where a third convolution reads them (else they are plain: the one pass then gathers
// each group's 8 channels a plane apart). The second convolution is unpadded: its output
// has fewer tiles than its input, so a WinogradOverride takes the input gradient's
// transposed form, which the one pass shares with the weight gradient.
struct PooledLayer {
  PooledLayer(int64_t size, bool third) : x(g.placeholder(f32, {3, 1, size, size}, "x")) {
    Tensor h = relu(conv2d(x, w1, b1, {.padding = {1, 1}}));
    Tensor z = max_pool2d(relu(conv2d(h, w2, b2)), {.kernel = {2, 2}});
    if (third) z = conv2d(z, w3, b2, {.padding = {1, 1}});
    grads = grad((z * z).sum(), {w1, b1, w2, b2});
  }
  Graph g{"pooled_layer"};
  Tensor x;
  Tensor w1 = g.variable(uniform32({16, 1, 3, 3}, 1), "w1"), b1 = g.variable(uniform32({16}, 2), "b1");
  Tensor w2 = g.variable(uniform32({16, 16, 3, 3}, 3) * 0.3, "w2"), b2 = g.variable(uniform32({16}, 4), "b2");
  Tensor w3 = g.variable(uniform32({16, 16, 3, 3}, 6) * 0.3, "w3");
  std::vector<Tensor> grads;
};

// The plan's steps, as explain() lists them.
std::string steps_of(const std::string& report) { return report.substr(report.find("\nsteps:")); }

// 12x12 outputs (whole windows), and 11x11 (the last row and column in no window); the
// pooled operands plain, or in the convolutions' layout with a third convolution, each
// layout a machine's oneDNN may choose (channels-last, nChw8c, nChw16c: the one pass
// reads 8-channel vectors, so with blocks of 16 the step goes apart). With a NaN input
// pixel the step goes apart too (the transforms would spread it over whole tiles) and
// gives the unfused plan's NaNs. Winograd rounds differently from direct convolution,
// ~4e-7 of a gradient's largest value against f64 (the first layer's weight gradient, up
// to ~400, sums ~8,000 terms): within 4e-6 of it (1e-4 at least, and 1e-4 of each value)
// leaves room without hiding a misplaced gradient. (oneDNN's AVX2 kernels for the plain
// plan's gradients once put one of 144 values 1.3e-4 from the one pass's at 1e-4.)
TEST(PooledGradient, TheOnePassEqualsTheStepsApart) {
  for (auto [size, third, block] : {std::tuple{14, false, 0}, std::tuple{13, false, 0}, std::tuple{13, true, 0},
                                    std::tuple{13, true, 8}, std::tuple{13, true, 16}}) {
    PooledLayer net(size, third);
    kernels::WinogradOverride winograd(true);
    kernels::onednn::ChannelBlockOverride layout(block);
    Session plain(net.g, {.level = OptLevel::O1}), planned(net.g, {.level = OptLevel::O2});
    Tensor value = uniform32({3, 1, size, size}, 5);
    Tensor with_nan = value.clone();
    with_nan.data<float>()[2 * size + 7] = std::numeric_limits<float>::quiet_NaN();  // apart
    for (const Tensor& x : {value, with_nan}) {
      std::vector<Tensor> want = plain.run(net.grads, {{net.x, x}}), got = planned.run(net.grads, {{net.x, x}});
      for (size_t i = 0; i < want.size(); ++i) {
        const double largest = max(abs(want[i])).item<double>();  // NaN with the NaN input: 1e-4
        EXPECT_ALL_CLOSE(got[i], want[i], std::max(1e-4, 4e-6 * largest), 1e-4)
            << "gradient " << i << ", size " << size << ", " << block;
      }
    }
    const std::string report = planned.explain();
    EXPECT_EQ(count(steps_of(report), " conv2d_backward_pooled "), 1u) << report;
    EXPECT_EQ(count(report, "both gradients in one pass"), third && block == 16 ? 0u : 1u) << report;
    EXPECT_EQ(count(steps_of(report), " max_pool2d_window_backward "), 0u) << report;
  }
}

// Where a backward convolution chose oneDNN's kernel, the step makes the output gradient
// and runs the planned kernels on it, as the steps apart did. The plan's kernels are the
// ones that timed fastest (the first layer's weight gradient may be im2col + GEMM), which
// sum in another order than the unplanned run's: 1e-4, as layout_test.cpp allows planned
// gradients (one of 144 weight gradients once differed by 2e-5 of 1.1 at 1e-5).
TEST(PooledGradient, WithoutWinogradTheStepRunsThePlannedKernels) {
  PooledLayer net(13, false);
  kernels::WinogradOverride direct(false);
  Session plain(net.g, {.level = OptLevel::O1}), planned(net.g, {.level = OptLevel::O2});
  Tensor x = uniform32({3, 1, 13, 13}, 5);
  std::vector<Tensor> want = plain.run(net.grads, {{net.x, x}}), got = planned.run(net.grads, {{net.x, x}});
  for (size_t i = 0; i < want.size(); ++i) EXPECT_ALL_CLOSE(got[i], want[i], 1e-4, 1e-5) << "gradient " << i;
  EXPECT_EQ(count(planned.explain(), "the pooling's gradient, then the input gradient by"), 1u) << planned.explain();
}

ops::Attrs pooled_attrs() {
  return {{"stride", std::vector<int64_t>{1, 1}},      {"padding", std::vector<int64_t>{0, 0}},
          {"dilation", std::vector<int64_t>{1, 1}},    {"groups", int64_t(1)},
          {"pool_kernel", std::vector<int64_t>{2, 2}}, {"pool_stride", std::vector<int64_t>{2, 2}}};
}

std::vector<Tensor> pooled_gradients(const std::vector<Tensor>& in) {
  return ops::call_many(*ops::find_op("conv2d_backward_pooled"), in, pooled_attrs(), SourceLoc::current());
}

TEST(PooledGradient, AnOffsetOutsideItsWindowIsAnErrorOfTheOp) {
  Tensor offsets = zeros({1, 8, 2, 2}, i32);
  offsets.data<int32_t>()[3] = 4;  // a 2x2 window has positions 0-3
  const Tensor gy = uniform32({1, 8, 2, 2}, 1), w = uniform32({8, 2, 3, 3}, 2), x = uniform32({1, 2, 6, 6}, 3);
  EXPECT_THROWS_WITH(IndexError, pooled_gradients({gy, offsets, w, x}), "conv2d_backward_pooled", "window");
}

TEST(PooledGradient, ShapesThatDoNotMatchNameTheOp) {
  const Tensor w = uniform32({8, 2, 3, 3}, 2), x = uniform32({1, 2, 6, 6}, 3);
  EXPECT_THROWS_WITH(ShapeError, pooled_gradients({zeros({1, 8, 3, 3}), zeros({1, 8, 3, 3}, i32), w, x}),
                     "conv2d_backward_pooled", "[1,8,2,2]");
  EXPECT_THROWS_WITH(ShapeError, pooled_gradients({zeros({1, 8, 2, 2}), zeros({1, 8, 2, 2}, f32), w, x}),
                     "conv2d_backward_pooled", "i32");
  EXPECT_THROWS_WITH(ShapeError,
                     pooled_gradients({zeros({1, 8, 2, 2}), zeros({1, 8, 2, 2}, i32), w, x, zeros({1, 8, 3, 3})}),
                     "conv2d_backward_pooled", "maxima");
}

}  // namespace
}  // namespace baton::testing
