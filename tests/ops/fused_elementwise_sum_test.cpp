// fused_elementwise_sum and fused_elementwise_and_sum (made by the reduction-fusion pass):
// harness cases against the unfused public ops, and bit-for-bit equality with
// fused_elementwise's elements summed by `sum` (the kernels sum in sum's order) for every
// path of the kernel: short rows, long rows, columns (the leading dims), a middle run,
// dims in several runs, everything, on several threads; errors naming the op. (The
// layouts a plan gives fused_elementwise_and_sum's elements: fused_elementwise_test.cpp.)
#include <bit>
#include <cmath>

#include "dispatch/registry.h"
#include "harness/op_harness.h"

namespace baton::testing {
namespace {

Tensor fused(const std::string& program, const Inputs& in) {
  return ops::call_many(*ops::find_op("fused_elementwise"), in, {{"program", program}}, SourceLoc::current())[0];
}

Tensor fused_sum(const std::string& program, const Inputs& in, const std::vector<int64_t>& dims, bool keepdim,
                 SourceLoc loc = SourceLoc::current()) {
  const ops::Attrs attrs{{"program", program}, {"dims", dims}, {"keepdim", int64_t(keepdim)}};
  return ops::call_many(*ops::find_op("fused_elementwise_sum"), in, attrs, loc)[0];
}

// (x - t)^2 * w with a bias row w: an MSE-like loss's terms.
const char* kSquaredError = "r0=sub(in0,in1); r1=mul(r0,r0); r2=mul(r1,in2)";

// x, t of `shape` and w a row of its last dim.
Inputs squared_error_inputs(const Shape& shape) {
  return Inputs{uniform(shape, -2, 2, 1), uniform(shape, -2, 2, 2), uniform({shape.back()}, 0, 1, 3)};
}

OpCase sum_case(std::string what, Shape shape, std::vector<int64_t> dims, bool keepdim) {
  return OpCase{
      .name = "fused.fused_elementwise_sum/" + what,
      .make_inputs = [shape] { return squared_error_inputs(shape); },
      .fn = [=](const Inputs& i) { return fused_sum(kSquaredError, i, dims, keepdim); },
      .reference = [=](const Inputs& i) { return sum((i[0] - i[1]) * (i[0] - i[1]) * i[2], dims, keepdim); },
      .check_grad = false,
  };
}

std::vector<Tensor> and_sum(const std::string& program, const Inputs& in, const std::vector<int64_t>& dims,
                            bool keepdim, SourceLoc loc = SourceLoc::current()) {
  const ops::Attrs attrs{{"program", program}, {"dims", dims}, {"keepdim", int64_t(keepdim)}};
  return ops::call_many(*ops::find_op("fused_elementwise_and_sum"), in, attrs, loc);
}

// fused_elementwise_and_sum's result `output`: 0 the elements, 1 their sum.
OpCase and_sum_case(std::string what, Shape shape, std::vector<int64_t> dims, size_t output) {
  return OpCase{
      .name = "fused.fused_elementwise_and_sum/" + what,
      .make_inputs = [shape] { return squared_error_inputs(shape); },
      .fn = [=](const Inputs& i) { return and_sum(kSquaredError, i, dims, false).at(output); },
      .reference =
          [=](const Inputs& i) {
            const Tensor elements = (i[0] - i[1]) * (i[0] - i[1]) * i[2];
            return output == 0 ? elements : sum(elements, dims);
          },
      .check_grad = false,
  };
}

BATON_OP_CASES {
  return {sum_case("last_dim", {6, 300}, {1}, false), sum_case("leading_dim_keepdim", {40, 70}, {0}, true),
          sum_case("all", {5, 9, 11}, {}, false), and_sum_case("leading_dim_sums", {40, 70}, {0}, 1),
          and_sum_case("leading_dim_elements", {40, 70}, {0}, 0), and_sum_case("last_dims_sums", {4, 6, 50}, {1, 2}, 1)};
}

// Bit for bit, NaN matching NaN.
::testing::AssertionResult same_bits(const Tensor& actual, const Tensor& expected) {
  if (actual.shape() != expected.shape()) return ::testing::AssertionFailure() << "shapes differ";
  std::vector<double> a = actual.to_vector<double>(), e = expected.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) {
    const bool nans = std::isnan(a[i]) && std::isnan(e[i]);
    if (!nans && std::bit_cast<uint64_t>(a[i]) != std::bit_cast<uint64_t>(e[i]))
      return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs " << e[i];
  }
  return ::testing::AssertionSuccess();
}

// The fused sum against the fused elements summed by `sum`: the same bits.
void expect_sum_of_elements(const Shape& shape, const std::vector<int64_t>& dims, DType t) {
  const Tensor x = uniform(shape, -2, 2, 7).to(t), y = uniform(shape, -2, 2, 8).to(t);
  const Tensor bias = uniform({shape.back()}, -1, 1, 9).to(t);
  const char* program = "r0=mul(in0,in1); r1=add(r0,in2); r2=tanh(r1); r3=relu_backward(in0,r2)";
  const Inputs in{x, y, bias};
  for (bool keepdim : {false, true})
    EXPECT_TRUE(same_bits(fused_sum(program, in, dims, keepdim), sum(fused(program, in), dims, keepdim)))
        << shape << " dims " << dims.size() << " keepdim " << keepdim << " " << t;
}

TEST(FusedElementwiseSum, ShortAndLongRowsSumAsSumDoes) {
  for (DType t : {f32, f64}) {
    expect_sum_of_elements({300, 1000}, {1}, t);     // rows shorter than a block: several per evaluation
    expect_sum_of_elements({7, 5003}, {1}, t);       // rows of several blocks and a tail
    expect_sum_of_elements({30, 20, 7}, {1, 2}, t);  // the last two dims
  }
}

TEST(FusedElementwiseSum, ColumnsSumAsSumDoes) {
  for (DType t : {f32, f64}) {
    expect_sum_of_elements({4000, 300}, {0}, t);     // a bias gradient: over the batch, threads split the rows
    expect_sum_of_elements({64, 2500}, {0}, t);      // several column chunks
    expect_sum_of_elements({6, 500, 40}, {1}, t);    // a run in the middle
    expect_sum_of_elements({9, 13, 77}, {0, 1}, t);  // the leading two dims
  }
}

// Dims in several runs (a [N, C, H, W] summed over N, H and W): the innermost run summed
// into partial sums, those summed over the rest, as sum does.
TEST(FusedElementwiseSum, DimsInSeveralRunsSumAsSumDoes) {
  for (DType t : {f32, f64}) {
    expect_sum_of_elements({9, 13, 77}, {0, 2}, t);
    expect_sum_of_elements({64, 128, 8, 8}, {0, 2, 3}, t);  // rows of 64, over threads
    expect_sum_of_elements({5, 300, 3, 70}, {1, 3}, t);     // the partial sums summed as columns
    expect_sum_of_elements({6, 5, 4, 3, 20}, {0, 2, 4}, t);  // three runs
  }
}

TEST(FusedElementwiseSum, EverythingSumsAsSumDoes) {
  for (DType t : {f32, f64}) {
    expect_sum_of_elements({3000, 700}, {}, t);  // over 2 * kParallelGrain: split over threads
    expect_sum_of_elements({13, 17}, {0, 1}, t);
  }
}

// A scalar operand and a column broadcast into the elements; an input of one element only.
TEST(FusedElementwiseSum, BroadcastOperands) {
  const Tensor x = uniform({50, 64}, -2, 2, 1).to(f32), col = uniform({50, 1}, -1, 1, 2).to(f32);
  const Tensor s = scalar_tensor(1.5f);
  const char* program = "r0=mul(in0,in1); r1=sub(r0,in2); r2=exp(r1)";
  for (int64_t d : {0, 1})
    EXPECT_TRUE(same_bits(fused_sum(program, {x, s, col}, {d}, false), sum(fused(program, {x, s, col}), {d})));
}

// Anomaly mode runs each instruction through its op (which reports a NaN it made), then
// sum's own kernel: the same bits as without it.
TEST(FusedElementwiseSum, AnomalyModeReportsTheOpThatMadeTheValue) {
  const DetectAnomalyGuard on;
  EXPECT_THROWS_WITH(RuntimeError, fused_sum("r0=log(in0); r1=mul(r0,in0)", {tensor({1.0f, -1.0f})}, {0}, false),
                     "[log] anomaly detected: output 0 (f32[2]) holds NaN at flat index 1");
  const Tensor x = uniform({300, 200}, -2, 2, 1).to(f32), b = uniform({200}, -1, 1, 2).to(f32);
  const char* program = "r0=add(in0,in1); r1=tanh(r0)";
  const Tensor checked = fused_sum(program, {x, b}, {0}, false);
  detect_anomaly(false);
  EXPECT_TRUE(same_bits(checked, fused_sum(program, {x, b}, {0}, false)));
}

TEST(FusedElementwiseSum, ErrorsNameTheOpAndTheLine) {
  const Tensor x = zeros({3, 4, 5});
  const int line = __LINE__ + 1;
  EXPECT_THROWS_WITH(ValueError, fused_sum("r0=neg(in0)", {x}, {2, 2}, false), "[fused_elementwise_sum]",
                     "lists a dim twice", "fused_elementwise_sum_test.cpp:" + std::to_string(line));
  EXPECT_THROWS_WITH(IndexError, fused_sum("r0=neg(in0)", {x}, {3}, false), "[fused_elementwise_sum]");
  EXPECT_THROWS_WITH(ValueError, fused_sum("r0=add(in0,in1)", {x}, {0}, false), "[fused_elementwise_sum]",
                     "reads 2 input(s)");
}

// fused_elementwise_and_sum: its elements are fused_elementwise's and its sum is `sum`'s of
// them, bit for bit, on every path (rows, columns, a middle run, everything; dims in
// several runs as the two kernels one after the other).
TEST(FusedElementwiseAndSum, ElementsAndSumsAsTheTwoKernelsGiveThem) {
  const char* program = "r0=mul(in0,in1); r1=add(r0,in2); r2=tanh(r1); r3=relu_backward(in0,r2)";
  const std::pair<Shape, std::vector<int64_t>> cases[] = {
      {{300, 1000}, {1}}, {{7, 5003}, {1}}, {{4000, 300}, {0}}, {{64, 2500}, {0}},
      {{6, 500, 40}, {1}}, {{9, 13, 77}, {0, 1}}, {{3000, 700}, {0, 1}}, {{13, 17}, {0, 1}}, {{8, 16, 12, 12}, {0, 2, 3}}};
  for (DType t : {f32, f64})
    for (const auto& [shape, dims] : cases) {
      const Inputs in{uniform(shape, -2, 2, 7).to(t), uniform(shape, -2, 2, 8).to(t),
                      uniform({shape.back()}, -1, 1, 9).to(t)};
      const Tensor elements = fused(program, in);
      for (bool keepdim : {false, true}) {
        const std::vector<Tensor> both = and_sum(program, in, dims, keepdim);
        EXPECT_TRUE(same_bits(both.at(0), elements)) << shape << " " << t;
        EXPECT_TRUE(same_bits(both.at(1), sum(elements, dims, keepdim))) << shape << " keepdim " << keepdim << " " << t;
      }
    }
}

TEST(FusedElementwiseAndSum, ErrorsNameTheOpAndTheLine) {
  const Tensor x = zeros({3, 4, 5});
  const int line = __LINE__ + 1;
  EXPECT_THROWS_WITH(ValueError, and_sum("r0=neg(in0)", {x}, {0, 0}, false), "[fused_elementwise_and_sum]",
                     "lists a dim twice", "fused_elementwise_sum_test.cpp:" + std::to_string(line));
  EXPECT_THROWS_WITH(ValueError, and_sum("r0=add(in0,in1)", {x}, {0}, false), "[fused_elementwise_and_sum]",
                     "reads 2 input(s)");
  EXPECT_THROWS_WITH(ValueError, and_sum("r0=nope(in0)", {x}, {0}, false), "[fused_elementwise_and_sum]",
                     "bad program");
}

// A sum over a dim of no elements is zeros, kept elements or not (a batch of none).
TEST(FusedElementwiseAndSum, AnEmptySummedDimGivesZeros) {
  const Tensor none = zeros({0, 5});
  EXPECT_TRUE(same_bits(fused_sum("r0=neg(in0)", {none}, {0}, false), zeros({5})));
  const std::vector<Tensor> both = and_sum("r0=neg(in0)", {none}, {0}, false);
  EXPECT_EQ(both.at(0).shape(), (Shape{0, 5}));
  EXPECT_TRUE(same_bits(both.at(1), zeros({5})));
}

// Anomaly mode: each instruction through its op, then sum's kernel; the same bits.
TEST(FusedElementwiseAndSum, AnomalyModeReportsTheOpThatMadeTheValue) {
  const DetectAnomalyGuard on;
  EXPECT_THROWS_WITH(RuntimeError, and_sum("r0=log(in0); r1=mul(r0,in0)", {tensor({1.0f, -1.0f})}, {0}, false),
                     "[log] anomaly detected: output 0 (f32[2]) holds NaN at flat index 1");
  const Tensor x = uniform({300, 200}, -2, 2, 1).to(f32), b = uniform({200}, -1, 1, 2).to(f32);
  const char* program = "r0=add(in0,in1); r1=tanh(r0)";
  const std::vector<Tensor> checked = and_sum(program, {x, b}, {0}, false);
  detect_anomaly(false);
  const std::vector<Tensor> fast = and_sum(program, {x, b}, {0}, false);
  EXPECT_TRUE(same_bits(checked.at(0), fast.at(0)));
  EXPECT_TRUE(same_bits(checked.at(1), fast.at(1)));
}

}  // namespace
}  // namespace baton::testing
