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

TEST(Cast, GradientComesBackInTheInputDtype) {
  Tensor x = tensor({1.0f, 2.0f}).requires_grad_();
  (x.to(f64) * 3.0).sum().backward();
  EXPECT_EQ(x.grad().dtype(), f32);
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{3, 3}));
}

}  // namespace
}  // namespace baton::testing
