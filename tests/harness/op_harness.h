// The one op-test harness (STYLE.md 7). Each op family registers OpCases; one
// parameterised test runs every case three ways:
//   1. values: the op on f64 inputs against a reference (a closed form computed in the
//      test, or PyTorch values stored in tests/data by tests/data/make_reference.py);
//   2. values again in f32 (inputs cast), with a looser tolerance;
//   3. gradients: autograd against central finite differences, in f64.
// Error behaviour (shape/dtype errors naming op, shapes and file:line) is tested with
// expect_error next to the cases.
#pragma once
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include <baton/baton.h>

namespace baton::testing {

using Inputs = std::vector<Tensor>;
using OpFn = std::function<Tensor(const Inputs&)>;

struct OpCase {
  std::string name;                        // "family.op/what", e.g. "unary.exp/basic"
  std::function<Inputs()> make_inputs;     // f64 (or integer) inputs
  OpFn fn;                                 // the op under test
  OpFn reference;                          // expected output from the same inputs (f64)
  std::vector<int> grad_inputs;            // inputs to gradcheck; {} = every f64 input
  bool check_grad = true;                  // false for non-differentiable ops
  bool check_f32 = true;                   // also run with inputs cast to f32
  double atol = 1e-10, rtol = 1e-8;        // f64 value tolerance
  double grad_atol = 1e-5, grad_rtol = 1e-4;
  std::vector<std::string> covers;         // registry op names this case exercises
  // False when fn has C++ side effects a compiled replay does not repeat (it seeds the
  // random generator): the modes test then compares only the traced call.
  bool replayable = true;
};

// gtest prints a case by its name (not as raw bytes) in listings and failures.
inline void PrintTo(const OpCase& c, std::ostream* os) { *os << c.name; }

// A case's name as a gtest parameter name ("unary.exp/basic" -> "unary_exp_basic").
std::string case_name(const ::testing::TestParamInfo<OpCase>& info);

// Adds cases to the global list; use through BATON_OP_CASES.
int register_cases(std::vector<OpCase> cases);
const std::vector<OpCase>& all_cases();

#define BATON_CONCAT_INNER(a, b) a##b
#define BATON_CONCAT(a, b) BATON_CONCAT_INNER(a, b)
// BATON_OP_CASES { return {OpCase{...}, ...}; }
#define BATON_OP_CASES                                                                \
  static std::vector<::baton::testing::OpCase> BATON_CONCAT(op_cases_, __LINE__)();   \
  static const int BATON_CONCAT(op_cases_registered_, __LINE__) =                     \
      ::baton::testing::register_cases(BATON_CONCAT(op_cases_, __LINE__)());          \
  static std::vector<::baton::testing::OpCase> BATON_CONCAT(op_cases_, __LINE__)()

// Values of `actual` within atol + rtol * |expected| of `expected` (shapes equal too).
::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected, double atol,
                                     double rtol);
#define EXPECT_ALL_CLOSE(a, e, atol, rtol) EXPECT_TRUE(::baton::testing::all_close(a, e, atol, rtol))

// Autograd's gradient of sum(fn(inputs) * r) (r random) against central differences.
::testing::AssertionResult gradients_match(const OpFn& fn, const Inputs& inputs,
                                           const std::vector<int>& which, double atol, double rtol);

// Runs f, expects an E whose message contains every one of `parts`.
template <class E>
::testing::AssertionResult throws_with(const std::function<void()>& f,
                                       const std::vector<std::string>& parts) {
  try {
    f();
  } catch (const E& e) {
    std::string msg = e.what();
    for (const auto& p : parts)
      if (msg.find(p) == std::string::npos)
        return ::testing::AssertionFailure() << "message \"" << msg << "\" lacks \"" << p << "\"";
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw another error: " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw";
}
#define EXPECT_THROWS_WITH(E, stmt, ...) \
  EXPECT_TRUE(::baton::testing::throws_with<E>([&] { stmt; }, {__VA_ARGS__}))

// Deterministic f64 test data in [lo, hi).
Tensor uniform(const Shape& shape, double lo = -1, double hi = 1, uint64_t seed = 1);
// The same in [-1, 1), as f32.
Tensor uniform_f32(const Shape& shape, uint64_t seed);
// How many of t's elements are NaN (a float tensor).
int64_t count_nans(const Tensor& t);

// Applies a double -> double function to every element (closed-form references).
Tensor map_double(const Tensor& x, const std::function<double(double)>& f);

// PyTorch reference values stored by tests/data/make_reference.py under `name`:
// inputs then outputs, as f64 tensors (integer tensors as i64).
struct Reference {
  Inputs inputs;
  std::vector<Tensor> outputs;
};
Reference load_reference(const std::string& name);

// A case whose inputs and expected output are the PyTorch reference file `file`.
OpCase torch_case(std::string name, std::string file, OpFn fn);

}  // namespace baton::testing
