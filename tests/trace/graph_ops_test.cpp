// Op-harness cases for the ops graphs add (assign, stop_gradient, if, loop), so the modes
// test runs them eagerly, as static graphs and compiled; plus their graph-only behaviour.
#include <gtest/gtest.h>

#include <cmath>

#include "harness/op_harness.h"
#include "trace/autodiff.h"

namespace baton::testing {
namespace {

Tensor relu_or_sigmoid(const Tensor& x) {
  return cond(gt(x.sum(), 0), [&] { return relu(x); }, [&] { return sigmoid(x); });
}

Tensor ref_relu_or_sigmoid(const Tensor& x) {
  double s = x.sum().item<double>();
  return map_double(x, [s](double v) { return s > 0 ? std::max(v, 0.0) : 1 / (1 + std::exp(-v)); });
}

// Multiplies x by 1.5 three times with a counter as a second loop variable.
Tensor three_times(const Tensor& x) {
  std::vector<Tensor> out = while_loop(
      [](const std::vector<Tensor>& v) { return lt(v[0], 3); },
      [](const std::vector<Tensor>& v) { return std::vector<Tensor>{v[0] + 1, v[1] * 1.5}; },
      {scalar_tensor<int64_t>(0), x});
  return out[1];
}

BATON_OP_CASES {
  return {
      OpCase{
          .name = "graph.assign/writes_and_returns",
          .make_inputs = [] { return Inputs{uniform({2, 3}), uniform({3}, -1, 1, 2)}; },
          .fn = [](const Inputs& i) { return assign(i[0], i[1]); },  // broadcasts the row
          .reference = [](const Inputs& i) { return i[1].expand({2, 3}).contiguous(); },
          .check_grad = false,
      },
      OpCase{
          .name = "graph.stop_gradient/values_pass",
          .make_inputs = [] { return Inputs{uniform({2, 3})}; },
          .fn = [](const Inputs& i) { return trace::stop_gradient(i[0] * 2.0, SourceLoc::current()); },
          .reference = [](const Inputs& i) { return i[0] * 2.0; },
          .check_grad = false,
      },
      OpCase{
          .name = "graph.if/then_branch",
          .make_inputs = [] { return Inputs{uniform({2, 3}, 0.1, 1)}; },
          .fn = [](const Inputs& i) { return relu_or_sigmoid(i[0]); },
          .reference = [](const Inputs& i) { return ref_relu_or_sigmoid(i[0]); },
      },
      OpCase{
          .name = "graph.if/else_branch",
          .make_inputs = [] { return Inputs{uniform({2, 3}, -1, -0.1)}; },
          .fn = [](const Inputs& i) { return relu_or_sigmoid(i[0]); },
          .reference = [](const Inputs& i) { return ref_relu_or_sigmoid(i[0]); },
          .atol = 1e-12,
      },
      OpCase{
          .name = "graph.loop/three_times",
          .make_inputs = [] { return Inputs{uniform({4})}; },
          .fn = [](const Inputs& i) { return three_times(i[0]); },
          .reference = [](const Inputs& i) { return i[0] * 3.375; },
          .check_grad = false,  // gradients through Loop are not supported yet
      },
  };
}

TEST(GraphOps, CondRecordsAnIfNodeWithTwoSubgraphs) {
  Graph g;
  Tensor x = g.placeholder(f32, {"n"}, "x");
  Tensor y = relu_or_sigmoid(x);
  std::string text = g.to_text();
  EXPECT_NE(text.find("if("), std::string::npos) << text;
  EXPECT_NE(text.find("graph @then_branch"), std::string::npos) << text;
  EXPECT_NE(text.find("graph @else_branch"), std::string::npos) << text;
  Session sess(g);
  Tensor pos = tensor<float>({1, -2, 3}), neg = tensor<float>({-1, -2, 0.5f});
  EXPECT_TRUE(all_close(sess.run({y}, {{x, pos}})[0], relu(pos), 0, 0));
  EXPECT_TRUE(all_close(sess.run({y}, {{x, neg}})[0], sigmoid(neg), 0, 0));
}

TEST(GraphOps, CondBranchesMustAgree) {
  Graph g;
  Tensor x = g.placeholder(f32, {3}, "x");
  EXPECT_THROWS_WITH(ShapeError, cond(gt(x.sum(), 0), [&] { return x; }, [&] { return x.sum(); }),
                     "cond", "f32[3]", "f32[]", "graph_ops_test.cpp");
}

TEST(GraphOps, StopGradientBlocksGraphGradients) {
  auto f = compile([](Tensor x) {
    return grad({(trace::stop_gradient(x, SourceLoc::current()) * x).sum()}, {x})[0];
  });
  Tensor x = tensor<double>({1, 2, 3});
  EXPECT_EQ(f(x).to_vector<double>(), (std::vector<double>{1, 2, 3}));  // not 2x
}

TEST(GraphOps, AssignToAComputedValueIsAnError) {
  Graph g;
  Tensor x = g.placeholder(f32, {3}, "x");
  EXPECT_THROWS_WITH(GraphError, assign(x * 2.0f, x), "assign", "computed by the graph");
}

TEST(GraphOps, GradientThroughLoopSaysItIsNotSupported) {
  Graph g;
  Tensor x = g.placeholder(f64, {4}, "x");
  Tensor y = three_times(x).sum();
  EXPECT_THROWS_WITH(GraphError, grad({y}, {x}), "loop", "not supported");
}

}  // namespace
}  // namespace baton::testing
