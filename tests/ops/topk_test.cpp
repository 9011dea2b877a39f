// topk (src/ops/topk.cpp): values against a plain stable sort of each line, gradients
// against finite differences, ties and NaN ranked as documented, errors that name the op.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "baton/baton.h"
#include "harness/op_harness.h"

namespace baton::testing {
namespace {

// The k first of each line along `dim` of a 2-D f64 x, by a stable sort.
TopK reference_topk(const Tensor& x, int64_t k, int64_t dim, bool largest) {
  const Tensor lines = dim == 1 ? x.contiguous() : x.t().contiguous();
  const int64_t rows = lines.shape()[0], n = lines.shape()[1];
  const std::vector<double> v = lines.to_vector<double>();
  std::vector<double> values;
  std::vector<int64_t> indices;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      const double va = v[size_t(r * n + a)], vb = v[size_t(r * n + b)];
      return largest ? va > vb : va < vb;
    });
    for (int64_t i = 0; i < k; ++i) {
      values.push_back(v[size_t(r * n + order[size_t(i)])]);
      indices.push_back(order[size_t(i)]);
    }
  }
  Tensor tv = tensor(values, Shape{rows, k}), ti = tensor(indices, Shape{rows, k});
  if (dim == 0) tv = tv.t().contiguous(), ti = ti.t().contiguous();
  return {tv, ti};
}

OpCase topk_case(const std::string& what, Shape shape, int64_t k, int64_t dim, bool largest) {
  OpCase c;
  c.name = str("index.topk/", what);
  c.make_inputs = [shape] { return Inputs{uniform(shape, -2, 2, 17)}; };
  c.fn = [=](const Inputs& in) { return topk(in[0], k, dim, largest).values; };
  c.reference = [=](const Inputs& in) { return reference_topk(in[0], k, dim < 0 ? dim + 2 : dim, largest).values; };
  return c;
}

BATON_OP_CASES {
  OpCase fed = topk_case("k_in_a_tensor", {3, 6}, 2, 1, true);
  fed.make_inputs = [] { return Inputs{uniform({3, 6}, -2, 2, 17), scalar_tensor<int64_t>(2)}; };
  fed.fn = [](const Inputs& in) { return topk(in[0], in[1], 1).values; };
  fed.grad_inputs = {0};
  fed.covers = {"topk_by_values"};
  return {fed};
}

BATON_OP_CASES {
  return {topk_case("largest_last_dim", {3, 7}, 3, -1, true), topk_case("smallest_first_dim", {6, 4}, 2, 0, false),
          topk_case("all", {2, 5}, 5, 1, true), topk_case("none", {2, 5}, 0, 1, true)};
}

TEST(TopK, PositionsMatchAStableSort) {
  const Tensor x = uniform({4, 9}, -1, 1, 3);
  for (bool largest : {true, false}) {
    const TopK got = topk(x, 4, 1, largest), want = reference_topk(x, 4, 1, largest);
    EXPECT_EQ(got.indices.to_vector<int64_t>(), want.indices.to_vector<int64_t>());
  }
}

TEST(TopK, TiesGoToTheLowerPositionAndNanRanksHighest) {
  const Tensor x = tensor(std::vector<float>{1, 3, 3, std::nanf(""), 2, 3}, Shape{6});
  const TopK top = topk(x, 3);
  EXPECT_EQ(top.indices.to_vector<int64_t>(), (std::vector<int64_t>{3, 1, 2}));
  EXPECT_TRUE(std::isnan(top.values.to_vector<float>()[0]));
  EXPECT_EQ(topk(x, 2, 0, false).indices.to_vector<int64_t>(), (std::vector<int64_t>{0, 4}));
  const Tensor ints = tensor(std::vector<int64_t>{5, -1, 5, 7}, Shape{4});
  EXPECT_EQ(topk(ints, 3).values.to_vector<int64_t>(), (std::vector<int64_t>{7, 5, 5}));
}

TEST(TopK, ErrorsNameTheOp) {
  const Tensor x = zeros({2, 3});
  EXPECT_TRUE(throws_with<ValueError>([&] { topk(x, 4); }, {"[topk]", "k = 4", "[0, 3]"}));
  EXPECT_TRUE(throws_with<ShapeError>([&] { topk(scalar_tensor<float>(1), 1); }, {"[topk]", "rank 1 or more"}));
  EXPECT_TRUE(throws_with<DTypeError>([&] { topk(zeros({3}, DType::b8), 1); }, {"[topk]", "numeric"}));
}

// k fed to a graph: each run takes as many as it is given.
TEST(TopK, FedKInAGraph) {
  Graph g("topk_fed");
  Tensor x = g.placeholder(f32, {5}, "x");
  Tensor k = g.placeholder(i64, {}, "k");
  TopK top = topk(x, k, 0, false);
  Session sess(g);
  const Tensor xv = tensor(std::vector<float>{0.5f, 2, -1, 3, 0}, Shape{5});
  EXPECT_EQ(sess.run({top.indices}, {{x, xv}, {k, scalar_tensor<int64_t>(2)}})[0].to_vector<int64_t>(),
            (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(sess.run({top.indices}, {{x, xv}, {k, scalar_tensor<int64_t>(4)}})[0].to_vector<int64_t>(),
            (std::vector<int64_t>{2, 4, 0, 1}));
  EXPECT_TRUE(throws_with<ValueError>([&] { sess.run({top.values}, {{x, xv}, {k, scalar_tensor<int64_t>(6)}}); },
                                      {"topk", "k = 6"}));
}

// A symbolic dim: k is checked when the graph runs.
TEST(TopK, InAGraphWithASymbolicDim) {
  Graph g("topk");
  Tensor x = g.placeholder(f32, {"n"}, "x");
  TopK top = topk(x, 2);
  Session sess(g);
  const Tensor xv = tensor(std::vector<float>{0.5f, 2, -1, 3}, Shape{4});
  EXPECT_EQ(sess.run({top.indices}, {{x, xv}})[0].to_vector<int64_t>(), (std::vector<int64_t>{3, 1}));
  EXPECT_TRUE(throws_with<ValueError>([&] { sess.run({top.values}, {{x, zeros({1})}}); }, {"[topk]", "k = 2"}));
}

}  // namespace
}  // namespace baton::testing
