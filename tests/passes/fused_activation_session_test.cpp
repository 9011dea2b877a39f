// Each activation fused into a convolution or a linear layer, run through a Session at O1
// (separate ops) and O2 (fused): the same values within a stated tolerance, NaN where the
// separate ops make NaN (operands that are not finite send the activation apart, to
// baton's own functions: finite.h), and explain() naming the fused step.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "baton/baton.h"
#include "harness/op_harness.h"
#include "kernels/cpu/conv_winograd.h"
#include "ops/epilogue_activations.h"

namespace baton {
namespace {

using testing::EpilogueActivation;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

using testing::count_nans;
Tensor uniform(const Shape& shape, uint64_t seed) { return testing::uniform_f32(shape, seed); }

// baton's op for the activation, in a graph (the harness's reference takes Tensors).
Tensor apply(const EpilogueActivation& a, const Tensor& y) { return a.op(y); }

// y at O1 and O2 on `feed`: the same NaNs, values within tol + tol |y|. Returns the fused
// plan's explain().
std::string expect_fused_like_separate(Graph& g, const Tensor& y, const Session::Feeds& feed,
                                       const std::string& fused_op, double tol) {
  Session separate(g, {.level = OptLevel::O1}), fused(g, {.level = OptLevel::O2});
  const Tensor want = separate.run({y}, feed).at(0), got = fused.run({y}, feed).at(0);
  EXPECT_EQ(count_nans(got), count_nans(want));
  EXPECT_ALL_CLOSE(got, want, tol, tol);
  EXPECT_NE(fused.explain().find(fused_op), std::string::npos) << fused.explain();
  return fused.explain();
}

// 16 channels of 3x3 taps, stride 1, between two other convolutions (its activations in
// the plan's layouts): a geometry of baton's Winograd, forced on (the activation then runs
// after its output transform, as baton's functions) and off (oneDNN's kernel with the
// eltwise post-op). Tolerance 1e-4: the activation's values differ by a few ulps
// (oneDNN's eltwise and baton's functions are both approximations: ~1e-6,
// fusion_activation_test.cpp), Winograd's transforms round otherwise than direct sums,
// and the 1x1 convolution after sums 16 such values with weights up to 1: some 2% of the
// values differed by more than 1e-5 (nearly all where Winograd ran), none by 1e-4.
TEST(FusedActivation, ConvolutionMatchesTheSeparateOps) {
  for (const EpilogueActivation& a : testing::epilogue_activations()) {
    for (bool with_nan : {false, true}) {
     for (bool winograd : {false, true}) {
      SCOPED_TRACE(a.name + (with_nan ? " with a NaN" : "") + (winograd ? " on winograd" : ""));
      const kernels::WinogradOverride forced(winograd);
      Graph g("conv_act");
      Tensor x = g.placeholder(f32, {2, 8, 10, 10}, "x");
      const Conv2dOptions same{.padding = {1, 1}};
      Tensor first = conv2d(x, uniform({16, 8, 3, 3}, 5), {}, same);
      Tensor middle = apply(a, conv2d(first, uniform({16, 16, 3, 3}, 1), uniform({16}, 2), same));
      Tensor y = conv2d(middle, uniform({4, 16, 1, 1}, 6));
      Tensor value = uniform({2, 8, 10, 10}, 3);
      if (with_nan) value.data<float>()[123] = kNaN;
      const std::string explain = expect_fused_like_separate(g, y, {{x, value}}, "conv2d_fused", 1e-4);
      EXPECT_EQ(explain.find("baton winograd") != std::string::npos, winograd) << explain;
      if (with_nan) {
        Session o1(g, {.level = OptLevel::O1});
        EXPECT_GT(count_nans(o1.run({y}, {{x, value}}).at(0)), 0);
      }
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
    // 1e-6 though the step computes as the separate ops (== in fusion_activation_test.cpp):
    // a plan of one linear step may pick another oneDNN matmul than one followed by ops.
    expect_fused_like_separate(g, y, {{x, uniform({6, 32}, 3)}, {r, rv}}, "linear_fused", 1e-6);
  }
}

// In a training graph an activation whose backward reads only its result (tanh,
// sigmoid) leaves the step its only reader: the step fuses, after differentiation, and
// the gradients through the fused result are the separate ops' (the step needs no
// gradient rule of its own). gelu's backward reads its input: that step stays apart.
TEST(FusedActivation, TrainingGraphsFuseWhereTheBackwardReadsTheResult) {
  for (const char* name : {"tanh", "sigmoid", "gelu"}) {
    SCOPED_TRACE(name);
    const std::string act = name;
    auto apply_named = [&](const Tensor& t) {
      return act == "tanh" ? tanh(t) : act == "sigmoid" ? sigmoid(t) : gelu(t);
    };
    Graph g("train");
    Tensor x = g.placeholder(f32, {2, 8, 6, 6}, "x"), w = g.placeholder(f32, {8, 8, 3, 3}, "w");
    Tensor f = g.placeholder(f32, {3, 5}, "f"), v = g.placeholder(f32, {4, 5}, "v");
    Tensor y = apply_named(conv2d(x, w, uniform({8}, 1), {.padding = {1, 1}}));
    Tensor z = apply_named(linear(f, v, uniform({4}, 2)));
    Tensor loss = (y * y).sum() + (z * z).sum();
    const std::vector<Tensor> grads = grad(loss, {w, v});
    const Session::Feeds feed{{x, uniform({2, 8, 6, 6}, 3)}, {w, uniform({8, 8, 3, 3}, 4)},
                              {f, uniform({3, 5}, 5)}, {v, uniform({4, 5}, 6)}};
    Session separate(g, {.level = OptLevel::O1}), fused(g, {.level = OptLevel::O2});
    const std::vector<Tensor> want = separate.run({loss, grads[0], grads[1]}, feed);
    const std::vector<Tensor> got = fused.run({loss, grads[0], grads[1]}, feed);
    // As ConvolutionMatchesTheSeparateOps; the weight gradient sums 72 products per
    // element over the batch and the image.
    for (size_t i = 0; i < want.size(); ++i) EXPECT_ALL_CLOSE(got[i], want[i], 1e-4, 1e-4) << i;
    const std::string explain = fused.explain();
    const bool fuses = act != "gelu";
    EXPECT_EQ(explain.find("conv2d_fused") != std::string::npos, fuses) << explain;
    EXPECT_EQ(explain.find("linear_fused") != std::string::npos, fuses) << explain;
  }
}

}  // namespace
}  // namespace baton
