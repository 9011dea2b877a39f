// Broadcasting and type promotion, as written down in docs/dtypes.md.
#include "harness/op_harness.h"

namespace baton::testing {
namespace {

TEST(Broadcasting, ShapesAlignFromTheRight) {
  EXPECT_EQ((zeros({3, 1}) + zeros({4})).shape(), (Shape{3, 4}));
  EXPECT_EQ((zeros({}) + zeros({2, 3})).shape(), (Shape{2, 3}));
  EXPECT_EQ((zeros({2, 1, 3}) + zeros({4, 1})).shape(), (Shape{2, 4, 3}));
  EXPECT_EQ((zeros({1}) * zeros({0})).shape(), (Shape{0}));
  EXPECT_EQ((zeros({5, 1, 1}) - zeros({1, 6, 1})).shape(), (Shape{5, 6, 1}));
}

TEST(Broadcasting, ValuesRepeatAlongSizeOneDims) {
  Tensor col = tensor({{1.f}, {2.f}}), row = tensor({10.f, 20.f, 30.f});
  EXPECT_EQ((col + row).to_vector<float>(), (std::vector<float>{11, 21, 31, 12, 22, 32}));
}

// One operand broadcast along the rows (x - mean(x, -1, keepdim)), on either side of
// operations that do not commute, for floats, integers and a bool result, against the
// loops written out; a transposed operand takes the strided loop instead.
TEST(Broadcasting, AnOperandBroadcastAlongTheRowsIsOneValuePerRow) {
  const Tensor x = uniform({37, 70}, -2, 2, 3), m = uniform({37, 1}, 0.5, 2, 4);
  const std::vector<double> xv = x.to_vector<double>(), mv = m.to_vector<double>();
  auto expect = [&](const Tensor& got, auto f) {
    std::vector<double> want(xv.size());
    for (size_t i = 0; i < xv.size(); ++i) want[i] = f(xv[i], mv[i / 70]);
    EXPECT_EQ(got.to(f64).to_vector<double>(), want);
  };
  expect(x - m, [](double a, double b) { return a - b; });
  expect(m - x, [](double a, double b) { return b - a; });
  expect(x / m, [](double a, double b) { return a / b; });
  expect(m / x, [](double a, double b) { return b / a; });
  expect(lt(x, m), [](double a, double b) { return double(a < b); });
  const Tensor xi = (x * 10).to(i64), mi = (m * 10).to(i64);
  std::vector<int64_t> want, a = xi.to_vector<int64_t>(), b = mi.to_vector<int64_t>();
  for (size_t i = 0; i < a.size(); ++i) want.push_back(b[i / 70] - a[i]);
  EXPECT_EQ((mi - xi).to_vector<int64_t>(), want);
  expect(x.t().contiguous().t() - m, [](double a, double b) { return a - b; });
}

TEST(Broadcasting, IncompatibleShapesNameOpShapesAndLine) {
  int line = __LINE__ + 1;
  EXPECT_THROWS_WITH(ShapeError, zeros({2, 3}) * zeros({2}), "[mul]", "[2,3]", "[2]", "dim 1",
                     "broadcast_test.cpp:" + std::to_string(line));
  EXPECT_THROWS_WITH(ShapeError, zeros({0}) + zeros({2}), "[add]", "[0]", "[2]");
}

TEST(Broadcasting, GradientsSumOverBroadcastDims) {
  Tensor a = ones({3, 1}, f64).requires_grad_(), b = ones({4}, f64).requires_grad_();
  (a * b).sum().backward();
  EXPECT_EQ(a.grad().shape(), (Shape{3, 1}));
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{4, 4, 4}));
  EXPECT_EQ(b.grad().to_vector<double>(), (std::vector<double>{3, 3, 3, 3}));
}

TEST(TypePromotion, TensorTensorTakesTheWiderType) {
  const DType order[] = {b8, i32, i64, f32, f64};
  for (DType a : order)
    for (DType b : order) {
      if (a == b8 && b == b8) continue;
      DType expected = promote_types(a, b);
      EXPECT_EQ((ones({2}, a) + ones({2}, b)).dtype(), expected) << a << " + " << b;
      EXPECT_EQ((ones({2}, a) * ones({2}, b)).dtype(), expected) << a << " * " << b;
    }
  EXPECT_EQ(promote_types(i64, f32), f32);  // like PyTorch: integers meet floats as the float
  EXPECT_EQ(promote_types(b8, i32), i32);
}

TEST(TypePromotion, ScalarsKeepTheTensorDtypeOfTheSameKind) {
  EXPECT_EQ((ones({2}, f32) * 2.0).dtype(), f32);   // a double scalar does not widen f32
  EXPECT_EQ((ones({2}, f64) + 1).dtype(), f64);
  EXPECT_EQ((ones({2}, i32) + int64_t(3)).dtype(), i32);  // an i64 scalar too
  EXPECT_EQ((ones({2}, i64) - 3).dtype(), i64);
  EXPECT_EQ((2 * ones({2}, i32)).dtype(), i32);
}

TEST(TypePromotion, FloatScalarWithIntegerTensorIsF32) {
  EXPECT_EQ((ones({2}, i32) * 1.5).dtype(), f32);
  EXPECT_EQ((ones({2}, i64) + 0.5).to_vector<float>(), (std::vector<float>{1.5f, 1.5f}));
  EXPECT_EQ((ones({2}, b8) * 2.5).dtype(), f32);
  EXPECT_EQ((ones({2}, b8) + 1).dtype(), i64);  // an integer scalar makes bool i64
}

TEST(TypePromotion, IntegerDivisionIsTrueDivisionInF32) {
  Tensor a = tensor({1, 7}), b = tensor({2, 2});
  EXPECT_EQ((a / b).dtype(), f32);
  EXPECT_EQ((a / b).to_vector<float>(), (std::vector<float>{0.5f, 3.5f}));
  EXPECT_EQ((tensor<int64_t>({3}) / 2).to_vector<float>(), (std::vector<float>{1.5f}));
  EXPECT_EQ((tensor({3.0}) / tensor({2})).dtype(), f64);
}

TEST(TypePromotion, ComparisonsGiveBool) {
  EXPECT_EQ((tensor({1, 2}) < tensor({1.5f, 1.5f})).dtype(), b8);
  EXPECT_EQ((tensor({1, 2}) < tensor({1.5f, 1.5f})).to_vector<bool>(), (std::vector<bool>{true, false}));
  EXPECT_EQ((tensor({1.f, 2.f}) == 2).to_vector<bool>(), (std::vector<bool>{false, true}));
}

TEST(TypePromotion, ReductionsAndFloatMath) {
  EXPECT_EQ(sum(tensor({1, 2})).dtype(), i64);  // integer sums do not overflow i32
  EXPECT_EQ(mean(tensor({1, 2})).dtype(), f32);
  EXPECT_EQ(exp(tensor({0, 1})).dtype(), f32);  // float-only math promotes integers to f32
  EXPECT_EQ(exp(tensor({0.0})).dtype(), f64);
}

TEST(TypePromotion, GradientsArriveInTheLeafDtype) {
  Tensor w = ones({2}, f32).requires_grad_();
  (w * ones({2}, f64)).sum().backward();  // computed in f64
  EXPECT_EQ(w.grad().dtype(), f32);
}

}  // namespace
}  // namespace baton::testing
