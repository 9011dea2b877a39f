// Staged plans: nonzero's output size depends on its input's values, so in a graph its
// count is a fresh symbol, bound when the step has run, and the steps after it are
// specialized per count (runtime/plan.h, "Stages").
#include <gtest/gtest.h>

#include "baton/baton.h"
#include "harness/op_harness.h"

namespace baton {
namespace {

// A graph selecting x's nonzero elements, doubling them and summing: the steps after
// nonzero depend on its count.
struct Selection {
  Graph g{"selection"};
  Tensor x = g.placeholder(f32, {"n"}, "x");
  Tensor idx = nonzero(x);
  Tensor picked = index_select(x, 0, squeeze(idx, 1)) * 2.0f;
  Tensor total = sum(picked * picked);
};

Tensor eager_total(const Tensor& x) {
  Tensor picked = index_select(x, 0, squeeze(nonzero(x), 1)) * 2.0f;
  return sum(picked * picked);
}

TEST(Stages, TheCountIsAFreshSymbolInAGraph) {
  Selection s;
  EXPECT_TRUE(sym::is_symbol(s.idx.shape()[0]));
  EXPECT_EQ(s.idx.shape()[1], 1);
  EXPECT_EQ(s.picked.shape()[0], s.idx.shape()[0]);
  EXPECT_NE(nonzero(s.x).shape()[0], s.idx.shape()[0]);  // each node a symbol of its own
}

TEST(Stages, StepsAfterAValueSizedStepRunPerCount) {
  Selection s;
  const std::vector<std::vector<float>> inputs = {
      {0, 1, 0, 3, 0}, {2, 2, 2}, {0, 0, 0, 0}, {0, 1, 0, 3, 0}, {5, 0, 0, 0, 0, 0, 7}};
  for (OptLevel level : {OptLevel::O0, OptLevel::O1, OptLevel::O2}) {
    Session sess(s.g, {.level = level});
    for (const std::vector<float>& values : inputs) {
      Tensor x = tensor(values, Shape{int64_t(values.size())});
      std::vector<Tensor> got = sess.run({s.idx, s.picked, s.total}, {{s.x, x}});
      EXPECT_ALL_CLOSE(got[0], nonzero(x), 0, 0);  // checked against a reference in nonzero_test
      EXPECT_ALL_CLOSE(got[1], index_select(x, 0, squeeze(nonzero(x), 1)) * 2.0f, 0, 0);
      EXPECT_ALL_CLOSE(got[2], eager_total(x), 0, 0);
    }
  }
}

TEST(Stages, CompiledFunctionsStageToo) {
  auto f = compile([](const Tensor& x) { return eager_total(x); });
  for (const std::vector<float>& values : {std::vector<float>{1, 0, 2}, {0, 0, 4}, {3, 3, 3}, {0, 0, 0}}) {
    Tensor x = tensor(values, Shape{3});
    EXPECT_ALL_CLOSE(f(x), eager_total(x), 0, 0);
  }
  EXPECT_NE(f.explain().find("nonzero"), std::string::npos) << f.explain();  // a step of the plan
}

// nonzero of a constant, traced: its count is known while tracing, so the plan's stages
// have no symbol to bind (at O0 nothing folds the step away).
TEST(Stages, AStaticCountStillEndsAStage) {
  const Tensor c = tensor(std::vector<float>{0, 1, 2, 0}, Shape{4});
  for (OptLevel level : {OptLevel::O0, OptLevel::O2}) {
    auto f = compile([&](const Tensor& x) { return x + cast(nonzero(c), f32).sum(); }, {.level = level});
    const Tensor x = tensor(std::vector<float>{1, 2}, Shape{2});
    EXPECT_ALL_CLOSE(f(x), x + 3.0f, 0, 0);
    EXPECT_ALL_CLOSE(f(x), x + 3.0f, 0, 0);
  }
}

// Two value-sized steps in a row, the second reading the first's result: three stages.
TEST(Stages, ChainedValueSizedSteps) {
  Graph g("chained");
  Tensor x = g.placeholder(f32, {4, "m"}, "x");
  Tensor rows = nonzero(x);                         // [k, 2]
  Tensor cols = nonzero(slice(rows, 1, 1, 2) > 0);  // [j, 2]: entries whose column is not 0
  Tensor out = cast(slice(cols, 1, 0, 1), f32) + 1.0f;
  Session sess(g);
  for (int64_t m : {3, 5}) {
    Tensor xv = testing::uniform({4, m}, -1, 1, uint64_t(m)).to(f32) > 0.0;
    xv = cast(xv, f32);
    Tensor want = cast(slice(nonzero(slice(nonzero(xv), 1, 1, 2) > 0), 1, 0, 1), f32) + 1.0f;
    std::vector<Tensor> got = sess.run({out, rows}, {{x, xv}});
    EXPECT_ALL_CLOSE(got[0], want, 0, 0);
    EXPECT_ALL_CLOSE(got[1], nonzero(xv), 0, 0);
  }
}

TEST(Stages, ExplainShowsTheLastStage) {
  Selection s;
  Session sess(s.g);
  sess.run({s.total}, {{s.x, tensor(std::vector<float>{0, 1, 0, 3}, Shape{4})}});
  const std::string text = sess.explain();
  EXPECT_NE(text.find("nonzero"), std::string::npos) << text;
  EXPECT_NE(text.find("f32[2]"), std::string::npos) << text;  // the doubled picks, sized by the run
}

}  // namespace
}  // namespace baton
