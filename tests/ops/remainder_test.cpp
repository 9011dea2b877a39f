// fmod and remainder (src/ops/remainder.cpp): values against std::fmod and Python's rule in
// double, gradients by the harness, integers exact at the range edges, errors.
#include <cmath>
#include <limits>

#include "harness/op_harness.h"

namespace baton::testing {
namespace {

double python_mod(double a, double b) {
  double r = std::fmod(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

// Divisors kept away from 0 and operands away from the quotient's jumps, so finite
// differences see a smooth function.
OpCase remainder_case(const std::string& what, bool floored, Shape a, Shape b) {
  OpCase c;
  c.name = str("binary.", floored ? "remainder" : "fmod", "/", what);
  c.make_inputs = [a, b] {
    Tensor x = uniform(a, -5, 5, 11), y = uniform(b, 0.7, 1.3, 12);
    return Inputs{x, where(uniform(b, -1, 1, 13) < 0.0, y * -1.0, y)};
  };
  c.fn = [floored](const Inputs& in) { return floored ? remainder(in[0], in[1]) : fmod(in[0], in[1]); };
  c.reference = [floored](const Inputs& in) {
    const Shape out = (in[0] + in[1]).shape();
    std::vector<double> x = in[0].expand(out).contiguous().to_vector<double>();
    std::vector<double> y = in[1].expand(out).contiguous().to_vector<double>(), r(x.size());
    for (size_t i = 0; i < x.size(); ++i) r[i] = floored ? python_mod(x[i], y[i]) : std::fmod(x[i], y[i]);
    return tensor(r, out);
  };
  return c;
}

BATON_OP_CASES {
  return {remainder_case("same_shape", false, {3, 4}, {3, 4}), remainder_case("broadcast", false, {2, 3, 4}, {4}),
          remainder_case("same_shape", true, {3, 4}, {3, 4}), remainder_case("broadcast", true, {2, 3, 4}, {3, 1})};
}

TEST(Remainder, IntegersAreExactAtTheRangeEdges) {
  const int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  Tensor a = tensor<int64_t>({7, -7, 7, -7, lo, hi, lo, lo});
  Tensor b = tensor<int64_t>({3, 3, -3, -3, -1, 7, hi, lo});
  EXPECT_EQ(fmod(a, b).to_vector<int64_t>(), (std::vector<int64_t>{1, -1, 1, -1, 0, hi % 7, lo % hi, 0}));
  EXPECT_EQ(remainder(a, b).to_vector<int64_t>(),
            (std::vector<int64_t>{1, 2, -2, -1, 0, hi % 7, lo % hi + hi, 0}));
  EXPECT_EQ(fmod(tensor({7, -7}), 4).dtype(), DType::i32);
}

TEST(Remainder, FloatsFollowIeee) {
  const double inf = std::numeric_limits<double>::infinity();
  Tensor a = tensor<double>({5.5, -5.5, 3, -0.0, inf});
  Tensor b = tensor<double>({2, 2, inf, 1, 2});
  std::vector<double> f = fmod(a, b).to_vector<double>(), r = remainder(a, b).to_vector<double>();
  EXPECT_EQ(f[0], 1.5);
  EXPECT_EQ(f[1], -1.5);
  EXPECT_EQ(f[2], 3);
  EXPECT_TRUE(std::signbit(f[3]));
  EXPECT_TRUE(std::isnan(f[4]));
  EXPECT_EQ(r[1], 0.5);
  EXPECT_FALSE(std::signbit(r[3]));  // a zero takes the divisor's sign
}

TEST(Remainder, ErrorsNameTheOp) {
  EXPECT_THROWS_WITH(ValueError, fmod(tensor({1, 2}), tensor({1, 0})), "[fmod]", "integer division by zero");
  EXPECT_THROWS_WITH(DTypeError, remainder(tensor({true}), tensor({true})), "[remainder]", "not bool");
  EXPECT_THROWS_WITH(ShapeError, fmod(ones({2, 3}), ones({4})), "[fmod]", "[2,3]", "remainder_test.cpp:");
}

}  // namespace
}  // namespace baton::testing
