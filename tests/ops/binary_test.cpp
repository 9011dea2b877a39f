// add sub mul div pow maximum minimum with broadcasting, scalars and promotion.
#include <cmath>

#include "harness/op_harness.h"

namespace baton::testing {
namespace {

// f applied to a and b broadcast together, in double.
Tensor broadcast_reference(const Inputs& in, const std::function<double(double, double)>& f) {
  Shape s = (in[0] + in[1]).shape();  // broadcast shape
  Tensor x = expand(in[0], s).contiguous(), y = expand(in[1], s).contiguous();
  auto xv = x.to_vector<double>(), yv = y.to_vector<double>();
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = f(xv[i], yv[i]);
  return tensor(xv, s);
}

OpCase binary_case(std::string name, OpFn fn, std::function<double(double, double)> f,
                   Shape a, Shape b, double lo_b = -1, double lo_a = -1) {
  OpCase c;
  c.name = std::move(name);
  c.make_inputs = [a, b, lo_a, lo_b] { return Inputs{uniform(a, lo_a, 1, 1), uniform(b, lo_b, 1, 2)}; };
  c.fn = std::move(fn);
  c.reference = [f](const Inputs& in) { return broadcast_reference(in, f); };
  return c;
}

// One tensor input, the other operand a number: op(x, s) or op(s, x).
OpCase scalar_case(std::string name, std::function<Tensor(const Tensor&)> fn,
                   std::function<double(double)> f, double lo, double hi) {
  OpCase c;
  c.name = std::move(name);
  c.make_inputs = [lo, hi] { return Inputs{uniform({2, 3}, lo, hi, 4)}; };
  c.fn = [fn](const Inputs& in) { return fn(in[0]); };
  c.reference = [f](const Inputs& in) { return map_double(in[0], f); };
  return c;
}

BATON_OP_CASES {
  auto add_f = [](double x, double y) { return x + y; };
  auto sub_f = [](double x, double y) { return x - y; };
  auto mul_f = [](double x, double y) { return x * y; };
  auto div_f = [](double x, double y) { return x / y; };
  return {
      binary_case("binary.add/same", [](const Inputs& i) { return i[0] + i[1]; }, add_f, {2, 3}, {2, 3}),
      binary_case("binary.add/broadcast", [](const Inputs& i) { return add(i[0], i[1]); }, add_f,
                  {4, 1, 3}, {2, 1}),
      binary_case("binary.sub/broadcast", [](const Inputs& i) { return i[0] - i[1]; }, sub_f, {3}, {2, 3}),
      binary_case("binary.mul/broadcast", [](const Inputs& i) { return i[0] * i[1]; }, mul_f,
                  {2, 3, 4}, {3, 1}),
      binary_case("binary.mul/scalar_tensor", [](const Inputs& i) { return i[0] * i[1]; }, mul_f,
                  {5}, {}),
      binary_case("binary.div/broadcast", [](const Inputs& i) { return i[0] / i[1]; }, div_f,
                  {2, 3}, {3}, /*lo_b=*/0.5),
      // pow with a positive base, so that d/db = a^b log a exists everywhere.
      binary_case("binary.pow/broadcast", [](const Inputs& i) { return pow(i[0], i[1]); },
                  [](double x, double y) { return std::pow(x, y); }, {2, 3}, {3}, -2, /*lo_a=*/0.2),
      scalar_case("binary.pow/square", [](const Tensor& x) { return pow(x, 2); },
                  [](double x) { return x * x; }, -2, 2),
      scalar_case("binary.pow/sqrt", [](const Tensor& x) { return pow(x, 0.5); },
                  [](double x) { return std::sqrt(x); }, 0.2, 2),
      scalar_case("binary.pow/negative_base_whole_exponent", [](const Tensor& x) { return pow(x, 3.0); },
                  [](double x) { return x * x * x; }, -2, 2),
      scalar_case("binary.pow/scalar_base", [](const Tensor& x) { return pow(2.5, x); },
                  [](double x) { return std::pow(2.5, x); }, -2, 2),
      binary_case("binary.maximum/broadcast", [](const Inputs& i) { return maximum(i[0], i[1]); },
                  [](double x, double y) { return std::max(x, y); }, {4, 1, 3}, {2, 1}),
      binary_case("binary.minimum/broadcast", [](const Inputs& i) { return minimum(i[0], i[1]); },
                  [](double x, double y) { return std::min(x, y); }, {2, 3}, {3}),
      scalar_case("binary.maximum/scalar", [](const Tensor& x) { return maximum(x, 0.25); },
                  [](double x) { return std::max(x, 0.25); }, -1, 1),
      scalar_case("binary.minimum/scalar_left", [](const Tensor& x) { return minimum(-0.25, x); },
                  [](double x) { return std::min(x, -0.25); }, -1, 1),
  };
}

TEST(Binary, PowOnIntegers) {
  Tensor a = tensor({2, -3, 0, 1, -1, 5}), b = tensor({10, 3, 0, -2, -3, -1});
  Tensor p = pow(a, b);
  EXPECT_EQ(p.dtype(), i32);
  EXPECT_EQ(p.to_vector<int32_t>(), (std::vector<int32_t>{1024, -27, 1, 1, -1, 0}));
  EXPECT_EQ(pow(tensor<int64_t>({3}), 39).to_vector<int64_t>()[0], 4052555153018976267);
  // 3^40 overflows i64 and wraps, as in PyTorch.
  EXPECT_EQ(pow(tensor<int64_t>({3}), 40).to_vector<int64_t>()[0], -6289078614652622815);
  EXPECT_EQ(pow(tensor({4}), 0.5).dtype(), f32);  // a float exponent makes integers f32
  EXPECT_EQ(pow(tensor({4}), 0.5).to_vector<float>()[0], 2.0f);
  EXPECT_EQ(pow(2, tensor({1, 2, 3})).to_vector<int32_t>(), (std::vector<int32_t>{2, 4, 8}));
}

TEST(Binary, PowGradientAtZero) {
  // d/da 0^0 and d/db 0^b (b >= 0) are taken as 0, as PyTorch does, not NaN.
  Tensor a = tensor({0.0, 0.0, 2.0}).requires_grad_(), b = tensor({0.0, 2.0, 3.0}).requires_grad_();
  pow(a, b).sum().backward();
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{0, 0, 12}));
  auto gb = b.grad().to_vector<double>();
  EXPECT_EQ(gb[0], 0);
  EXPECT_EQ(gb[1], 0);
  EXPECT_NEAR(gb[2], 8 * std::log(2.0), 1e-12);
}

