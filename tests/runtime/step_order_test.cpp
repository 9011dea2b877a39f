// Plans order their steps with memory in mind where that lowers the peak, and keep
// in-place writes where the program put them (runtime/step_order.h).
#include <gtest/gtest.h>

#include "baton/baton.h"
#include "baton/memory.h"
#include "harness/op_harness.h"

namespace baton {
namespace {

constexpr int64_t kBig = 1 << 16;  // 256 KiB of f32: far above everything else here
constexpr size_t kBigBytes = kBig * 4;

using testing::uniform_f32;

// Three big values first, then their sums: program order keeps all three alive at once.
Tensor sums_of_three_branches(const Tensor& x) {
  Tensor a = exp(x), b = tanh(x), c = sigmoid(x);
  return sum(a) + sum(b) * 2.0f + sum(c) * 3.0f;
}

TEST(StepOrder, BranchesThatEndInReductionsRunOneAfterAnother) {
  Graph g("branches");
  Tensor x = g.placeholder(f32, {kBig}, "x");
  Tensor y = sums_of_three_branches(x);
  Session sess(g, {.level = OptLevel::O1});  // O2 may fuse the branches away
  Tensor value = uniform_f32({kBig}, 1);
  // The same kernels on the same operands, only in another order: exact.
  EXPECT_ALL_CLOSE(sess.run({y}, {{x, value}}).at(0), sums_of_three_branches(value), 0, 0);
  const std::string explained = sess.explain();
  EXPECT_NE(explained.find("order: fewest bytes first, estimated peak 256.0 KiB against 768.0 KiB in program order"),
            std::string::npos)
      << explained;
  MemoryPlan m = sess.memory_plan();
  EXPECT_LT(m.lower_bound_bytes, 2 * kBigBytes);  // one big value at a time, not three
  EXPECT_GE(m.naive_bytes, 3 * kBigBytes);
}

TEST(StepOrder, AChainKeepsProgramOrder) {
  Graph g("chain");
  Tensor x = g.placeholder(f32, {kBig}, "x");
  Tensor y = sum(tanh(exp(x) * 2.0f));
  Session sess(g, {.level = OptLevel::O1});
  sess.run({y}, {{x, uniform_f32({kBig}, 2)}});
  EXPECT_EQ(sess.explain().find("order:"), std::string::npos) << sess.explain();
}

// A buffer read, written in place, and read again keeps those three in program order,
// while the big branches around them move.
TEST(StepOrder, InPlaceWritesKeepTheirPlaceAmongReadsOfTheirBuffer) {
  auto body = [](const Tensor& x, Tensor& state) {
    Tensor a = exp(x), b = tanh(x), c = sigmoid(x);
    Tensor before = sum(state * 3.0f);
    state.copy_(x * 0.5f);
    Tensor after = sum(state);
    return sum(a) + sum(b) + sum(c) + before * 2.0f + after;
  };
  Tensor eager_state = uniform_f32({kBig}, 3), compiled_state = eager_state.clone();
  auto f = compile([&](Tensor x) { return body(x, compiled_state); }, {.level = OptLevel::O1});
  for (uint64_t seed : {4, 5, 6}) {
    Tensor x = uniform_f32({kBig}, seed);
    EXPECT_ALL_CLOSE(f(x), body(x, eager_state), 0, 0);
    EXPECT_ALL_CLOSE(compiled_state, eager_state, 0, 0);
  }
  EXPECT_NE(f.explain().find("order: fewest bytes first"), std::string::npos) << f.explain();
}

}  // namespace
}  // namespace baton
