// add sub mul div with broadcasting, scalars and promotion.
#include "harness/op_harness.h"

namespace baton::testing {
namespace {

OpCase binary_case(std::string name, OpFn fn, std::function<double(double, double)> f,
                   Shape a, Shape b, double lo_b = -1) {
  return OpCase{
      .name = name,
      .make_inputs = [a, b, lo_b] { return Inputs{uniform(a, -1, 1, 1), uniform(b, lo_b, 1, 2)}; },
      .fn = fn,
      .reference =
          [f](const Inputs& in) {
            Shape s = (in[0] + in[1]).shape();  // broadcast shape
            Tensor x = expand(in[0], s).contiguous(), y = expand(in[1], s).contiguous();
            auto xv = x.to_vector<double>(), yv = y.to_vector<double>();
            for (size_t i = 0; i < xv.size(); ++i) xv[i] = f(xv[i], yv[i]);
            return tensor(xv, s);
          },
  };
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
  };
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
