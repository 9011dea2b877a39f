// Runs every registered OpCase (see harness/op_harness.h) and checks that every op in
// the registry has at least one.
#include <set>

#include "harness/op_harness.h"
#include "dispatch/registry.h"

namespace baton::testing {
namespace {

class OpHarness : public ::testing::TestWithParam<OpCase> {};

Inputs as_f32(const Inputs& in) {
  Inputs out;
  for (const Tensor& t : in) out.push_back(t.dtype() == f64 ? t.to(f32) : t);
  return out;
}

TEST_P(OpHarness, ValuesF64) {
  const OpCase& c = GetParam();
  Inputs in = c.make_inputs();
  EXPECT_ALL_CLOSE(c.fn(in), c.reference(in), c.atol, c.rtol);
}

TEST_P(OpHarness, ValuesF32) {
  const OpCase& c = GetParam();
  if (!c.check_f32) GTEST_SKIP() << "f64 only";
  Inputs in = c.make_inputs();
  Inputs in32 = as_f32(in);
  Tensor out = c.fn(in32);
  Tensor expected = c.reference(in);
  if (is_floating(expected.dtype())) {
    EXPECT_EQ(out.dtype(), f32);
  }
  EXPECT_ALL_CLOSE(out, expected, 1e-4, 1e-4);
}

TEST_P(OpHarness, GradientsF64) {
  const OpCase& c = GetParam();
  if (!c.check_grad) GTEST_SKIP() << "not differentiable";
  EXPECT_TRUE(gradients_match(c.fn, c.make_inputs(), c.grad_inputs, c.grad_atol, c.grad_rtol));
}

INSTANTIATE_TEST_SUITE_P(AllOps, OpHarness, ::testing::ValuesIn(all_cases()), case_name);

// The op a case is named after: "unary.exp/basic" -> "exp".
std::string op_of(const std::string& name) {
  size_t dot = name.find('.'), slash = name.find('/');
  size_t begin = dot == std::string::npos ? 0 : dot + 1;
  return name.substr(begin, slash == std::string::npos ? std::string::npos : slash - begin);
}

TEST(OpHarnessCoverage, EveryRegisteredOpHasACase) {
  std::set<std::string> covered;
  for (const OpCase& c : all_cases()) {
    covered.insert(op_of(c.name));
    covered.insert(c.covers.begin(), c.covers.end());
  }
  std::vector<std::string> missing;
  for (const ops::OpDef* op : ops::all_ops())
    if (!covered.count(op->name)) missing.push_back(op->name);
  EXPECT_TRUE(missing.empty()) << "ops without a harness case: " << ::testing::PrintToString(missing);
}

}  // namespace
}  // namespace baton::testing
