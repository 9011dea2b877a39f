// cast (and clone / contiguous / Tensor::to built on it).
#include <cmath>

#include "harness/op_harness.h"

namespace baton::testing {
namespace {

OpCase cast_case(std::string name, std::function<Inputs()> make, OpFn fn, OpFn ref) {
  OpCase c;
  c.name = std::move(name);
  c.make_inputs = std::move(make);
  c.fn = std::move(fn);
  c.reference = std::move(ref);
  return c;
}

BATON_OP_CASES {
  std::vector<OpCase> cases = {
      // Same dtype (a copy) on a transposed input: differentiable, gradient passes through.
      cast_case("cast.cast/copy_strided", [] { return Inputs{uniform({3, 4}, -1, 1, 1)}; },
                [](const Inputs& in) { return cast(in[0].t(), in[0].dtype()); },
                [](const Inputs& in) { return in[0].t().contiguous(); }),
      // Float to integer truncates toward zero.
      cast_case("cast.cast/float_to_int", [] { return Inputs{uniform({2, 5}, -20, 20, 2)}; },
                [](const Inputs& in) { return cast(in[0], i32); },
                [](const Inputs& in) {
                  return map_double(in[0], [](double x) { return std::trunc(x); }).to(i32);
                }),
      cast_case("cast.cast/int_to_float", [] { return Inputs{tensor<int64_t>({-3, 0, 7, 1 << 20})}; },
                [](const Inputs& in) { return cast(in[0], f32); },
                [](const Inputs& in) { return in[0].to(f64); }),
      cast_case("cast.cast/to_bool", [] { return Inputs{tensor({0.0, -0.5, 2.0, 0.0})}; },
                [](const Inputs& in) { return cast(in[0], b8); },
                [](const Inputs&) { return tensor({false, true, true, false}); }),
  };
  for (size_t i = 1; i < cases.size(); ++i) cases[i].check_grad = false;
  return cases;
}

TEST(Cast, ToSameDtypeIsNoCopyButCloneIs) {
  Tensor x = tensor({1.0f, 2.0f});
  EXPECT_EQ(x.to(f32).raw_data(), x.raw_data());
  EXPECT_NE(x.clone().raw_data(), x.raw_data());
  EXPECT_EQ(x.to(f64).dtype(), f64);
}

// A permuted tensor made contiguous, converting or not: transposes whose source steps
// through memory along the output's rows are copied in tiles (sizes around the tile's
// width, batch dims outside), every element where the permutation says.
TEST(Cast, PermutedInputsCopyEveryElementWhereItBelongs) {
  struct Case { Shape shape; Shape order; };
  for (const Case& c : {Case{{37, 70}, {1, 0}}, Case{{3, 100, 45}, {0, 2, 1}}, Case{{3, 100, 45}, {2, 0, 1}},
                        Case{{33, 5, 64}, {2, 1, 0}}, Case{{8, 9, 31}, {1, 0, 2}}, Case{{1, 40, 9}, {2, 1, 0}}}) {
    const Shape& shape = c.shape;
    const std::vector<double> values = arange(0, double(shape.numel()), 1, f64).to_vector<double>();
    Shape out_shape;
    for (int64_t d : c.order) out_shape.push_back(shape[size_t(d)]);
    std::vector<double> expected(values.size());
    const Shape strides = contiguous_strides(shape);
    for (int64_t i = 0; i < out_shape.numel(); ++i) {
      int64_t rest = i, at = 0;
      for (size_t k = out_shape.size(); k-- > 0;) {
        at += rest % out_shape[k] * strides[size_t(c.order[k])];
        rest /= out_shape[k];
      }
      expected[size_t(i)] = values[size_t(at)];
    }
    for (auto [from, to] : {std::pair{f32, f32}, std::pair{f32, f64}, std::pair{i64, f32}, std::pair{f64, i32},
                            std::pair{f32, f16}}) {
      SCOPED_TRACE(str(shape, " permuted, ", from, " to ", to));
      Tensor x = tensor(values, shape).to(from).permute(c.order);
      Tensor y = cast(x, to);
      EXPECT_TRUE(y.is_contiguous());
      // (the expected values converted as a contiguous tensor is: f16 rounds past 2,048)
      EXPECT_EQ(y.to(f64).to_vector<double>(), tensor(expected, out_shape).to(to).to(f64).to_vector<double>());
    }
  }
}

TEST(Cast, PermutedEmptyTensorsCopyNothing) {
  EXPECT_EQ(cast(zeros({0, 40}).t(), f64).shape(), (Shape{40, 0}));
  EXPECT_EQ(zeros({40, 0, 9}).permute({2, 1, 0}).contiguous().shape(), (Shape{9, 0, 40}));
}

TEST(Cast, GradientComesBackInTheInputDtype) {
  Tensor x = tensor({1.0f, 2.0f}).requires_grad_();
  (x.to(f64) * 3.0).sum().backward();
  EXPECT_EQ(x.grad().dtype(), f32);
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{3, 3}));
}

}  // namespace
}  // namespace baton::testing
