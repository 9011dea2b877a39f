// A relu fused into a convolution or a product keeps NaN as the relu op does (PyTorch's
// rule): oneDNN's relu post-op computes max(x, 0), which would make it 0, so the kernels
// check their operands (convolution) or apply the relu themselves (product). Each case
// runs at O1 (separate ops) and O2 (fused) and must agree, NaN for NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "baton/baton.h"
#include "harness/op_harness.h"

namespace baton {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

using testing::count_nans;
Tensor uniform(const Shape& shape, uint64_t seed) { return testing::uniform_f32(shape, seed); }

// Runs y at O1 and O2 on `feed` and expects the same values, with NaN among them.
void expect_fused_like_separate(Graph& g, const Tensor& y, const Session::Feeds& feed) {
  Session separate(g, {.level = OptLevel::O1}), fused(g, {.level = OptLevel::O2});
  const Tensor want = separate.run({y}, feed).at(0), got = fused.run({y}, feed).at(0);
  EXPECT_GT(count_nans(want), 0);
  EXPECT_EQ(count_nans(got), count_nans(want));
  EXPECT_ALL_CLOSE(got, want, 1e-5, 1e-5);
  EXPECT_NE(fused.explain().find("_fused"), std::string::npos) << fused.explain();
}

struct ConvRelu {
  Graph g{"conv_relu"};
  Tensor x = g.placeholder(f32, {2, 8, 6, 6}, "x");
  Tensor r = g.placeholder(f32, {2, 8, 6, 6}, "r");
  Tensor w = uniform({8, 8, 3, 3}, 1), b = uniform({8}, 2);
  Tensor y;
  explicit ConvRelu(bool residual) {
    Tensor c = conv2d(x, w, b, {.padding = {1, 1}});
    y = relu(residual ? c + r : c);
  }
};

TEST(FusedRelu, ConvolutionKeepsANaNOfItsInput) {
  for (bool residual : {false, true}) {
    ConvRelu net(residual);
    Tensor x = uniform({2, 8, 6, 6}, 3);
    x.data<float>()[40] = kNaN;
    expect_fused_like_separate(net.g, net.y, {{net.x, x}, {net.r, uniform({2, 8, 6, 6}, 4)}});
  }
}

TEST(FusedRelu, ConvolutionKeepsTheNaNAnInfinityMakes) {
  ConvRelu net(false);
  Tensor x = uniform({2, 8, 6, 6}, 3);
  // Two channels infinite at one pixel: an output adds inf times weights of both signs,
  // inf - inf = NaN.
  x.data<float>()[2 * 6 + 2] = kInf;
  x.data<float>()[36 + 2 * 6 + 2] = kInf;
  expect_fused_like_separate(net.g, net.y, {{net.x, x}, {net.r, uniform({2, 8, 6, 6}, 4)}});
}

TEST(FusedRelu, ConvolutionKeepsANaNOfItsResidual) {
  ConvRelu net(true);
  Tensor r = uniform({2, 8, 6, 6}, 4);
  r.data<float>()[5] = kNaN;
  expect_fused_like_separate(net.g, net.y, {{net.x, uniform({2, 8, 6, 6}, 3)}, {net.r, r}});
}

TEST(FusedRelu, ConvolutionKeepsANaNOfItsConstantWeights) {
  ConvRelu net(false);
  net.w.data<float>()[3] = kNaN;  // a constant of the graph: the plan packs it once
  expect_fused_like_separate(net.g, net.y, {{net.x, uniform({2, 8, 6, 6}, 3)}, {net.r, uniform({2, 8, 6, 6}, 4)}});
}

TEST(FusedRelu, ProductKeepsANaN) {
  Graph g("linear_relu");
  Tensor x = g.placeholder(f32, {3, 5}, "x");
  Tensor y = relu(linear(x, uniform({4, 5}, 1), uniform({4}, 2)));
  Tensor value = uniform({3, 5}, 3);
  value.data<float>()[6] = kNaN;
  expect_fused_like_separate(g, y, {{x, value}});
}

}  // namespace
}  // namespace baton
