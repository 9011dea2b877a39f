// A size of a symbolic tensor used as a number (x.size(0), x.numel() while a graph is
// built). It is a symbol, not a size: a binary op's scalar operand used to bake the
// symbol's int64 bit pattern into the graph as a constant, so `x.sum() / x.size(0)` ran
// silently wrong in every static graph and compiled function. Now it is a graph value
// holding the size of each run; where no graph can hold it, it is an error.
#include <gtest/gtest.h>

#include "harness/op_harness.h"

namespace baton::testing {
namespace {

using Fn = std::function<Tensor(const Tensor&)>;

// fn built on a [batch, 3] placeholder, run for batch 2 and 5, against fn run eagerly.
void expect_graph_matches_eager(const Fn& fn) {
  Graph g;
  Tensor x = g.placeholder(f64, {"batch", 3}, "x");
  Tensor y = fn(x);
  Session sess(g);
  for (int64_t batch : {2, 5}) {
    Tensor value = uniform({batch, 3});
    EXPECT_ALL_CLOSE(sess.run({y}, {{x, value}}).at(0), fn(value), 1e-12, 1e-12) << "batch " << batch;
  }
}

TEST(SizeOperand, ASymbolicSizeIsTheSizeOfEachRun) {
  expect_graph_matches_eager([](const Tensor& x) { return x.sum() / x.size(0); });
  expect_graph_matches_eager([](const Tensor& x) { return x * x.numel(); });         // 3*batch
  expect_graph_matches_eager([](const Tensor& x) { return x.size(0) - x; });         // on the left
  expect_graph_matches_eager([](const Tensor& x) { return x / double(x.size(0)); });  // cast to double
  expect_graph_matches_eager([](const Tensor& x) { return add(x.t(), x.size(0)); });  // x.t() has the dim
  expect_graph_matches_eager([](const Tensor& x) { return cast(x > 0, i32) * x.size(0); });  // i32 count
  expect_graph_matches_eager([](const Tensor& x) { return full_like(x, x.size(0), f64) + x; });
}

TEST(SizeOperand, CompiledWithADynamicBatch) {
  auto f = compile([](const Tensor& x) { return x.sum() / x.size(0); },
                   {.dynamic_dims = {{0, 0, "batch"}}});
  for (int64_t batch : {2, 5, 7}) {
    Tensor x = uniform({batch, 3});
    EXPECT_ALL_CLOSE(f(x), x.sum() / batch, 1e-12, 1e-12) << "batch " << batch;
  }
  EXPECT_EQ(f.num_traces(), 1u);
}

TEST(SizeOperand, TheGradientOfAMeanBySize) {
  Graph g;
  Tensor x = g.placeholder(f64, {"batch", 3}, "x");
  Tensor dx = grad({(x * x).sum() / x.size(0)}, {x}).at(0);
  Session sess(g);
  Tensor value = uniform({5, 3});
  EXPECT_ALL_CLOSE(sess.run({dx}, {{x, value}}).at(0), value * 2 / 5, 1e-12, 1e-12);
}

TEST(SizeOperand, ASizeWithNoGraphToHoldItIsAnError) {
  Graph g;
  Tensor x = g.placeholder(f32, {"batch", 3}, "x");
  EXPECT_THROWS_WITH(GraphError, zeros({3}) * x.size(0), "batch", "is a size of a symbolic tensor",
                     "element_count");
  EXPECT_THROWS_WITH(GraphError, scalar_tensor(x.size(0), f32), "scalar_tensor", "batch");
  EXPECT_THROWS_WITH(GraphError, full({2}, x.numel(), f32), "full", "3*batch");
}

TEST(SizeOperand, PlainNumbersAreUntouched) {
  // Negative and large numbers that are no symbol stay numbers.
  for (double v : {-1.0, -4294967296.0, -1e300, 1e18})
    EXPECT_EQ((zeros({1}, f64) + v).item<double>(), v);
  EXPECT_EQ((zeros({1}, i64) + int64_t(-4294967297)).item<int64_t>(), -4294967297);
}

}  // namespace
}  // namespace baton::testing
