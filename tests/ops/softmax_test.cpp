// softmax and log_softmax against naive loops in double and PyTorch values.
#include <cmath>
#include <limits>

#include "harness/op_harness.h"
#include "ops/reduce.h"

namespace baton::testing {
namespace {

// softmax (or log_softmax) along dim of a contiguous f64 tensor, naive and unshifted.
Tensor softmax_ref(const Tensor& x, int64_t dim, bool log) {
  const int64_t rank = x.dim();
  if (dim < 0) dim += rank;
  int64_t outer = 1, n = x.shape()[size_t(dim)], inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= x.shape()[size_t(d)];
  for (int64_t d = dim + 1; d < rank; ++d) inner *= x.shape()[size_t(d)];
  std::vector<double> v = x.contiguous().to_vector<double>(), out(v.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      auto at = [&](int64_t r) { return size_t((o * n + r) * inner + j); };
      double s = 0;
      for (int64_t r = 0; r < n; ++r) s += std::exp(v[at(r)]);
      for (int64_t r = 0; r < n; ++r) out[at(r)] = log ? v[at(r)] - std::log(s) : std::exp(v[at(r)]) / s;
    }
  return tensor(out, x.shape());
}

// The gradients written out, along dim of contiguous f64 tensors: softmax's
// y * (g - sum(g * y)), log_softmax's g - exp(y) * sum(g).
Tensor softmax_backward_ref(const Tensor& g_in, const Tensor& y_in, int64_t dim, bool log) {
  const int64_t rank = g_in.dim();
  if (dim < 0) dim += rank;
  int64_t outer = 1, n = g_in.shape()[size_t(dim)], inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= g_in.shape()[size_t(d)];
  for (int64_t d = dim + 1; d < rank; ++d) inner *= g_in.shape()[size_t(d)];
  std::vector<double> g = g_in.contiguous().to_vector<double>(), y = y_in.contiguous().to_vector<double>();
  std::vector<double> out(g.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      auto at = [&](int64_t r) { return size_t((o * n + r) * inner + j); };
      double s = 0;
      for (int64_t r = 0; r < n; ++r) s += log ? g[at(r)] : g[at(r)] * y[at(r)];
      for (int64_t r = 0; r < n; ++r) out[at(r)] = log ? g[at(r)] - std::exp(y[at(r)]) * s : y[at(r)] * (g[at(r)] - s);
    }
  return tensor(out, g_in.shape());
}

// The gradient ops on their own: values, and their gradients (the second derivatives)
// against finite differences. log_softmax's output is at most 0, so y is.
OpCase softmax_backward_case(std::string name, bool log, Shape shape, int64_t dim) {
  return OpCase{
      .name = name,
      .make_inputs = [shape, log] { return Inputs{uniform(shape, -2, 2, 22), uniform(shape, log ? -4 : 0.05, log ? -0.1 : 1, 23)}; },
      .fn = [log, dim](const Inputs& in) {
        return log ? ops::log_softmax_backward(in[0], in[1], dim) : ops::softmax_backward(in[0], in[1], dim);
      },
      .reference = [log, dim](const Inputs& in) { return softmax_backward_ref(in[0], in[1], dim, log); },
  };
}

OpCase softmax_case(std::string name, bool log, Shape shape, int64_t dim) {
  return OpCase{
      .name = name,
      .make_inputs = [shape] { return Inputs{uniform(shape, -3, 3, 21)}; },
      .fn = [log, dim](const Inputs& in) { return log ? log_softmax(in[0], dim) : softmax(in[0], dim); },
      .reference = [log, dim](const Inputs& in) { return softmax_ref(in[0], dim, log); },
  };
}

BATON_OP_CASES {
  return {
      softmax_case("softmax.softmax/last", false, {3, 5}, 1),
      softmax_case("softmax.softmax/first", false, {4, 3}, 0),
      softmax_case("softmax.softmax/middle", false, {2, 3, 4}, 1),
      softmax_case("softmax.softmax/negative_dim", false, {2, 3, 4}, -1),
      softmax_case("softmax.softmax/vector", false, {6}, 0),
      torch_case("softmax.softmax/torch_dim1", "softmax_dim1",
                 [](const Inputs& in) { return softmax(in[0], 1); }),
      softmax_case("softmax.log_softmax/last", true, {3, 5}, -1),
      softmax_case("softmax.log_softmax/first", true, {4, 3}, 0),
      softmax_case("softmax.log_softmax/middle", true, {2, 3, 4}, -2),
      torch_case("softmax.log_softmax/torch_dim0", "log_softmax_dim0",
                 [](const Inputs& in) { return log_softmax(in[0], 0); }),
      softmax_backward_case("softmax.softmax_backward/rows", false, {3, 11}, 1),
      softmax_backward_case("softmax.softmax_backward/columns", false, {2, 5, 3}, 1),
      softmax_backward_case("softmax.log_softmax_backward/rows", true, {3, 11}, -1),
      softmax_backward_case("softmax.log_softmax_backward/first", true, {4, 3}, 0),
  };
}

TEST(Softmax, StableForLargeLogits) {
  Tensor x = tensor({{1000.0f, 1001.0f, 1002.0f}, {-1000.0f, -1001.0f, -1002.0f}});
  std::vector<double> expected = softmax_ref(tensor({{0.0, 1.0, 2.0}, {0.0, -1.0, -2.0}}), 1, false)
                                     .to_vector<double>();
  auto y = softmax(x, 1).to_vector<float>();
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], expected[i], 1e-6);
  EXPECT_NEAR(log_softmax(x, 1).to_vector<float>()[2], std::log(expected[2]), 1e-5);
  EXPECT_NEAR(softmax(x, 0).to_vector<float>()[0], 1.0, 1e-6);  // the columns path
}

