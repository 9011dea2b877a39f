// Comparisons (bool results, not differentiable) and where (differentiable in its branches).
#include <cmath>

#include "harness/op_harness.h"

namespace baton::testing {
namespace {

// Multiples of 1/4 in [-1, 1], so that ties happen and survive the cast to f32.
Tensor quarters(const Shape& s, uint64_t seed) {
  return map_double(uniform(s, -1, 1, seed), [](double x) { return std::round(x * 4) / 4; });
}

OpCase compare_case(std::string name, OpFn fn, std::function<bool(double, double)> f) {
  OpCase c;
  c.name = std::move(name);
  c.make_inputs = [] { return Inputs{quarters({4, 3}, 1), quarters({3}, 2)}; };
  c.fn = std::move(fn);
  c.reference = [f](const Inputs& in) {
    Shape s{4, 3};
    auto a = in[0].to_vector<double>(), b = expand(in[1], s).contiguous().to_vector<double>();
    std::vector<bool> out(a.size());
    for (size_t i = 0; i < a.size(); ++i) out[i] = f(a[i], b[i]);
    std::vector<double> d(out.begin(), out.end());
    return tensor(d, s).to(b8);
  };
  c.check_grad = false;
  return c;
}

OpCase where_case() {
  OpCase c;
  c.name = "compare.where/broadcast";
  c.make_inputs = [] {
    return Inputs{uniform({2, 3}, -1, 1, 1), uniform({3}, -1, 1, 2), uniform({2, 1}, -1, 1, 3)};
  };
  c.fn = [](const Inputs& in) { return where(in[0] > 0, in[1], in[2]); };
  c.reference = [](const Inputs& in) {
    auto p = in[0].to_vector<double>(), a = in[1].to_vector<double>(), b = in[2].to_vector<double>();
    std::vector<double> out(6);
    for (size_t i = 0; i < 6; ++i) out[i] = p[i] > 0 ? a[i % 3] : b[i / 3];
    return tensor(out, {2, 3});
  };
  c.grad_inputs = {1, 2};  // the condition is not differentiable
  c.covers = {"gt"};
  return c;
}

BATON_OP_CASES {
  return {
      compare_case("compare.eq/broadcast", [](const Inputs& i) { return i[0] == i[1]; },
                   [](double a, double b) { return a == b; }),
      compare_case("compare.ne/broadcast", [](const Inputs& i) { return ne(i[0], i[1]); },
                   [](double a, double b) { return a != b; }),
      compare_case("compare.lt/broadcast", [](const Inputs& i) { return i[0] < i[1]; },
                   [](double a, double b) { return a < b; }),
      compare_case("compare.le/broadcast", [](const Inputs& i) { return le(i[0], i[1]); },
                   [](double a, double b) { return a <= b; }),
      compare_case("compare.gt/broadcast", [](const Inputs& i) { return gt(i[0], i[1]); },
                   [](double a, double b) { return a > b; }),
      compare_case("compare.ge/broadcast", [](const Inputs& i) { return i[0] >= i[1]; },
                   [](double a, double b) { return a >= b; }),
      where_case(),
  };
}

TEST(Compare, ResultsAreBoolAndOperandsPromote) {
  Tensor i = tensor({1, 2, 3});
  Tensor d = tensor({1.5, 2.0, 2.5});
  Tensor r = i >= d;
  EXPECT_EQ(r.dtype(), b8);
  EXPECT_EQ(r.to_vector<bool>(), (std::vector<bool>{false, true, true}));
  EXPECT_EQ((i == 2).to_vector<bool>(), (std::vector<bool>{false, true, false}));
  EXPECT_EQ((2.5 < i).to_vector<bool>(), (std::vector<bool>{false, false, true}));
  EXPECT_EQ((tensor({0.5f}) < 1).dtype(), b8);
}

TEST(Compare, WhereBranchesPromoteAndConditionMustBeBool) {
  Tensor cond = tensor({true, false});
  Tensor w = where(cond, tensor({1, 2}), tensor({0.5, 0.25}));
  EXPECT_EQ(w.dtype(), f64);
  EXPECT_EQ(w.to_vector<double>(), (std::vector<double>{1, 0.25}));
  int line = __LINE__ + 1;
  EXPECT_THROWS_WITH(DTypeError, where(tensor({1.0f, 0.0f}), w, w), "[where]", "f32[2]",
                     "compare_test.cpp:" + std::to_string(line));
}

TEST(Compare, BroadcastErrorNamesOpShapesAndLine) {
  int line = __LINE__ + 1;
  EXPECT_THROWS_WITH(ShapeError, zeros({2, 3}) < zeros({2}), "[lt]", "[2,3]", "[2]",
                     "compare_test.cpp:" + std::to_string(line));
  line = __LINE__ + 1;
  EXPECT_THROWS_WITH(ShapeError, where(zeros({4}) > 0, zeros({3}), zeros({3})), "[where]", "[4]",
                     "compare_test.cpp:" + std::to_string(line));
}

}  // namespace
}  // namespace baton::testing
