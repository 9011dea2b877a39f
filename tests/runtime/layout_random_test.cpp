// Seeded random small convolutional networks, trained one step as static graphs: at O2 a
// plan keeps activations and their gradients channels-last or channel-blocked, pools with
// window offsets and fuses epilogues and gradients; every gradient must equal O1's (no
// layout planning, no fusion) within f32 rounding.
#include <gtest/gtest.h>

#include <random>

#include "baton/baton.h"
#include "harness/op_harness.h"
#include "kernels/cpu/layout.h"

namespace baton {
namespace {

class NetBuilder {
 public:
  explicit NetBuilder(uint64_t seed) : rng_(seed) {}

  int64_t pick(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }

  // A random stack of conv layers (1x1 or 3x3, padded or not, with or without bias), each
  // followed by some of: relu, a residual add, an element-wise op, max or average pooling.
  // Returns the loss; `params` gets every variable.
  Tensor build(Graph& g, const Tensor& x, int64_t channels, int64_t size, std::vector<Tensor>& params) {
    Tensor v = x;
    const int layers = int(pick(1, 3));
    for (int l = 0; l < layers; ++l) {
      const int64_t out = std::array<int64_t, 3>{4, 8, 16}[size_t(pick(0, 2))];
      const int64_t k = pick(0, 1) ? 3 : 1, pad = k == 3 ? pick(0, 1) : 0;
      if (size + 2 * pad < k) break;
      Tensor w = variable(g, {out, channels, k, k}, 1.0 / double(channels * k * k), params);
      Tensor y = pick(0, 3) ? conv2d(v, w, variable(g, {out}, 0.5, params), {.padding = {pad, pad}})
                            : conv2d(v, w, Tensor{}, {.padding = {pad, pad}});
      const int64_t new_size = size + 2 * pad - k + 1;
      if (out == channels && new_size == size && pick(0, 1)) y = y + v;  // a residual
      switch (pick(0, 3)) {
        case 0: y = relu(y); break;
        case 1: y = relu(y) * 0.5 + 0.25; break;
        case 2: y = tanh(y); break;
        default: break;
      }
      size = new_size;
      if (size >= 4 && pick(0, 2)) {
        y = pick(0, 2) ? max_pool2d(y, {.kernel = {2, 2}}) : avg_pool2d(y, {.kernel = {2, 2}});
        size /= 2;
      }
      v = y;
      channels = out;
    }
    if (pick(0, 1)) return (v * v).sum();
    Tensor rows = v.reshape({v.size(0), -1});
    return relu(linear(rows, variable(g, {3, rows.size(1)}, 0.2, params))).sum();
  }

 private:
  Tensor variable(Graph& g, const Shape& shape, double scale, std::vector<Tensor>& params) {
    Tensor value = testing::uniform(shape, -1, 1, rng_()).to(f32) * scale;
    params.push_back(g.variable(value, "p" + std::to_string(params.size())));
    return params.back();
  }

  std::mt19937_64 rng_;
};

// On any machine, each layout a plan may choose: channels-last (block 0, as with
// AVX-512's brgconv), or oneDNN's channel blocks of 8 (AVX2) or 16.
class RandomConvNets : public ::testing::TestWithParam<int64_t> {
  kernels::onednn::ChannelBlockOverride block_{GetParam()};
};

TEST_P(RandomConvNets, HaveTheSameGradientsAtO1AndO2) {
  int planned_layouts = 0, window_pooling = 0;  // how many plans used each (channels-last or blocks)
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    NetBuilder b(seed);
    Graph g("net");
    const int64_t n = b.pick(2, 4), c = b.pick(1, 3), size = b.pick(6, 12);
    Tensor x = g.placeholder(f32, {n, c, size, size}, "x");
    std::vector<Tensor> params;
    Tensor loss = b.build(g, x, c, size, params);
    std::vector<Tensor> fetches = grad(loss, params);
    fetches.push_back(loss);
    Session plain(g, {.level = OptLevel::O1}), planned(g, {.level = OptLevel::O2});
    Tensor value = testing::uniform({n, c, size, size}, -1, 1, seed).to(f32);
    std::vector<Tensor> want = plain.run(fetches, {{x, value}}), got = planned.run(fetches, {{x, value}});
    // f32 sums in other orders (oneDNN's layouts, fused bias sums, post-ops): a few ulps of
    // values of order one, through at most three layers.
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_ALL_CLOSE(got[i], want[i], 1e-4, 1e-4) << "seed " << seed << ", fetch " << i << "\n" << planned.explain();
    const std::string report = planned.explain();
    planned_layouts += report.find("channels-last") != std::string::npos || report.find(", nChw") != std::string::npos;
    window_pooling += report.find("max_pool2d_window") != std::string::npos;
  }
  // The seeds exercise what they are for (37 and 31 of the 40 plans when written).
  EXPECT_GE(planned_layouts, 30);
  EXPECT_GE(window_pooling, 25);
}

INSTANTIATE_TEST_SUITE_P(Blocks, RandomConvNets, ::testing::Values(0, 8, 16),
                         [](const auto& info) { return info.param ? str("nChw", info.param, "c") : std::string("nhwc"); });

}  // namespace
}  // namespace baton