TEST(Softmax, MinusInfinityGivesZeroProbability) {
  const float inf = std::numeric_limits<float>::infinity();
  Tensor y = softmax(tensor({0.0f, -inf, 0.0f}), 0);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{0.5f, 0.0f, 0.5f}));
  EXPECT_EQ(log_softmax(tensor({0.0f, -inf}), 0).to_vector<float>()[1], -inf);
}

// Rows over threads and chunks of columns over threads, f64 and f32, and a strided
// gradient; the dims' softmax output as y.
TEST(Softmax, GradientOpsAgreeOnLargeAndStridedInputs) {
  Tensor g = uniform({300, 600}, -1, 1, 5);
  for (int64_t dim : {0, 1})
    for (bool log : {false, true}) {
      SCOPED_TRACE(str("dim ", dim, log ? " log_softmax" : " softmax"));
      Tensor y = softmax_ref(uniform({300, 600}, -3, 3, 6), dim, log);
      auto op = [&](const Tensor& a, const Tensor& b) {
        return log ? ops::log_softmax_backward(a, b, dim) : ops::softmax_backward(a, b, dim);
      };
      EXPECT_ALL_CLOSE(op(g, y), softmax_backward_ref(g, y, dim, log), 1e-12, 1e-10);
      EXPECT_ALL_CLOSE(op(g.to(f32), y.to(f32)), softmax_backward_ref(g, y, dim, log), 1e-5, 1e-4);
      Tensor gt = g.t().contiguous().t();  // g's values, not contiguous
      EXPECT_ALL_CLOSE(op(gt, y), softmax_backward_ref(g, y, dim, log), 1e-12, 1e-10);
    }
  EXPECT_THROWS_WITH(ShapeError, ops::softmax_backward(g, uniform({300, 5}), 1), "[softmax_backward]", "one shape");
}

// A dim of no elements after the softmax's dim leaves no columns: nothing to compute, in
// either op or either gradient (the kernels' column chunks once divided by zero).
TEST(Softmax, NoColumnsIsNothingToCompute) {
  for (bool log : {false, true}) {
    Tensor x = zeros({3, 4, 0}).requires_grad_();
    Tensor y = log ? log_softmax(x, 1) : softmax(x, 1);
    EXPECT_EQ(y.shape(), (Shape{3, 4, 0}));
    y.sum().backward();
    EXPECT_EQ(x.grad().shape(), (Shape{3, 4, 0}));
  }
}

TEST(Softmax, LargeAndStridedInputsAgree) {
  Tensor x = uniform({300, 257}, -5, 5, 4);  // rows over threads
  EXPECT_ALL_CLOSE(softmax(x, 1), softmax_ref(x, 1, false), 1e-12, 1e-10);
  EXPECT_ALL_CLOSE(log_softmax(x, 0), softmax_ref(x, 0, true), 1e-12, 1e-10);
  Tensor t = x.t();  // not contiguous
  EXPECT_ALL_CLOSE(softmax(t, 1), softmax_ref(t.contiguous(), 1, false), 1e-12, 1e-10);
  Tensor xf = x.to(f32);
  EXPECT_ALL_CLOSE(softmax(xf, 1), softmax_ref(x, 1, false), 1e-6, 1e-5);
  EXPECT_ALL_CLOSE(log_softmax(xf, -1), softmax_ref(x, 1, true), 1e-5, 1e-5);
}

TEST(Softmax, IntegersBecomeF32) {
  EXPECT_EQ(softmax(tensor({1, 2}), 0).dtype(), f32);
}

// The rules are written with public ops, so they differentiate again: the gradient of
// |d sum(softmax(x) * w) / dx|^2 against central differences of the first gradient.
TEST(Softmax, SecondOrderGradient) {
  Tensor w = tensor({0.3, -0.2, 0.9});
  auto first_grad = [&](const Tensor& x) {
    return grad({(softmax(x, 0) * w).sum()}, {x}, {}, /*retain_graph=*/true, /*create_graph=*/true)[0];
  };
  Tensor x = tensor({0.1, 0.5, -0.4}).requires_grad_();
  Tensor g = first_grad(x);
  (g * g).sum().backward();
  std::vector<double> analytic = x.grad().to_vector<double>();
  const double eps = 1e-6;
  for (int64_t k = 0; k < 3; ++k) {
    auto at = [&](double delta) {
      Tensor xk = x.detach().clone();
      xk.data<double>()[k] += delta;
      xk.requires_grad_();
      Tensor gk = first_grad(xk);
      return (gk * gk).sum().item<double>();
    };
    EXPECT_NEAR(analytic[size_t(k)], (at(eps) - at(-eps)) / (2 * eps), 1e-6);
  }
}

TEST(Softmax, BadDimNamesOpAndLine) {
  Tensor x = zeros({2, 3});
  int line = __LINE__ + 1;
  EXPECT_THROWS_WITH(IndexError, softmax(x, 2), "[softmax]", "dim 2", "[2,3]",
                     "softmax_test.cpp:" + std::to_string(line));
  line = __LINE__ + 1;
  EXPECT_THROWS_WITH(IndexError, log_softmax(x, -3), "[log_softmax]",
                     "softmax_test.cpp:" + std::to_string(line));
}

}  // namespace
}  // namespace baton::testing
