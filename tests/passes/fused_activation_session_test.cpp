// Each activation fused into a convolution or a linear layer, run through a Session at O1
// (separate ops) and O2 (fused): the same values within a stated tolerance, NaN where the
// separate ops make NaN (operands that are not finite send the activation apart, to
// baton's own functions: finite.h), and explain() naming the fused step.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "baton/baton.h"
#include "harness/op_harness.h"
#include "ops/epilogue_activations.h"

namespace baton {
namespace {

using testing::EpilogueActivation;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

Tensor uniform(const Shape& shape, uint64_t seed) { return testing::uniform(shape, -1, 1, seed).to(f32); }

int64_t nans(const Tensor& t) {
  int64_t n = 0;
  for (float v : t.to_vector<float>()) n += std::isnan(v) ? 1 : 0;
  return n;
}

// baton's op for the activation, in a graph (the harness's reference takes Tensors).
Tensor apply(const EpilogueActivation& a, const Tensor& y) { return a.op(y); }

// y at O1 and O2 on `feed`: the same NaNs, values within 1e-5 + 1e-5 |y| (oneDNN's
// eltwise post-ops and baton's element functions are both approximations, a few ulps
// apart; the fused convolution may sum in another order: fusion_activation_test.cpp).
void expect_fused_like_separate(Graph& g, const Tensor& y, const Session::Feeds& feed, const std::string& fused_op) {
  Session separate(g, {.level = OptLevel::O1}), fused(g, {.level = OptLevel::O2});
  const Tensor want = separate.run({y}, feed).at(0), got = fused.run({y}, feed).at(0);
  EXPECT_EQ(nans(got), nans(want));
  EXPECT_ALL_CLOSE(got, want, 1e-5, 1e-5);
  EXPECT_NE(fused.explain().find(fused_op), std::string::npos) << fused.explain();
}

// 16 channels of 3x3 taps, stride 1: a geometry baton's Winograd takes where the plan
// times it faster (the activation then runs after its output transform).
TEST(FusedActivation, ConvolutionMatchesTheSeparateOps) {
  for (const EpilogueActivation& a : testing::epilogue_activations()) {
    for (bool with_nan : {false, true}) {
      SCOPED_TRACE(a.name + (with_nan ? " with a NaN" : ""));
      Graph g("conv_act");
      Tensor x = g.placeholder(f32, {2, 16, 10, 10}, "x");
      Tensor y = apply(a, conv2d(x, uniform({16, 16, 3, 3}, 1), uniform({16}, 2), {.padding = {1, 1}}));
      Tensor value = uniform({2, 16, 10, 10}, 3);
      if (with_nan) value.data<float>()[123] = kNaN;
      expect_fused_like_separate(g, y, {{x, value}}, "conv2d_fused");
      if (with_nan) {
        Session o1(g, {.level = OptLevel::O1});
        EXPECT_GT(nans(o1.run({y}, {{x, value}}).at(0)), 0);
      }
    }
  }
}

TEST(FusedActivation, LinearWithResidualMatchesTheSeparateOps) {
  for (const EpilogueActivation& a : testing::epilogue_activations()) {
    SCOPED_TRACE(a.name);
    Graph g("linear_residual_act");
    Tensor x = g.placeholder(f32, {6, 32}, "x"), r = g.placeholder(f32, {6, 16}, "r");
    Tensor y = apply(a, linear(x, uniform({16, 32}, 1), uniform({16}, 2)) + r);
    Tensor rv = uniform({6, 16}, 4);
    rv.data<float>()[7] = kNaN;
    expect_fused_like_separate(g, y, {{x, uniform({6, 32}, 3)}, {r, rv}}, "linear_fused");
  }
}

}  // namespace
}  // namespace baton
