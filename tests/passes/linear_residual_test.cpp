// linear_fused adds its residual in the product's pass (oneDNN's sum post-op, f32): where
// the residual dies at the step, the plan hands the step the residual's own buffer as its
// output; otherwise (a feed, or a residual read later) the step copies it there first. f64
// adds it after the product, from a copy where the output took its buffer. Every way gives
// the separate ops' values bit for bit.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "baton/baton.h"
#include "harness/op_harness.h"

namespace baton {
namespace {

// The arena offset explain() gives the first step of `op`. (Parsed by hand: GCC 12 warns
// inside libstdc++'s <regex> at the sanitized build's -O1.)
std::string arena_offset(const std::string& explain, const std::string& op) {
  std::istringstream lines(explain);
  for (std::string line; std::getline(lines, line);) {
    const size_t step = line.find("  " + op + " ");
    if (step == std::string::npos) continue;
    const size_t arena = line.find(" arena +", step);
    if (arena == std::string::npos) continue;
    const size_t digits = arena + std::string(" arena +").size();
    const size_t end = line.find_first_not_of("0123456789", digits);
    if (end != digits) return line.substr(digits, end - digits);
  }
  return "none";
}

struct ResidualGraph {
  Graph g{"residual"};
  Tensor x, h, w, b, r, y;
  explicit ResidualGraph(DType dtype, bool residual_read_again) {
    x = g.placeholder(dtype, {16, 24}, "x");
    w = g.variable(testing::uniform({32, 24}, -1, 1, 1).to(dtype), "w");
    b = g.variable(testing::uniform({32}, -1, 1, 2).to(dtype), "b");
    h = g.placeholder(dtype, {16, 32}, "h");
    r = tanh(h);  // made in the plan: an arena value that may die at the linear step
    // The fused step's result feeds another step, so that it lives in the arena too.
    y = relu(linear(x, w, b) + r) * (residual_read_again ? r : full({1}, 2.0, dtype));
  }
  Session::Feeds feeds(DType dtype) const {
    return {{x, testing::uniform({16, 24}, -1, 1, 3).to(dtype)},
            {h, testing::uniform({16, 32}, -2, 2, 4).to(dtype)}};
  }
};

TEST(LinearResidual, EqualsTheSeparateOpsBitForBit) {
  for (DType dtype : {f32, f64})
    for (bool read_again : {false, true}) {
      SCOPED_TRACE(str(dtype, read_again ? ", residual read again" : ", residual dies at the step"));
      ResidualGraph m(dtype, read_again);
      Session separate(m.g, {.level = OptLevel::O1}), fused(m.g, {.level = OptLevel::O2});
      const Tensor want = separate.run({m.y}, m.feeds(dtype)).at(0);
      const Tensor got = fused.run({m.y}, m.feeds(dtype)).at(0);
      const std::string explain = fused.explain();
      ASSERT_NE(arena_offset(explain, "tanh"), "none") << explain;
      const bool same_buffer = arena_offset(explain, "linear_fused") == arena_offset(explain, "tanh");
      EXPECT_EQ(same_buffer, !read_again) << explain;
      EXPECT_EQ(got.to_vector<double>(), want.to_vector<double>());
      EXPECT_EQ(fused.run({m.y}, m.feeds(dtype)).at(0).to_vector<double>(), want.to_vector<double>());  // again
    }
}

// A residual fed to the graph is not the plan's to write: the step copies it.
TEST(LinearResidual, AFedResidualIsLeftAsItWas) {
  Graph g("fed");
  Tensor x = g.placeholder(f32, {8, 12}, "x"), r = g.placeholder(f32, {8, 6}, "r");
  const Tensor wv = testing::uniform({6, 12}, -1, 1, 5).to(f32);
  Tensor w = g.variable(wv, "w");
  Tensor y = relu(linear(x, w) + r);
  const Tensor xv = testing::uniform({8, 12}, -1, 1, 6).to(f32), rv = testing::uniform({8, 6}, -1, 1, 7).to(f32);
  const Tensor r_before = rv.clone();
  Session fused(g, {.level = OptLevel::O2});
  const Tensor got = fused.run({y}, {{x, xv}, {r, rv}}).at(0);
  EXPECT_NE(fused.explain().find("linear_fused"), std::string::npos) << fused.explain();
  EXPECT_EQ(rv.to_vector<float>(), r_before.to_vector<float>());
  EXPECT_EQ(got.to_vector<float>(), relu(linear(xv, wv) + rv).to_vector<float>());
}

}  // namespace
}  // namespace baton
