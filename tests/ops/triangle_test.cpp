// tril and triu (op "triangle", src/ops/triangle.cpp): values against a loop in double for
// diagonals inside and past the matrix, batches, strided inputs, every dtype; gradients by
// the harness; errors.
#include "harness/op_harness.h"

namespace baton::testing {
namespace {

// x with every element (i, j) of its last two dims zeroed unless kept.
Tensor masked(const Tensor& x, bool upper, int64_t k) {
  const Tensor c = x.contiguous();
  std::vector<double> v = c.to_vector<double>();
  const int64_t m = c.shape()[size_t(c.dim() - 2)], n = c.shape()[size_t(c.dim() - 1)];
  for (size_t e = 0; e < v.size(); ++e) {
    const int64_t i = int64_t(e) / n % m, j = int64_t(e) % n;
    if (upper ? j - i < k : j - i > k) v[e] = 0;
  }
  return tensor(v, c.shape());
}

OpCase triangle_case(const std::string& what, bool upper, int64_t k, Shape shape) {
  OpCase c;
  c.name = str("linalg.triangle/", upper ? "triu" : "tril", "_", what);
  c.make_inputs = [shape] { return Inputs{uniform(shape, -2, 2, 5)}; };
  c.fn = [upper, k](const Inputs& in) { return upper ? triu(in[0], k) : tril(in[0], k); };
  c.reference = [upper, k](const Inputs& in) { return masked(in[0], upper, k); };
  return c;
}

BATON_OP_CASES {
  std::vector<OpCase> cases;
  for (bool upper : {false, true}) {
    cases.push_back(triangle_case("square", upper, 0, {4, 4}));
    cases.push_back(triangle_case("wide_pos", upper, 2, {3, 5}));
    cases.push_back(triangle_case("tall_neg", upper, -1, {5, 3}));
    cases.push_back(triangle_case("batched", upper, 1, {2, 3, 3, 4}));
    cases.push_back(triangle_case("past_the_end", upper, 9, {3, 4}));
    cases.push_back(triangle_case("before_the_start", upper, -7, {3, 4}));
    cases.push_back(triangle_case("one_row", upper, -1, {2, 1, 5}));
    cases.push_back(triangle_case("empty", upper, 0, {2, 0, 3}));
  }
  // A transposed (strided) input.
  OpCase t = triangle_case("transposed", false, 1, {4, 3});
  t.fn = [](const Inputs& in) { return tril(in[0].t(), 1); };
  t.reference = [](const Inputs& in) { return masked(in[0].t().contiguous(), false, 1); };
  cases.push_back(t);
  return cases;
}

TEST(Triangle, EveryDtype) {
  Tensor i = tensor(std::vector<int64_t>{1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(tril(i).dtype(), i64);
  EXPECT_EQ(tril(i).to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 0, 4, 5, 0}));
  EXPECT_EQ(triu(i.to(i32), 1).to_vector<int32_t>(), (std::vector<int32_t>{0, 2, 3, 0, 0, 6}));
  Tensor b = full({2, 2}, true, b8);
  EXPECT_EQ(triu(b).to_vector<bool>(), (std::vector<bool>{true, true, false, true}));
  EXPECT_EQ(tril(b, -1).to_vector<bool>(), (std::vector<bool>{false, false, true, false}));
  EXPECT_EQ(triu(i.to(f32), -1).to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

TEST(Triangle, ExtremeDiagonals) {
  Tensor x = ones({2, 3});
  EXPECT_EQ(tril(x, std::numeric_limits<int64_t>::max()).sum().item<float>(), 6);
  EXPECT_EQ(tril(x, std::numeric_limits<int64_t>::min()).sum().item<float>(), 0);
  EXPECT_EQ(triu(x, std::numeric_limits<int64_t>::max()).sum().item<float>(), 0);
  EXPECT_EQ(triu(x, std::numeric_limits<int64_t>::min()).sum().item<float>(), 6);
}

TEST(Triangle, LargeMatchesTheLoop) {
  Tensor x = uniform({3, 300, 257}, -1, 1, 4);
  EXPECT_ALL_CLOSE(tril(x, 5), masked(x, false, 5), 0, 0);
  EXPECT_ALL_CLOSE(triu(x, -3), masked(x, true, -3), 0, 0);
}

TEST(Triangle, NeedsTwoDims) {
  int line = __LINE__ + 1;
  EXPECT_THROWS_WITH(ShapeError, tril(zeros({4})), "[triangle]", "at least 2 dims", "f32[4]",
                     "triangle_test.cpp:" + std::to_string(line));
  EXPECT_THROWS_WITH(ShapeError, triu(scalar_tensor(1.0, f32)), "[triangle]", "at least 2 dims");
}

TEST(Triangle, SymbolicBatch) {
  Graph g("tri");
  Tensor x = g.placeholder(f64, {SymDim("n"), 3, 3}, "x");
  Tensor y = triu(x, 1);
  EXPECT_TRUE(y.is_symbolic());
  Session s(g);
  Tensor v = uniform({2, 3, 3}, -1, 1, 3);
  EXPECT_ALL_CLOSE(s.run({y}, {{x, v}})[0], masked(v, true, 1), 0, 0);
}

}  // namespace
}  // namespace baton::testing
