// ONNX export of control flow: graphs with cond and while_loop (predicates from
// placeholders, several loop values, captured outer values and constants, nesting) are
// written as If and Loop, pass ONNX's checker, and read back give the outputs the graph
// gives, both as plain and as optimized saves.
#include <gtest/gtest.h>

#include "harness/op_harness.h"
#include "io/export_round_trip.h"

namespace baton {
namespace {

TEST(OnnxExportControl, CondOnAPlaceholderPredicateWithCapturesAndConstants) {
  Graph g;
  Tensor x = g.placeholder(f32, {"batch", 3}, "x");
  Tensor p = g.placeholder(b8, {}, "p");
  const Tensor w = tensor<float>({1, 2, 3});  // a constant only the then branch reads
  std::vector<Tensor> y = cond(
      p, [&] { return std::vector<Tensor>{x * 2.0f + w, sum(x, {1})}; },
      [&] { return std::vector<Tensor>{x - 1.0f, sum(x * x, {1})}; });
  const Tensor input = randn({4, 3});
  expect_round_trip(g, {x, p}, y, {{input, scalar_tensor<bool>(true)}, {input, scalar_tensor<bool>(false)}}, "If", "if");
}

TEST(OnnxExportControl, CondOnAComputedPredicateAndBranchesReturningInputs) {
  Graph g;
  Tensor x = g.placeholder(f32, {"batch", 3}, "x");
  Tensor y = cond(gt(x.sum(), 0), [&] { return x; }, [&] { return relu(-x) * 3.0f; });
  expect_round_trip(g, {x}, {y}, {{ones({2, 3})}, {-ones({5, 3})}}, "If", "if");
}

// acc = acc * 1.5 + x, n times (n a placeholder): three loop values, captures in the
// condition (n) and the body (x).
TEST(OnnxExportControl, WhileLoopWithSeveralValuesAndCaptures) {
  Graph g;
  Tensor x = g.placeholder(f32, {"batch", 3}, "x");
  Tensor n = g.placeholder(i64, {}, "n");
  std::vector<Tensor> out = while_loop(
      [&](const std::vector<Tensor>& v) { return lt(v[0], n); },
      [&](const std::vector<Tensor>& v) {
        return std::vector<Tensor>{v[0] + 1, v[1] * 1.5f + x, v[2] + v[1].sum()};
      },
      {scalar_tensor<int64_t>(0), zeros({1, 3}) + x, zeros({})});
  const Tensor input = randn({2, 3});
  expect_round_trip(g, {x, n}, {out[1], out[2], out[0]},
                    {{input, scalar_tensor<int64_t>(0)}, {input, scalar_tensor<int64_t>(4)}}, "Loop", "loop");
}

// A loop inside a branch, and a branch inside a loop's body.
TEST(OnnxExportControl, NestedControlFlow) {
  Graph g;
  Tensor x = g.placeholder(f32, {"batch", 2}, "x");
  Tensor k = g.placeholder(i64, {}, "k");
  auto halve_until_small = [&](const Tensor& start) {
    return while_loop([](const std::vector<Tensor>& v) { return gt(abs(v[0]).sum(), 1.0f); },
                      [](const std::vector<Tensor>& v) { return std::vector<Tensor>{v[0] * 0.5f}; }, {start})
        .at(0);
  };
  Tensor a = cond(gt(k, 2), [&] { return halve_until_small(x * 10.0f); }, [&] { return x; });
  std::vector<Tensor> b = while_loop(
      [&](const std::vector<Tensor>& v) { return lt(v[0], k); },
      [&](const std::vector<Tensor>& v) {
        Tensor step = cond(lt(v[0], 2), [&] { return v[1] + x; }, [&] { return v[1] * 2.0f; });
        return std::vector<Tensor>{v[0] + 1, step};
      },
      {scalar_tensor<int64_t>(0), x});
  const Tensor input = randn({3, 2});
  expect_round_trip(g, {x, k}, {a, b[1]}, {{input, scalar_tensor<int64_t>(1)}, {input, scalar_tensor<int64_t>(5)}},
                    "Loop", "loop");
}

// A node inside a branch that cannot export is named with the line that built it.
TEST(OnnxExportControl, ANodeInsideABranchThatCannotExportIsNamed) {
  Graph g;
  Tensor x = g.placeholder(f32, {2, 3}, "x");
  Tensor v = g.variable(zeros({2, 3}), "v");
  const int line = __LINE__ + 1;
  Tensor y = cond(gt(x.sum(), 0), [&] { return assign(v, x); }, [&] { return x; });
  g.set_outputs({y});
  EXPECT_THROWS_WITH(GraphError, onnx::save_bytes(g), str("assign (onnx_export_control_test.cpp:", line, ")"));
}

}  // namespace
}  // namespace baton