TEST(Binary, MaximumMinimumSplitTiesHalfAndHalf) {
  Tensor a = tensor({1.0, 2.0, 3.0}).requires_grad_(), b = tensor({2.0, 2.0, 1.0}).requires_grad_();
  maximum(a, b).sum().backward();
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{0, 0.5, 1}));
  EXPECT_EQ(b.grad().to_vector<double>(), (std::vector<double>{1, 0.5, 0}));
  Tensor c = tensor({1.0, 2.0, 3.0}).requires_grad_(), d = tensor({2.0, 2.0, 1.0}).requires_grad_();
  minimum(c, d).sum().backward();
  EXPECT_EQ(c.grad().to_vector<double>(), (std::vector<double>{1, 0.5, 0}));
  EXPECT_EQ(d.grad().to_vector<double>(), (std::vector<double>{0, 0.5, 1}));
}

TEST(Binary, MaximumPropagatesNaNAndPromotes) {
  Tensor x = tensor({NAN, 1.0f, 2.0f}), y = tensor({0.0f, NAN, 1.0f});
  auto m = maximum(x, y).to_vector<float>();
  EXPECT_TRUE(std::isnan(m[0]) && std::isnan(m[1]));
  EXPECT_EQ(m[2], 2.0f);
  auto n = minimum(x, y).to_vector<float>();
  EXPECT_TRUE(std::isnan(n[0]) && std::isnan(n[1]));
  EXPECT_EQ(maximum(tensor({1, 5}), tensor({2.5, 0.5})).dtype(), f64);
  EXPECT_EQ(maximum(tensor({1, 5}), 3).to_vector<int32_t>(), (std::vector<int32_t>{3, 5}));
  EXPECT_EQ(minimum(tensor({1.0f}), 0.5).dtype(), f32);
}

TEST(Binary, PowRejectsBoolAndBadShapes) {
  int line = __LINE__ + 1;
  EXPECT_THROWS_WITH(DTypeError, pow(tensor({true}), tensor({false})), "[pow]", "bool[1]",
                     "binary_test.cpp:" + std::to_string(line));
  line = __LINE__ + 1;
  EXPECT_THROWS_WITH(ShapeError, maximum(zeros({2, 3}), zeros({2})), "[maximum]", "[2,3]", "[2]",
                     "binary_test.cpp:" + std::to_string(line));
}

TEST(Binary, ScalarsKeepTheTensorDtype) {
  Tensor x = tensor({1.0f, 2.0f});
  EXPECT_EQ((x * 2.0).dtype(), f32);
  EXPECT_EQ((2 + x).dtype(), f32);
  EXPECT_EQ((x / 4).to_vector<float>(), (std::vector<float>{0.25f, 0.5f}));
  EXPECT_EQ((1.0 - x).to_vector<float>(), (std::vector<float>{0.0f, -1.0f}));
}

TEST(Binary, MixedDtypesPromote) {
  Tensor i = tensor({1, 2});        // i32
  Tensor l = tensor<int64_t>({3, 4});
  Tensor d = tensor({0.5, 0.25});   // f64
  EXPECT_EQ((i + l).dtype(), i64);
  EXPECT_EQ((i + d).dtype(), f64);
  EXPECT_EQ((i * 1.5).dtype(), f32);  // a float scalar makes integers f32
  EXPECT_EQ((i / 2).dtype(), f32);    // true division
  EXPECT_EQ((i / 2).to_vector<float>(), (std::vector<float>{0.5f, 1.0f}));
}

TEST(Binary, BroadcastErrorNamesOpShapesAndLine) {
  Tensor a = zeros({2, 3}), b = zeros({4});
  int line = __LINE__ + 1;
  EXPECT_THROWS_WITH(ShapeError, a + b, "[add]", "[2,3]", "[4]", "binary_test.cpp:" + std::to_string(line));
}

TEST(Binary, StridedInputs) {
  Tensor a = arange(0, 6, 1, f64).reshape({2, 3});
  Tensor t = a.t();  // [3,2], not contiguous
  EXPECT_EQ((t + 0.0).to_vector<double>(), (std::vector<double>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ((t * t).to_vector<double>(), (std::vector<double>{0, 9, 1, 16, 4, 25}));
}

TEST(Binary, LargeTensorsRunInParallelAndAgree) {
  Tensor a = uniform({300, 1000}), b = uniform({1000}, -1, 1, 3);
  Tensor c = a + b;
  auto av = a.to_vector<double>(), bv = b.to_vector<double>(), cv = c.to_vector<double>();
  for (size_t i = 0; i < cv.size(); i += 997) EXPECT_EQ(cv[i], av[i] + bv[i % 1000]);
}

}  // namespace
}  // namespace baton::testing
