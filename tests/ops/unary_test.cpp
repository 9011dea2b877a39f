// Unary math and activations: values against closed forms in double, gradients by the
// harness, dtype rules, errors, and second derivatives through create_graph.
#include <bit>
#include <cmath>
#include <numbers>

#include "harness/op_harness.h"
#include "ops/unary.h"

namespace baton::testing {
namespace {

using F = std::function<double(double)>;

// Inputs in [lo, hi); with gap > 0, values within gap of `kink` are pushed away from it
// (finite differences across a kink are meaningless).
Tensor inputs_in(const Shape& s, double lo, double hi, double kink = 0, double gap = 0) {
  return map_double(uniform(s, lo, hi, 11), [=](double x) {
    return std::abs(x - kink) >= gap ? x : (x < kink ? kink - gap : kink + gap);
  });
}

OpCase unary_case(std::string name, OpFn fn, F f, std::function<Inputs()> make) {
  OpCase c;
  c.name = std::move(name);
  c.make_inputs = std::move(make);
  c.fn = std::move(fn);
  c.reference = [f](const Inputs& in) { return map_double(in[0], f); };
  return c;
}

OpCase unary_case(std::string name, std::function<Tensor(const Tensor&)> op, F f, double lo,
                  double hi, double kink = 0, double gap = 0) {
  return unary_case(std::move(name), [op](const Inputs& in) { return op(in[0]); }, f,
                    [=] { return Inputs{inputs_in({3, 4}, lo, hi, kink, gap)}; });
}

double sigmoid_d(double x) { return 1 / (1 + std::exp(-x)); }
double cdf_d(double x) { return 0.5 * (1 + std::erf(x / std::numbers::sqrt2)); }
double gelu_tanh_d(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
}

// An activation's gradient op (g, v) -> g * f'(v) against f' written out in double: its
// values, and its gradients (f'' for v) against finite differences.
OpCase gradient_case(std::string name, OpFn fn, std::function<double(double, double)> f, double lo, double hi) {
  OpCase c;
  c.name = std::move(name);
  c.make_inputs = [lo, hi] { return Inputs{uniform({3, 7}, -1, 1, 31), uniform({3, 7}, lo, hi, 32)}; };
  c.fn = std::move(fn);
  c.reference = [f](const Inputs& in) {
    auto g = in[0].to_vector<double>(), v = in[1].to_vector<double>();
    for (size_t i = 0; i < g.size(); ++i) g[i] = f(g[i], v[i]);
    return tensor(g, in[0].shape());
  };
  return c;
}

std::vector<OpCase> activation_gradient_cases() {
  const double k = std::sqrt(2 / std::numbers::pi), cubic = 0.044715;
  auto phi = [](double x) { return std::exp(-x * x / 2) / std::sqrt(2 * std::numbers::pi); };
  auto cdf = [](double x) { return 0.5 * (1 + std::erf(x / std::sqrt(2.0))); };
  return {
      gradient_case("unary.sigmoid_backward/basic", [](const Inputs& in) { return ops::sigmoid_backward(in[0], in[1]); },
                    [](double g, double y) { return g * y * (1 - y); }, 0.05, 0.95),
      gradient_case("unary.tanh_backward/basic", [](const Inputs& in) { return ops::tanh_backward(in[0], in[1]); },
                    [](double g, double y) { return g * (1 - y * y); }, -0.95, 0.95),
      gradient_case("unary.gelu_backward/basic", [](const Inputs& in) { return ops::gelu_backward(in[0], in[1]); },
                    [=](double g, double x) { return g * (cdf(x) + x * phi(x)); }, -3, 3),
      gradient_case("unary.gelu_tanh_backward/basic",
                    [](const Inputs& in) { return ops::gelu_tanh_backward(in[0], in[1]); },
                    [=](double g, double x) {
                      const double t = std::tanh(k * (x + cubic * x * x * x)), du = k * (1 + 3 * cubic * x * x);
                      return g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * du);
                    },
                    -3, 3),
      gradient_case("unary.silu_backward/basic", [](const Inputs& in) { return ops::silu_backward(in[0], in[1]); },
                    [](double g, double x) {
                      const double s = 1 / (1 + std::exp(-x));
                      return g * s * (1 + x * (1 - s));
                    },
                    -4, 4),
  };
}

BATON_OP_CASES {
  auto tensor_fn = [](Tensor (*f)(const Tensor&, SourceLoc)) {
    return [f](const Tensor& x) { return f(x, SourceLoc::current()); };
  };
  std::vector<OpCase> cases = {
      unary_case("unary.neg/basic", tensor_fn(neg), [](double x) { return -x; }, -2, 2),
      unary_case("unary.abs/away_from_0", tensor_fn(abs), [](double x) { return std::abs(x); },
                 -2, 2, 0, 0.1),
      unary_case("unary.exp/basic", tensor_fn(exp), [](double x) { return std::exp(x); }, -3, 3),
      unary_case("unary.log/positive", tensor_fn(log), [](double x) { return std::log(x); }, 0.1, 4),
      unary_case("unary.sqrt/positive", tensor_fn(sqrt), [](double x) { return std::sqrt(x); },
                 0.1, 4),
      unary_case("unary.rsqrt/positive", tensor_fn(rsqrt),
                 [](double x) { return 1 / std::sqrt(x); }, 0.1, 4),
      unary_case("unary.sin/basic", tensor_fn(sin), [](double x) { return std::sin(x); }, -4, 4),
      unary_case("unary.cos/basic", tensor_fn(cos), [](double x) { return std::cos(x); }, -4, 4),
      unary_case("unary.tanh/basic", tensor_fn(tanh), [](double x) { return std::tanh(x); }, -4, 4),
      unary_case("unary.sigmoid/basic", tensor_fn(sigmoid), sigmoid_d, -6, 6),
      unary_case("unary.gelu/basic", tensor_fn(gelu), [](double x) { return x * cdf_d(x); }, -4, 4),
      unary_case("unary.gelu_tanh/basic", tensor_fn(gelu_tanh), gelu_tanh_d, -4, 4),
      unary_case("unary.silu/basic", tensor_fn(silu), [](double x) { return x * sigmoid_d(x); },
                 -6, 6),
      unary_case("unary.softplus/basic", tensor_fn(softplus),
                 [](double x) { return std::log1p(std::exp(x)); }, -6, 6),
      unary_case("unary.erf/basic", tensor_fn(erf), [](double x) { return std::erf(x); }, -3, 3),
      unary_case("unary.relu/away_from_0", tensor_fn(relu),
                 [](double x) { return x > 0 ? x : 0; }, -2, 2, 0, 0.1),
      unary_case("unary.leaky_relu/away_from_0", [](const Tensor& x) { return leaky_relu(x, 0.2); },
                 [](double x) { return x > 0 ? x : 0.2 * x; }, -2, 2, 0, 0.1),
      unary_case("unary.elu/away_from_0", [](const Tensor& x) { return elu(x, 1.5); },
                 [](double x) { return x > 0 ? x : 1.5 * std::expm1(x); }, -3, 2, 0, 0.1),
      unary_case("unary.clamp/away_from_edges", [](const Tensor& x) { return clamp(x, -0.5, 0.6); },
                 [](double x) { return std::min(std::max(x, -0.5), 0.6); }, -1, 1, -0.5, 0.1),
      unary_case("unary.sign/basic", tensor_fn(sign),
                 [](double x) { return double((x > 0) - (x < 0)); }, -2, 2),
  };
  // softplus far out, where the naive log(1 + e^x) overflows or rounds to 0.
  cases.push_back(unary_case(
      "unary.softplus/large", [](const Inputs& in) { return softplus(in[0]); },
      [](double x) { return x > 30 ? x : std::log1p(std::exp(x)); },
      [] { return Inputs{tensor({-90.0, -30.0, -15.0, 15.0, 30.0, 90.0})}; }));
  // clamp's upper edge too (the first case only avoids -0.5).
  cases.push_back(unary_case(
      "unary.clamp/both_edges", [](const Inputs& in) { return clamp(in[0], -0.5, 0.6); },
      [](double x) { return std::min(std::max(x, -0.5), 0.6); },
      [] { return Inputs{tensor({-0.9, -0.7, -0.3, 0.1, 0.45, 0.7, 1.2})}; }));
  // A strided (transposed) input goes through the general loop.
  cases.push_back(unary_case(
      "unary.tanh/transposed", [](const Inputs& in) { return tanh(in[0].t()); },
      [](double x) { return std::tanh(x); }, [] { return Inputs{uniform({4, 3}, -2, 2, 5)}; }));
  cases.back().reference = [](const Inputs& in) {
    return map_double(in[0].t().contiguous(), [](double x) { return std::tanh(x); });
  };
  for (auto& c : cases)
    if (c.name.starts_with("unary.sign")) c.check_grad = false;

  OpCase lnot = unary_case(
      "unary.logical_not/basic", [](const Inputs& in) { return logical_not(in[0]); },
      [](double x) { return double(x == 0); },
      [] { return Inputs{tensor({0.0, 1.5, -2.0, 0.0, 3.0}), tensor({true, false, true})}; });
  lnot.reference = [](const Inputs& in) { return map_double(in[0], [](double x) { return double(x == 0); }).to(b8); };
  lnot.check_grad = false;
  cases.push_back(lnot);

  OpCase back;
  back.name = "unary.relu_backward/basic";
  back.make_inputs = [] { return Inputs{uniform({3, 4}, -1, 1, 3), inputs_in({3, 4}, -1, 1, 0, 0.1)}; };
  back.fn = [](const Inputs& in) { return ops::relu_backward(in[0], in[1]); };
  back.reference = [](const Inputs& in) {
    auto g = in[0].to_vector<double>(), y = in[1].to_vector<double>();
    for (size_t i = 0; i < g.size(); ++i) g[i] = y[i] > 0 ? g[i] : 0;
    return tensor(g, in[0].shape());
  };
  back.grad_inputs = {0};
  cases.push_back(back);
  for (OpCase& c : activation_gradient_cases()) cases.push_back(std::move(c));
  return cases;
}

TEST(Unary, FloatMathPromotesIntegersToF32) {
  Tensor i = tensor({1, 4, 9});
  EXPECT_EQ(sqrt(i).dtype(), f32);
  EXPECT_EQ(sqrt(i).to_vector<float>(), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(exp(tensor<int64_t>({0})).dtype(), f32);
  EXPECT_EQ(sigmoid(tensor({true})).dtype(), f32);
  EXPECT_EQ(leaky_relu(tensor({-2, 2})).dtype(), f32);
}

TEST(Unary, F32StaysF32) {
  Tensor x = tensor({0.5f, -0.25f, 2.0f});
  for (auto f : {neg, abs, exp, sqrt, sin, cos, tanh, sigmoid, relu, gelu, gelu_tanh, silu, softplus, erf, sign})
    EXPECT_EQ(f(x, SourceLoc::current()).dtype(), f32);
  EXPECT_EQ(elu(x).dtype(), f32);
  EXPECT_EQ(clamp(x, 0, 1).dtype(), f32);
  EXPECT_EQ(logical_not(x).dtype(), b8);
}

TEST(Unary, IntegerOpsKeepTheirDtype) {
  Tensor i = tensor({-3, 0, 5});
  EXPECT_EQ(abs(i).to_vector<int32_t>(), (std::vector<int32_t>{3, 0, 5}));
  EXPECT_EQ(neg(i).to_vector<int32_t>(), (std::vector<int32_t>{3, 0, -5}));
  EXPECT_EQ(sign(i).to_vector<int32_t>(), (std::vector<int32_t>{-1, 0, 1}));
  EXPECT_EQ(relu(i).to_vector<int32_t>(), (std::vector<int32_t>{0, 0, 5}));
  EXPECT_EQ(clamp(i, -1, 2).to_vector<int32_t>(), (std::vector<int32_t>{-1, 0, 2}));
  EXPECT_EQ(clamp(i, -INFINITY, 2).to_vector<int32_t>(), (std::vector<int32_t>{-3, 0, 2}));
  EXPECT_EQ(clamp(i, -0.5, 2.5).dtype(), f32);  // fractional bounds
  EXPECT_EQ(logical_not(i).to_vector<bool>(), (std::vector<bool>{false, true, false}));
}

TEST(Unary, NaNPropagates) {
  Tensor x = tensor({NAN, 1.0f});
  EXPECT_TRUE(std::isnan(relu(x).to_vector<float>()[0]));
  EXPECT_TRUE(std::isnan(clamp(x, 0, 1).to_vector<float>()[0]));
  EXPECT_TRUE(std::isnan(exp(x).to_vector<float>()[0]));
  EXPECT_TRUE(std::isnan(tanh(x).to_vector<float>()[0]));
}

TEST(Unary, BoolIsNotANumber) {
  Tensor b = tensor({true, false});
  int line = __LINE__ + 1;
  EXPECT_THROWS_WITH(DTypeError, neg(b), "[neg]", "bool[2]", "unary_test.cpp:" + std::to_string(line));
  EXPECT_THROWS_WITH(DTypeError, relu(b), "[relu]", "bool");
  EXPECT_THROWS_WITH(DTypeError, clamp(b, 0, 1), "[clamp]", "bool");
}

TEST(Unary, ReluBackwardNeedsOneShape) {
  Tensor g = zeros({2, 3}), y = zeros({3});
  int line = __LINE__ + 1;
  EXPECT_THROWS_WITH(ShapeError, ops::relu_backward(g, y), "[relu_backward]", "[2,3]", "[3]",
                     "unary_test.cpp:" + std::to_string(line));
}

// Second derivatives: grad(create_graph) then grad again, against closed forms.
double second_derivative(Tensor (*f)(const Tensor&, SourceLoc), double at) {
  Tensor x = tensor({at}).requires_grad_();
  Tensor d1 = grad({f(x, SourceLoc::current()).sum()}, {x}, {}, true, true)[0];
  return grad({d1.sum()}, {x})[0].item<double>();
}

TEST(Unary, SecondDerivatives) {
  double x = 0.7, t = std::tanh(x), s = sigmoid_d(x);
  EXPECT_NEAR(second_derivative(tanh, x), -2 * t * (1 - t * t), 1e-12);
  EXPECT_NEAR(second_derivative(sigmoid, x), s * (1 - s) * (1 - 2 * s), 1e-12);
  EXPECT_NEAR(second_derivative(exp, x), std::exp(x), 1e-12);
  EXPECT_NEAR(second_derivative(log, x), -1 / (x * x), 1e-12);
  EXPECT_NEAR(second_derivative(sin, x), -std::sin(x), 1e-12);
  double pdf = std::exp(-x * x / 2) / std::sqrt(2 * std::numbers::pi);
  EXPECT_NEAR(second_derivative(gelu, x), pdf * (2 - x * x), 1e-12);
  EXPECT_NEAR(second_derivative(relu, x), 0.0, 1e-12);
}

TEST(Unary, LargeTensorsAgreeWithLibm) {
  Tensor x = uniform({1000, 300}, -8, 8, 9);
  Tensor x32 = x.to(f32);
  auto xv = x32.to_vector<float>();
  auto e = exp(x32).to_vector<float>(), t = tanh(x32).to_vector<float>();
  for (size_t i = 0; i < xv.size(); i += 101) {
    EXPECT_NEAR(e[i], std::exp(double(xv[i])), 1e-6 * std::exp(double(xv[i])));
    EXPECT_NEAR(t[i], std::tanh(double(xv[i])), 1e-6);
  }
}

// sin and cos run a block form over contiguous tensors (the cheaper reduction, then the
// whole function for chunks holding a large argument); a transposed or sliced input is
// copied first. Each gives the bits of the contiguous tensor's, and libm's values.
TEST(Unary, SinAndCosAgreeOnEveryPathAndWithLibm) {
  Tensor x = uniform({300, 70}, -20, 20, 4);
  std::vector<float> v = x.to_vector<float>();
  for (size_t i = 0; i < v.size(); i += 37) v[i] = float(i) * 1e5f * (i % 2 ? 1 : -1);  // past 2^20
  v[5] = INFINITY, v[6] = NAN, v[7] = -0.0f, v[8] = 3e38f;
  x = tensor(v, {300, 70});
  auto bits = [](const Tensor& t) {
    std::vector<uint32_t> b;
    for (float e : t.to_vector<float>()) b.push_back(std::bit_cast<uint32_t>(e));
    return b;
  };
  for (auto f : {sin, cos}) {
    const std::vector<float> flat = f(x, SourceLoc::current()).to_vector<float>();
    const Tensor t = x.t();
    EXPECT_EQ(bits(f(t, SourceLoc::current())), bits(f(t.contiguous(), SourceLoc::current())));
    const Tensor every_other = slice(x, 1, 0, 70, 2);
    EXPECT_EQ(bits(f(every_other, SourceLoc::current())), bits(f(every_other.contiguous(), SourceLoc::current())));
    const bool is_sin = f == static_cast<decltype(f)>(sin);
    for (size_t i = 0; i < v.size(); ++i) {
      if (std::isnan(v[i]) || std::isinf(v[i])) {
        EXPECT_TRUE(std::isnan(flat[i])) << v[i];
        continue;
      }
      const double want = is_sin ? std::sin(double(v[i])) : std::cos(double(v[i]));
      EXPECT_NEAR(flat[i], want, 1e-6 * std::max(std::abs(want), 1e-30)) << v[i];
    }
  }
}

}  // namespace
}  // namespace baton::testing
