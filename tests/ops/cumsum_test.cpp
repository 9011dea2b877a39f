// cumsum (src/ops/cumsum.cpp): values against a loop in double along every dim, with
// exclusive and reverse; gradients by the harness; integer dtypes; errors.
#include "harness/op_harness.h"

namespace baton::testing {
namespace {

Tensor running_sums(const Tensor& x_in, int64_t dim, bool exclusive, bool reverse) {
  const Tensor x = x_in.contiguous();
  const Shape& s = x.shape();
  if (dim < 0) dim += std::max<int64_t>(x.dim(), 1);
  int64_t outer = 1, n = 1, inner = 1;
  for (int64_t d = 0; d < x.dim(); ++d) (d < dim ? outer : d == dim ? n : inner) *= s[size_t(d)];
  std::vector<double> v = x.to_vector<double>(), out(v.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      double acc = 0;
      for (int64_t step = 0; step < n; ++step) {
        const int64_t r = reverse ? n - 1 - step : step;
        const size_t at = size_t((o * n + r) * inner + j);
        if (exclusive) out[at] = acc;
        acc += v[at];
        if (!exclusive) out[at] = acc;
      }
    }
  return tensor(out, s);
}

OpCase cumsum_case(const std::string& what, Shape shape, int64_t dim, bool exclusive, bool reverse) {
  OpCase c;
  c.name = str("reduce.cumsum/", what);
  c.make_inputs = [shape] { return Inputs{uniform(shape, -2, 2, 6)}; };
  c.fn = [=](const Inputs& in) { return cumsum(in[0], dim, exclusive, reverse); };
  c.reference = [=](const Inputs& in) { return running_sums(in[0], dim, exclusive, reverse); };
  return c;
}

BATON_OP_CASES {
  std::vector<OpCase> cases = {
      cumsum_case("1d", {7}, 0, false, false),
      cumsum_case("1d_exclusive", {7}, 0, true, false),
      cumsum_case("1d_reverse", {7}, -1, false, true),
      cumsum_case("1d_reverse_exclusive", {7}, 0, true, true),
      cumsum_case("dim0", {3, 4, 5}, 0, false, false),
      cumsum_case("dim1_exclusive", {3, 4, 5}, 1, true, false),
      cumsum_case("last_dim_reverse", {3, 4, 5}, -1, false, true),
      cumsum_case("middle_reverse_exclusive", {2, 5, 3}, -2, true, true),
      cumsum_case("scalar", {}, 0, false, false),
      cumsum_case("empty", {3, 0}, 0, false, false),
  };
  OpCase t = cumsum_case("transposed", {4, 3}, 1, false, false);
  t.fn = [](const Inputs& in) { return cumsum(in[0].t(), 1); };
  t.reference = [](const Inputs& in) { return running_sums(in[0].t(), 1, false, false); };
  cases.push_back(t);
  OpCase fed = cumsum_case("dim_in_a_tensor", {3, 4, 5}, -2, true, false);
  fed.make_inputs = [] { return Inputs{uniform({3, 4, 5}, -2, 2, 6), scalar_tensor<int64_t>(-2)}; };
  fed.fn = [](const Inputs& in) { return cumsum(in[0], in[1], true); };
  fed.grad_inputs = {0};
  cases.push_back(fed);
  return cases;
}

TEST(Cumsum, IntegersKeepTheirDtype) {
  Tensor i = tensor({{1, 2, 3}, {4, 5, 6}});
  Tensor y = cumsum(i, 1);
  EXPECT_EQ(y.dtype(), i32);
  EXPECT_EQ(y.to_vector<int32_t>(), (std::vector<int32_t>{1, 3, 6, 4, 9, 15}));
  EXPECT_EQ(cumsum(i, 0, true).to_vector<int32_t>(), (std::vector<int32_t>{0, 0, 0, 1, 2, 3}));
  Tensor l = tensor<int64_t>({int64_t(1) << 40, int64_t(1) << 40, 1});
  EXPECT_EQ(cumsum(l, 0, false, true).to_vector<int64_t>(),
            (std::vector<int64_t>{(int64_t(1) << 41) + 1, (int64_t(1) << 40) + 1, 1}));
  // Overflow wraps (two's complement), it is not undefined.
  Tensor big = tensor<int32_t>({std::numeric_limits<int32_t>::max(), 1});
  EXPECT_EQ(cumsum(big, 0).to_vector<int32_t>()[1], std::numeric_limits<int32_t>::min());
}

TEST(Cumsum, F32AccumulatesInDouble) {
  Tensor x = full({100000}, 0.1, f32);
  EXPECT_NEAR(cumsum(x, 0).to_vector<float>().back(), 10000.0, 1e-3);
}

TEST(Cumsum, LargeMatchesTheLoop) {
  Tensor x = uniform({40, 300, 30}, -1, 1, 8);
  for (int64_t d : {0, 1, 2})
    EXPECT_ALL_CLOSE(cumsum(x, d, d == 1, d == 2), running_sums(x, d, d == 1, d == 2), 1e-10, 1e-10) << "dim " << d;
}

TEST(Cumsum, Errors) {
  Tensor x = zeros({2, 3});
  int line = __LINE__ + 1;
  EXPECT_THROWS_WITH(IndexError, cumsum(x, 2), "[cumsum]", "dim 2", "f32[2,3]", "cumsum_test.cpp:" + std::to_string(line));
  EXPECT_THROWS_WITH(IndexError, cumsum(x, -3), "[cumsum]", "dim -3");
  EXPECT_THROWS_WITH(DTypeError, cumsum(tensor({true, false}), 0), "[cumsum]", "bool");
  EXPECT_THROWS_WITH(IndexError, cumsum(x, scalar_tensor<int64_t>(2)), "[cumsum]", "dim 2");
  EXPECT_THROWS_WITH(DTypeError, cumsum(x, zeros({2}, i64)), "[cumsum]", "one i32 or i64 value");
}

// A dim fed to a graph is read each run: one session sums along any dim.
TEST(Cumsum, FedDimInAGraph) {
  Graph g("cumsum_fed");
  Tensor x = g.placeholder(f64, {3, 4}, "x");
  Tensor dim = g.placeholder(i64, {}, "dim");
  Tensor y = cumsum(x, dim, false, true);
  Tensor dx = grad({sum(y * y)}, {x})[0];
  Session sess(g);
  const Tensor xv = uniform({3, 4}, -1, 1, 2);
  for (int64_t d : {0, 1, -1}) {
    Tensor xe = xv.clone().requires_grad_();
    Tensor ye = cumsum(xe, d, false, true);
    sum(ye * ye).backward();
    std::vector<Tensor> got = sess.run({y, dx}, {{x, xv}, {dim, scalar_tensor<int64_t>(d)}});
    EXPECT_ALL_CLOSE(got[0], ye.detach(), 0, 0);
    EXPECT_ALL_CLOSE(got[1], xe.grad(), 1e-12, 0);
  }
}

TEST(Cumsum, SecondDerivativeIsZero) {
  Tensor x = tensor({0.5, 1.0, 2.0}).requires_grad_();
  Tensor d1 = grad({(cumsum(x, 0) * cumsum(x, 0)).sum()}, {x}, {}, true, true)[0];
  // d/dx_i sum_j (S_j)^2 = 2 sum_{j >= i} S_j with S = (0.5, 1.5, 3.5).
  EXPECT_EQ(d1.to_vector<double>(), (std::vector<double>{11, 10, 7}));
}

}  // namespace
}  // namespace baton::testing
