// Rounding, the rest of trigonometry and the hyperbolic functions (src/ops/unary_math.cpp):
// values against libm in double, gradients by the harness, dtype rules, domains, errors.
#include <cmath>
#include <limits>

#include "harness/op_harness.h"

namespace baton::testing {
namespace {

using F = double (*)(double);

OpCase math_case(std::string name, Tensor (*op)(const Tensor&, SourceLoc), F f, double lo, double hi) {
  OpCase c;
  c.name = std::move(name);
  c.make_inputs = [=] { return Inputs{uniform({3, 4}, lo, hi, 13)}; };
  c.fn = [op](const Inputs& in) { return op(in[0], SourceLoc::current()); };
  c.reference = [f](const Inputs& in) { return map_double(in[0], f); };
  return c;
}

// Inputs at least 0.05 away from every multiple of 0.5, where f32 and f64 could round apart.
Tensor away_from_halves(const Shape& s, uint64_t seed) {
  return map_double(uniform(s, -4, 4, seed), [](double x) {
    const double h = std::round(2 * x) / 2;
    return std::abs(x - h) >= 0.05 ? x : (x < h ? h - 0.05 : h + 0.05);
  });
}

OpCase rounding_case(std::string name, Tensor (*op)(const Tensor&, SourceLoc), F f, std::function<Inputs()> make) {
  OpCase c;
  c.name = std::move(name);
  c.make_inputs = std::move(make);
  c.fn = [op](const Inputs& in) { return op(in[0], SourceLoc::current()); };
  c.reference = [f](const Inputs& in) { return map_double(in[0], f); };
  c.check_grad = false;  // zero wherever it exists: no gradient flows
  return c;
}

double nearbyint_d(double x) { return std::nearbyint(x); }
double floor_d(double x) { return std::floor(x); }
double ceil_d(double x) { return std::ceil(x); }

BATON_OP_CASES {
  std::vector<OpCase> cases = {
      math_case("unary.tan/basic", tan, [](double x) { return std::tan(x); }, -1.2, 1.2),
      math_case("unary.asin/inside_domain", asin, [](double x) { return std::asin(x); }, -0.9, 0.9),
      math_case("unary.acos/inside_domain", acos, [](double x) { return std::acos(x); }, -0.9, 0.9),
      math_case("unary.atan/basic", atan, [](double x) { return std::atan(x); }, -4, 4),
      math_case("unary.sinh/basic", sinh, [](double x) { return std::sinh(x); }, -3, 3),
      math_case("unary.cosh/basic", cosh, [](double x) { return std::cosh(x); }, -3, 3),
      math_case("unary.asinh/basic", asinh, [](double x) { return std::asinh(x); }, -4, 4),
      math_case("unary.acosh/above_1", acosh, [](double x) { return std::acosh(x); }, 1.1, 4),
      math_case("unary.atanh/inside_domain", atanh, [](double x) { return std::atanh(x); }, -0.9, 0.9),
  };
  auto random = [](uint64_t seed) { return [seed] { return Inputs{away_from_halves({3, 5}, seed)}; }; };
  cases.push_back(rounding_case("unary.floor/basic", floor, floor_d, random(21)));
  cases.push_back(rounding_case("unary.ceil/basic", ceil, ceil_d, random(22)));
  cases.push_back(rounding_case("unary.round/basic", round, nearbyint_d, random(23)));
  // Halves go to the even neighbour; -0.5 rounds to -0.
  cases.push_back(rounding_case("unary.round/halves_to_even", round, nearbyint_d, [] {
    return Inputs{tensor({-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 0.49999999999999994})};
  }));
  cases.back().reference = [](const Inputs&) { return tensor({-2.0, -2.0, -0.0, 0.0, 2.0, 2.0, 4.0, 0.0}); };
  // Whole numbers, negative zero and infinities stay as they are.
  struct Rounding {
    const char* name;
    Tensor (*op)(const Tensor&, SourceLoc);
    F f;
  };
  for (const Rounding& r : {Rounding{"floor", floor, floor_d}, Rounding{"ceil", ceil, ceil_d},
                            Rounding{"round", round, nearbyint_d}})
    cases.push_back(rounding_case(str("unary.", r.name, "/whole_and_special"), r.op, r.f, [] {
      const double inf = std::numeric_limits<double>::infinity();
      return Inputs{tensor({-3.0, -0.0, 0.0, 7.0, 1e15, -inf, inf})};
    }));
  return cases;
}

TEST(UnaryMath, RoundingKeepsIntegerDtypes) {
  Tensor i = tensor({-3, 0, 5});
  for (auto f : {floor, ceil, round}) {
    Tensor y = f(i, SourceLoc::current());
    EXPECT_EQ(y.dtype(), i32);
    EXPECT_EQ(y.to_vector<int32_t>(), (std::vector<int32_t>{-3, 0, 5}));
  }
  Tensor big = tensor<int64_t>({(int64_t(1) << 62) + 1});  // no detour through double
  EXPECT_EQ(floor(big).to_vector<int64_t>()[0], (int64_t(1) << 62) + 1);
}

TEST(UnaryMath, RoundingF32) {
  Tensor x = tensor({-1.5f, -0.25f, 0.5f, 2.5f, 2.75f});
  EXPECT_EQ(floor(x).to_vector<float>(), (std::vector<float>{-2, -1, 0, 2, 2}));
  EXPECT_EQ(ceil(x).to_vector<float>(), (std::vector<float>{-1, -0, 1, 3, 3}));
  EXPECT_EQ(round(x).to_vector<float>(), (std::vector<float>{-2, -0, 0, 2, 3}));
  EXPECT_EQ(floor(x).dtype(), f32);
}

TEST(UnaryMath, FloatMathPromotesIntegersToF32) {
  Tensor i = tensor({0, 1});
  for (auto f : {tan, asin, acos, atan, sinh, cosh, asinh, atanh}) EXPECT_EQ(f(i, SourceLoc::current()).dtype(), f32);
  EXPECT_EQ(acosh(tensor({1, 2})).to_vector<float>()[0], 0.0f);
  EXPECT_EQ(asin(tensor<int64_t>({1})).to_vector<float>()[0], float(std::asin(1.0)));
  Tensor x = tensor({0.5f});
  for (auto f : {tan, asin, acos, atan, sinh, cosh, asinh, atanh}) EXPECT_EQ(f(x, SourceLoc::current()).dtype(), f32);
}

TEST(UnaryMath, OutsideTheDomainIsNaN) {
  Tensor x = tensor({2.0, -1.5});
  for (auto f : {asin, acos, atanh}) {
    auto v = f(x, SourceLoc::current()).to_vector<double>();
    EXPECT_TRUE(std::isnan(v[0]) && std::isnan(v[1]));
  }
  EXPECT_TRUE(std::isnan(acosh(tensor({0.5})).item<double>()));
  auto edge = atanh(tensor({1.0, -1.0})).to_vector<double>();
  EXPECT_EQ(edge[0], std::numeric_limits<double>::infinity());
  EXPECT_EQ(edge[1], -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(tan(tensor({NAN})).item<double>()));
}

TEST(UnaryMath, RoundingIsNotDifferentiable) {
  Tensor x = tensor({0.3, 1.7}).requires_grad_();
  EXPECT_FALSE(floor(x).requires_grad());
  // Through a sum with a differentiable term, floor contributes nothing.
  Tensor y = (floor(x) + ceil(x) + round(x) + x * 2.0).sum();
  y.backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{2, 2}));
}

TEST(UnaryMath, SecondDerivatives) {
  auto second = [](Tensor (*f)(const Tensor&, SourceLoc), double at) {
    Tensor x = tensor({at}).requires_grad_();
    Tensor d1 = grad({f(x, SourceLoc::current()).sum()}, {x}, {}, true, true)[0];
    return grad({d1.sum()}, {x})[0].item<double>();
  };
  const double x = 0.4;
  EXPECT_NEAR(second(tan, x), 2 * std::tan(x) * (1 + std::tan(x) * std::tan(x)), 1e-12);
  EXPECT_NEAR(second(asin, x), x / std::pow(1 - x * x, 1.5), 1e-12);
  EXPECT_NEAR(second(atan, x), -2 * x / ((1 + x * x) * (1 + x * x)), 1e-12);
  EXPECT_NEAR(second(sinh, x), std::sinh(x), 1e-12);
  EXPECT_NEAR(second(atanh, x), 2 * x / ((1 - x * x) * (1 - x * x)), 1e-12);
}

TEST(UnaryMath, BoolIsNotANumber) {
  Tensor b = tensor({true, false});
  int line = __LINE__ + 1;
  EXPECT_THROWS_WITH(DTypeError, floor(b), "[floor]", "bool[2]", "unary_math_test.cpp:" + std::to_string(line));
  EXPECT_THROWS_WITH(DTypeError, ceil(b), "[ceil]", "bool");
  EXPECT_THROWS_WITH(DTypeError, round(b), "[round]", "bool");
}

TEST(UnaryMath, LargeTensorsAgreeWithLibm) {
  Tensor x = uniform({300, 200}, -0.99, 0.99, 9).to(f32);
  auto xv = x.to_vector<float>();
  auto as = asin(x).to_vector<float>(), th = atanh(x).to_vector<float>(), r = round(x * 10.0f).to_vector<float>();
  for (size_t i = 0; i < xv.size(); i += 97) {
    EXPECT_NEAR(as[i], std::asin(double(xv[i])), 1e-6);
    EXPECT_NEAR(th[i], std::atanh(double(xv[i])), 1e-5);
    EXPECT_EQ(r[i], std::nearbyint(xv[i] * 10.0f));
  }
}

}  // namespace
}  // namespace baton::testing
