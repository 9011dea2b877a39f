// fused_elementwise (made by the elementwise-fusion pass): harness cases against the
// unfused public ops, every instruction against its registry op bit for bit, the input
// layouts the kernel reads (flat, one element, bias row, column, transposed), inputs of
// other dtypes read converted, writing over an input, and errors naming the op.
#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "dispatch/registry.h"
#include "harness/heap_count.h"
#include "harness/op_harness.h"
#include "kernels/cpu/ewise_program.h"
#include "kernels/cpu/fused_elementwise.h"
#include "kernels/cpu/step_scratch.h"

namespace baton::testing {
namespace {

Tensor fused(const std::string& program, const Inputs& in, SourceLoc loc = SourceLoc::current()) {
  return ops::call_many(*ops::find_op("fused_elementwise"), in, {{"program", program}}, loc)[0];
}

// The same, computing in `type` where the first input is of another dtype.
Tensor fused_in(DType type, const std::string& program, const Inputs& in, SourceLoc loc = SourceLoc::current()) {
  return ops::call_many(*ops::find_op("fused_elementwise"), in, {{"program", program}, {"dtype", type}}, loc)[0];
}

// y = tanh(x * a + b) * c - x with a scalar a, a bias row b and a column c: every kind of
// operand, 5 instructions, several 4 KiB blocks.
const char* kChain = "r0=mul(in0,in1); r1=add(r0,in2); r2=tanh(r1); r3=mul(r2,in3); r4=sub(r3,in0)";

OpCase chain_case() {
  return OpCase{
      .name = "fused.fused_elementwise/chain_broadcast",
      .make_inputs = [] { return Inputs{uniform({6, 700}, -2, 2, 1), uniform({}, 0.5, 1.5, 2), uniform({700}, -1, 1, 3), uniform({6, 1}, -1, 1, 4)}; },
      .fn = [](const Inputs& i) { return fused(kChain, i); },
      .reference = [](const Inputs& i) { return tanh(i[0] * i[1] + i[2]) * i[3] - i[0]; },
      .check_grad = false,
  };
}

// Ops with parameters, a shared register (r0 read twice) and pow by a one-element input.
OpCase params_case() {
  const char* program = "r0=leaky_relu[0.1](in0); r1=elu[1.5](r0); r2=clamp[-0.5,1.25](r1); r3=mul(r2,r0); "
                        "r4=pow(r3,in1); r5=maximum(r4,r0)";
  return OpCase{
      .name = "fused.fused_elementwise/params",
      .make_inputs = [] { return Inputs{uniform({3, 5}, -2, 2, 5), scalar_tensor(3.0)}; },
      .fn = [=](const Inputs& i) { return fused(program, i); },
      .reference =
          [](const Inputs& i) {
            Tensor r0 = leaky_relu(i[0], 0.1);
            return maximum(pow(clamp(elu(r0, 1.5), -0.5, 1.25) * r0, i[1]), r0);
          },
      .check_grad = false,
  };
}

// A leaky ReLU written with a comparison and where, a bool mask (read as 0 and 1) and a
// bf16 bias read converted, as the pass fuses them: where(x > 0, x, x * 0.1) * mask + b.
OpCase masks_case() {
  const char* program = "r0=gt(in0,in1); r1=mul(in0,in2); r2=where(r0,in0,r1); r3=mul(r2,in3); r4=add(r3,in4)";
  return OpCase{
      .name = "fused.fused_elementwise/masks",
      .make_inputs =
          [] {
            return Inputs{uniform({5, 900}, -2, 2, 6), scalar_tensor(0.0), scalar_tensor(0.1),
                          uniform({5, 900}, -1, 1, 7) > 0.0, uniform({900}, -1, 1, 8).to(DType::bf16)};
          },
      .fn = [=](const Inputs& i) { return fused(program, i); },
      .reference =
          [](const Inputs& i) {
            return where(i[0] > i[1], i[0], i[0] * i[2]) * cast(i[3], i[0].dtype()) + cast(i[4], i[0].dtype());
          },
      .check_grad = false,
  };
}

BATON_OP_CASES { return {chain_case(), params_case(), masks_case()}; }

// --- every instruction computes its op's bits -------------------------------------------

template <class T>
Tensor special_values(int64_t random_count, uint64_t seed) {
  const T inf = std::numeric_limits<T>::infinity(), nan = std::numeric_limits<T>::quiet_NaN();
  std::vector<T> v = {T(0), -T(0), T(1), T(-1), T(0.5), T(2), T(-2.5), T(1e-3), T(88), T(89), T(-87.5), T(-100),
                      T(20), T(1e30), T(-1e30), inf, -inf, nan, std::numeric_limits<T>::denorm_min(), T(0.625),
                      T(-0.624), T(3.7), T(4), T(-4.5)};
  for (double x : uniform({random_count}, -10, 10, seed).to_vector<double>()) v.push_back(T(x));
  if (seed % 2) std::reverse(v.begin(), v.end());  // pairs each special value with others
  return tensor(v, {int64_t(v.size())});
}

// Bit for bit, except that any NaN matches any NaN.
::testing::AssertionResult same_bits(const Tensor& actual, const Tensor& expected) {
  std::vector<double> a = actual.to_vector<double>(), e = expected.to_vector<double>();
  if (a.size() != e.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (size_t i = 0; i < a.size(); ++i) {
    const bool nans = std::isnan(a[i]) && std::isnan(e[i]);
    if (!nans && std::bit_cast<uint64_t>(a[i]) != std::bit_cast<uint64_t>(e[i]))
      return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs " << e[i];
  }
  return ::testing::AssertionSuccess();
}

// Parameters for the ops that take some, as node attributes and as program text.
ops::Attrs attrs_of(const kernels::EwOpInfo& info) {
  static const std::map<std::string, ops::Attrs> attrs = {
      {"leaky_relu", {{"negative_slope", 0.1}}}, {"elu", {{"alpha", 1.3}}}, {"clamp", {{"min", -0.5}, {"max", 2.0}}}};
  auto it = attrs.find(info.name);
  return it == attrs.end() ? ops::Attrs{} : it->second;
}

std::string one_instruction(const kernels::EwOpInfo& info) {
  kernels::EwInstr ins{.op = info.op, .args = {kernels::EwOperand{true, 0}, kernels::EwOperand{true, 1}}};
  ops::Attrs a = attrs_of(info);
  for (int p = 0; p < info.num_params(); ++p) ins.params[size_t(p)] = a.f(info.params[size_t(p)]);
  return kernels::to_string(kernels::EwProgram{{ins}});
}

template <class T>
void expect_every_instruction_matches_its_op() {
  const Tensor a = special_values<T>(3000, 7), b = special_values<T>(3000, 9);
  for (int i = 0; i <= int(kernels::EwOp::silu_backward); ++i) {  // every op before the comparisons
    const kernels::EwOpInfo& info = kernels::ew_op_info(kernels::EwOp(i));
    const ops::OpDef& op = *ops::find_op(info.name);
    std::vector<Tensor> exponents = {scalar_tensor(T(2)), scalar_tensor(T(0.5)), scalar_tensor(T(-1.5))};
    std::vector<Inputs> cases = info.arity == 1 ? std::vector<Inputs>{{a}}
                                : info.op == kernels::EwOp::pow
                                    ? std::vector<Inputs>{{a, exponents[0]}, {a, exponents[1]}, {a, exponents[2]}}
                                    : std::vector<Inputs>{{a, b}, {b, a}};
    for (const Inputs& in : cases) {
      Tensor expected = ops::call_many(op, in, attrs_of(info), SourceLoc::current())[0];
      EXPECT_TRUE(same_bits(fused(one_instruction(info), in), expected)) << info.name << " " << dtype_v<T>;
    }
  }
}

TEST(FusedElementwise, EveryInstructionComputesItsOpsBitsF32) { expect_every_instruction_matches_its_op<float>(); }
TEST(FusedElementwise, EveryInstructionComputesItsOpsBitsF64) { expect_every_instruction_matches_its_op<double>(); }

// A comparison gives its op's bool as 1 or 0; where picks as its op does, its condition a
// register, a bool input, or any value (nonzero is true, as a cast to bool says).
template <class T>
void expect_comparisons_and_where_match_their_ops() {
  const Tensor a = special_values<T>(3000, 7), b = special_values<T>(3000, 9);
  const DType t = dtype_v<T>;
  for (int i = int(kernels::EwOp::eq); i <= int(kernels::EwOp::ge); ++i) {
    const kernels::EwOpInfo& info = kernels::ew_op_info(kernels::EwOp(i));
    const ops::OpDef& op = *ops::find_op(info.name);
    for (const Inputs& in : {Inputs{a, b}, Inputs{b, a}, Inputs{a, a}}) {
      const Tensor expected = cast(ops::call_many(op, in, {}, SourceLoc::current())[0], t);
      EXPECT_TRUE(same_bits(fused(one_instruction(info), in), expected)) << info.name << " " << t;
      const std::string picked = one_instruction(info) + "; r1=where(r0,in0,in1)";
      EXPECT_TRUE(same_bits(fused(picked, in), where(cast(expected, b8), in[0], in[1]))) << info.name << " " << t;
    }
  }
  const Tensor cond = a > b;
  EXPECT_TRUE(same_bits(fused_in(t, "r0=where(in0,in1,in2)", {cond, a, b}), where(cond, a, b)));
  EXPECT_TRUE(same_bits(fused("r0=where(in0,in1,in2)", {a, b, a}), where(cast(a, b8), b, a)));  // NaN is true
}

TEST(FusedElementwise, ComparisonsAndWhereComputeTheirOpsBitsF32) {
  expect_comparisons_and_where_match_their_ops<float>();
}
TEST(FusedElementwise, ComparisonsAndWhereComputeTheirOpsBitsF64) {
  expect_comparisons_and_where_match_their_ops<double>();
}

// Inputs of every other dtype are read converted to the program's, as cast converts them:
// flat, as one element, as a broadcast row, transposed; first (the dtype attribute then
// names the program's type) or after an input of that type.
TEST(FusedElementwise, InputsOfOtherDtypesAreReadAsCastConvertsThem) {
  const Tensor x = uniform({40, 300}, -300, 300, 1), row = uniform({300}, -300, 300, 3);
  const Tensor xt = uniform({300, 40}, -300, 300, 4);
  for (DType from : {b8, DType::u8, DType::i8, DType::i16, DType::u16, i32, DType::u32, i64, DType::u64, DType::f16,
                     DType::bf16, f32, f64}) {
    for (DType t : {f32, f64}) {
      const Tensor y = uniform({40, 300}, -1, 1, 2).to(t);
      const Tensor source = cast(x, from);
      for (const Tensor& in : {source, cast(scalar_tensor(-7.5), from), cast(row, from), cast(xt, from).t()}) {
        const Tensor expected = cast(in, t) * y;
        EXPECT_TRUE(same_bits(fused("r0=mul(in1,in0)", {y, in}), expected)) << from << " to " << t;
        EXPECT_TRUE(same_bits(fused_in(t, "r0=mul(in0,in1)", {in, y}), expected)) << from << " to " << t;
      }
    }
  }
}

// --- layouts, threads, aliasing -------------------------------------------------------------

// Over 64K elements (several threads when there are), a transposed input and a column.
TEST(FusedElementwise, StridedAndColumnInputsOnThreads) {
  Tensor x = uniform({300, 400}, -2, 2, 1).to(f32), xt = uniform({400, 300}, -2, 2, 2).to(f32).transpose(0, 1);
  Tensor col = uniform({300, 1}, -1, 1, 3).to(f32);
  Tensor y = fused("r0=add(in0,in1); r1=sigmoid(r0); r2=mul(r1,in2)", {x, xt, col});
  EXPECT_TRUE(same_bits(y, sigmoid(x + xt) * col));
}

TEST(FusedElementwise, WritesOverAnInputOfItsShape) {
  Tensor x = uniform({5, 1000}, -2, 2, 1).to(f32), b = uniform({1000}, -1, 1, 2).to(f32);
  Tensor expected = exp(x * b) - x;
  auto parsed = kernels::parse_program("r0=mul(in0,in1); r1=exp(r0); r2=sub(r1,in0)");
  ASSERT_EQ(parsed.error, "");
  std::vector<Tensor> in{x, b};
  kernels::fused_elementwise(parsed.program, f32, in, x);  // out is x: the plan's in-place case
  EXPECT_TRUE(same_bits(x, expected));
}

// --- prepared plans (a plan step's state) ---------------------------------------------------

// Bytes lent to the kernels run on this thread during the object's life, as a plan's
// executor lends a step its scratch.
class LentScratch {
 public:
  explicit LentScratch(size_t bytes)
      : buffer_(empty({int64_t(bytes / sizeof(float)) + 1}, f32)), scope_(buffer_.raw_data(), bytes) {}

 private:
  Tensor buffer_;
  kernels::StepScratch scope_;
};

// The kernel run with a plan made from the tensors' metadata, its scratch blocks lent.
void run_planned(const kernels::EwProgram& program, const std::vector<Tensor>& in, const Tensor& out,
                 const kernels::FusedElementwisePlan* plan, DType type = f32) {
  const LentScratch lent(kernels::plan_scratch_bytes(*plan));
  kernels::fused_elementwise(program, type, in, out, plan);
}

TEST(FusedElementwise, PlannedRunsComputeTheSameBits) {
  auto parsed = kernels::parse_program("r0=add(in0,in1); r1=sigmoid(r0); r2=mul(r1,in2); r3=sub(r2,in3)");
  ASSERT_EQ(parsed.error, "");
  Tensor x = uniform({300, 400}, -2, 2, 1).to(f32), xt = uniform({400, 300}, -2, 2, 2).to(f32).transpose(0, 1);
  Tensor col = uniform({300, 1}, -1, 1, 3).to(f32), s = scalar_tensor(0.5f);
  const Tensor expected = sigmoid(x + xt) * col - s;
  const std::vector<Tensor> in{x, xt, col, s};
  // Contiguous, and column-major (the memory order the kernel then runs in).
  for (Tensor out : {empty({300, 400}, f32), empty({400, 300}, f32).transpose(0, 1)}) {
    auto plan = kernels::plan_fused_elementwise(parsed.program, f32, in, out);
    run_planned(parsed.program, in, out, plan.get());
    EXPECT_TRUE(same_bits(out, expected)) << out.strides();
  }
  // Over an input of its shape (the plan's in-place case): the plan's other schedule.
  Tensor y = x.clone();
  const std::vector<Tensor> over{y, xt, col, s};
  auto plan = kernels::plan_fused_elementwise(parsed.program, f32, over, y);
  run_planned(parsed.program, over, y, plan.get());
  EXPECT_TRUE(same_bits(y, expected));
}

// A plan made for other strides is not used: the run computes the right values anyway.
TEST(FusedElementwise, APlanForOtherTensorsIsLeftUnused) {
  auto parsed = kernels::parse_program("r0=mul(in0,in1); r1=exp(r0)");
  ASSERT_EQ(parsed.error, "");
  Tensor a = uniform({64, 10}, -1, 1, 1).to(f32), b = uniform({64, 10}, -1, 1, 2).to(f32);
  auto plan = kernels::plan_fused_elementwise(parsed.program, f32, std::vector<Tensor>{a, b}, empty({64, 10}, f32));
  Tensor bt = uniform({10, 64}, -1, 1, 3).to(f32).transpose(0, 1), out = empty({64, 10}, f32);
  run_planned(parsed.program, {a, bt}, out, plan.get());
  EXPECT_TRUE(same_bits(out, exp(a * bt)));
}

// A plan makes the schedule and the input layouts once, and its scratch blocks are lent:
// a run then allocates nothing, where one without a plan does.
TEST(FusedElementwise, APlannedRunAllocatesNothing) {
  auto parsed = kernels::parse_program("r0=sub(in0,in1); r1=mul(r0,in2); r2=add(r1,in3)");
  ASSERT_EQ(parsed.error, "");
  const std::vector<Tensor> in{uniform({64, 10}, -1, 1, 1).to(f32), uniform({10, 64}, -1, 1, 2).to(f32).transpose(0, 1),
                               scalar_tensor(2.0f), uniform({10}, -1, 1, 3).to(f32)};
  Tensor out = empty({10, 64}, f32).transpose(0, 1);
  auto plan = kernels::plan_fused_elementwise(parsed.program, f32, in, out);
  const LentScratch lent(kernels::plan_scratch_bytes(*plan));
  auto planned = [&] { kernels::fused_elementwise(parsed.program, f32, in, out, plan.get()); };
  planned();  // warm: the first parallel region may start threads
  EXPECT_EQ(testing::heap_allocations_during(planned), 0u);
  EXPECT_GT(testing::heap_allocations_during([&] { kernels::fused_elementwise(parsed.program, f32, in, out); }), 0u);
  EXPECT_TRUE(same_bits(out, (in[0] - in[1]) * in[2] + in[3]));
}

// fused_elementwise_sum with its plan: the same bits as without, for sums over the last
// dim, the first, and all; a small one allocates nothing.
TEST(FusedElementwise, PlannedSumsComputeTheSameBits) {
  auto parsed = kernels::parse_program("r0=sub(in0,in1); r1=mul(r0,r0)");
  ASSERT_EQ(parsed.error, "");
  const std::vector<Tensor> in{uniform({300, 400}, -2, 2, 1).to(f32), uniform({400}, -1, 1, 2).to(f32)};
  const Shape shape{300, 400};
  const std::pair<std::vector<int64_t>, Shape> sums[] = {{{1}, {300}}, {{0}, {400}}, {{0, 1}, {}}};
  for (const auto& [dims, sum_shape] : sums) {
    Tensor expected = empty(sum_shape, f32), planned = empty(sum_shape, f32);
    kernels::fused_elementwise_sum(parsed.program, in, shape, dims, expected);
    auto plan = kernels::plan_fused_elementwise_sum(parsed.program, in, shape, planned);
    const LentScratch lent(kernels::plan_scratch_bytes(*plan));
    kernels::fused_elementwise_sum(parsed.program, in, shape, dims, planned, plan.get());
    EXPECT_TRUE(same_bits(planned, expected)) << dims.size();
  }
  const std::vector<Tensor> small{uniform({64, 10}, -2, 2, 3).to(f32), uniform({10}, -1, 1, 4).to(f32)};
  Tensor out = empty({10}, f32);
  auto plan = kernels::plan_fused_elementwise_sum(parsed.program, small, {64, 10}, out);
  const LentScratch lent(kernels::plan_scratch_bytes(*plan));
  const Shape small_shape{64, 10};
  const std::vector<int64_t> first_dim{0};
  auto planned = [&] { kernels::fused_elementwise_sum(parsed.program, small, small_shape, first_dim, out, plan.get()); };
  planned();
  EXPECT_EQ(testing::heap_allocations_during(planned), 0u);
}

// A result of another dtype than the program's (`to`): each element converted as cast
// converts it, to every dtype; contiguous, transposed, planned, and written over an input
// of its dtype (the plan's in-place case, which then reads that input converted).
TEST(FusedElementwise, ResultsOfOtherDtypesAreConvertedAsCastConvertsThem) {
  auto parsed = kernels::parse_program("r0=mul(in0,in1); r1=sub(r0,in1)");
  ASSERT_EQ(parsed.error, "");
  for (DType t : {f32, f64}) {
    const Tensor x = uniform({60, 300}, -300, 300, 1).to(t), y = uniform({300}, -2, 2, 2).to(t);
    for (DType to : {b8, DType::u8, DType::i8, DType::i16, DType::u16, i32, DType::u32, i64, DType::u64, DType::f16,
                     DType::bf16, f32, f64}) {
      const Tensor expected = cast(x * y - y, to);
      const Tensor made = ops::call_many(*ops::find_op("fused_elementwise"), Inputs{x, y},
                                         {{"program", kernels::to_string(parsed.program)}, {"to", to}},
                                         SourceLoc::current())[0];
      EXPECT_EQ(made.dtype(), to);
      EXPECT_TRUE(same_bits(made, expected)) << t << " to " << to;
      Tensor transposed = empty({300, 60}, to).t();
      auto plan = kernels::plan_fused_elementwise(parsed.program, t, std::vector<Tensor>{x, y}, transposed);
      run_planned(parsed.program, {x, y}, transposed, plan.get(), t);
      EXPECT_TRUE(same_bits(transposed, expected)) << t << " to " << to << ", planned";
      Tensor over = cast(x, to);  // read converted, written over
      const Tensor expected_over = cast(cast(over, t) * y - y, to);
      kernels::fused_elementwise(parsed.program, t, std::vector<Tensor>{over, y}, over);
      EXPECT_TRUE(same_bits(over, expected_over)) << t << " to " << to << ", over its input";
    }
  }
}

// A sum of a program reading a bool condition: the elements converted as they are summed,
// planned or not.
TEST(FusedElementwise, SumsOfProgramsWithConvertedInputs) {
  auto parsed = kernels::parse_program("r0=mul(in1,in2); r1=where(in0,r0,in1)");
  ASSERT_EQ(parsed.error, "");
  const Tensor a = uniform({300, 400}, -2, 2, 1).to(f32), b = uniform({400}, -1, 1, 2).to(f32);
  const Tensor cond = uniform({300, 400}, -1, 1, 3) > 0.0;
  const std::vector<Tensor> in{cond, a, b};
  const Tensor values = where(cond, a * b, a);
  for (const std::vector<int64_t>& dims : {std::vector<int64_t>{1}, {0}, {0, 1}}) {
    Tensor unplanned = empty(sum(values, dims).shape(), f32), planned = empty(sum(values, dims).shape(), f32);
    kernels::fused_elementwise_sum(parsed.program, in, {300, 400}, dims, unplanned);
    auto plan = kernels::plan_fused_elementwise_sum(parsed.program, in, {300, 400}, planned);
    const LentScratch lent(kernels::plan_scratch_bytes(*plan));
    kernels::fused_elementwise_sum(parsed.program, in, {300, 400}, dims, planned, plan.get());
    EXPECT_TRUE(same_bits(unplanned, sum(values, dims))) << dims.size();
    EXPECT_TRUE(same_bits(planned, sum(values, dims))) << dims.size();
  }
}

// fused_elementwise_and_sum in the layouts a plan gives its elements: column-major (a
// linear layer's gradient: the batch summed is rows of memory, the features columns),
// channels-last (a convolution's, summed over N, H and W), row-major over dims in two
// runs, and ones where the summed dims are no run of memory or the kept ones come out of
// order (two passes then); its elements written over an input; planned. The elements are
// fused_elementwise's, the sum `sum`'s of those very elements, bit for bit; and the same
// for max and min (relu's backward makes zeros of both signs, between which their fold's
// order decides).
Tensor reduced_as_the_op_does(kernels::EwReduce reduce, const Tensor& x, const std::vector<int64_t>& dims) {
  return reduce == kernels::EwReduce::Max ? max(x, dims) : reduce == kernels::EwReduce::Min ? min(x, dims) : sum(x, dims);
}

void expect_kept_and_summed(const std::vector<Tensor>& in, const Tensor& elements, const std::vector<int64_t>& dims,
                            bool planned = false) {
  auto parsed = kernels::parse_program("r0=mul(in0,in1); r1=tanh(r0); r2=relu_backward(in0,r1)");
  ASSERT_EQ(parsed.error, "");
  const Tensor expected = fused(kernels::to_string(parsed.program), {in[0].contiguous(), in[1].contiguous()});
  for (kernels::EwReduce reduce : {kernels::EwReduce::Sum, kernels::EwReduce::Max, kernels::EwReduce::Min}) {
    Tensor sums = empty(sum(expected, dims).shape(), elements.dtype());
    if (planned) {
      auto plan = kernels::plan_fused_elementwise_and_sum(parsed.program, in, dims, elements);
      ASSERT_TRUE(plan);
      const LentScratch lent(kernels::plan_scratch_bytes(*plan));
      kernels::fused_elementwise_and_sum(parsed.program, in, dims, elements, sums, plan.get(), reduce);
    } else {
      kernels::fused_elementwise_and_sum(parsed.program, in, dims, elements, sums, nullptr, reduce);
    }
    EXPECT_TRUE(same_bits(elements, expected)) << elements.strides();
    EXPECT_TRUE(same_bits(sums, reduced_as_the_op_does(reduce, elements, dims)))
        << elements.strides() << " dims " << dims.size() << " reduce " << int(reduce);
  }
}

Tensor column_major(int64_t rows, int64_t cols, uint64_t seed) {
  return uniform({cols, rows}, -2, 2, seed).to(f32).transpose(0, 1);
}

TEST(FusedElementwise, ElementsKeptAndSummedInTheirLayout) {
  const std::vector<Tensor> cm{column_major(300, 200, 1), column_major(300, 200, 2)};
  for (std::vector<int64_t> dims : {std::vector<int64_t>{0}, {1}})
    for (bool planned : {false, true})
      expect_kept_and_summed(cm, empty({200, 300}, f32).transpose(0, 1), dims, planned);
  auto channels_last = [](uint64_t seed) { return uniform({8, 5, 5, 16}, -2, 2, seed).to(f32).permute({0, 3, 1, 2}); };
  const std::vector<Tensor> nhwc{channels_last(3), uniform({8, 16, 5, 5}, -2, 2, 4).to(f32)};
  for (bool planned : {false, true})
    expect_kept_and_summed(nhwc, empty({8, 5, 5, 16}, f32).permute({0, 3, 1, 2}), {0, 2, 3}, planned);
  const std::vector<Tensor> cube{uniform({4, 5, 6}, -2, 2, 5).to(f32), uniform({4, 5, 6}, -2, 2, 6).to(f32)};
  expect_kept_and_summed(cube, empty({5, 4, 6}, f32).permute({1, 0, 2}), {1, 2});  // dims 1, 2 apart in memory
  for (bool planned : {false, true})  // row-major, dims in two runs: the inner one summed first
    expect_kept_and_summed(cube, empty({4, 5, 6}, f32), {0, 2}, planned);
  expect_kept_and_summed(cube, empty({6, 5, 4}, f32).permute({2, 1, 0}), {0});     // kept dims 2 then 1 in memory
  const std::vector<Tensor> one{cube[0]};
  EXPECT_FALSE(kernels::plan_fused_elementwise_and_sum(kernels::parse_program("r0=neg(in0)").program, one, {0},
                                                       empty({6, 5, 4}, f32).permute({2, 1, 0})));
}

// Written over its first input, as a plan does when that input dies at the step.
TEST(FusedElementwise, ElementsKeptOverAnInput) {
  auto parsed = kernels::parse_program("r0=relu_backward(in0,in1)");
  ASSERT_EQ(parsed.error, "");
  const Tensor g = column_major(64, 512, 1), h = column_major(64, 512, 2);
  const Tensor expected = fused("r0=relu_backward(in0,in1)", {g, h});
  for (bool planned : {false, true}) {
    Tensor in_place = g.clone().transpose(0, 1).contiguous().transpose(0, 1);  // column-major, its own bytes
    const std::vector<Tensor> in{in_place, h};
    Tensor sums = empty({512}, f32);
    auto plan = kernels::plan_fused_elementwise_and_sum(parsed.program, in, {0}, in_place);
    const LentScratch lent(kernels::plan_scratch_bytes(*plan));
    kernels::fused_elementwise_and_sum(parsed.program, in, {0}, in_place, sums, planned ? plan.get() : nullptr);
    EXPECT_TRUE(same_bits(in_place, expected));
    EXPECT_TRUE(same_bits(sums, sum(in_place, {0})));
  }
}

// A planned run allocates nothing (a linear layer's bias gradient, as in a training step).
TEST(FusedElementwise, APlannedKeptSumAllocatesNothing) {
  auto parsed = kernels::parse_program("r0=relu_backward(in0,in1)");
  ASSERT_EQ(parsed.error, "");
  const std::vector<Tensor> in{column_major(64, 256, 1), column_major(64, 256, 2)};
  const Tensor elements = empty({256, 64}, f32).transpose(0, 1);
  Tensor sums = empty({256}, f32);
  const std::vector<int64_t> batch{0};
  auto plan = kernels::plan_fused_elementwise_and_sum(parsed.program, in, batch, elements);
  const LentScratch lent(kernels::plan_scratch_bytes(*plan));
  auto planned = [&] { kernels::fused_elementwise_and_sum(parsed.program, in, batch, elements, sums, plan.get()); };
  planned();
  EXPECT_EQ(testing::heap_allocations_during(planned), 0u);
  EXPECT_TRUE(same_bits(elements, fused("r0=relu_backward(in0,in1)", in)));
  EXPECT_TRUE(same_bits(sums, sum(elements, {0})));
}

TEST(FusedElementwise, ProgramTextReadsBackAsWritten) {
  const std::string text = "r0=clamp[-inf,0.1](in0); r1=elu[1e-07](r0); r2=pow(r1,in1); r3=add(r2,r2)";
  auto parsed = kernels::parse_program(text);
  ASSERT_EQ(parsed.error, "");
  EXPECT_EQ(kernels::to_string(parsed.program), text);
  EXPECT_EQ(parsed.program.num_inputs(), 2);
}

// Anomaly mode runs the instructions one by one through their ops: the report names the op,
// and an Inf that later instructions hide (exp(-exp(1000)) is 0) is still caught.
TEST(FusedElementwise, AnomalyModeReportsTheOpThatMadeTheValue) {
  const DetectAnomalyGuard on;
  const int line = __LINE__ + 1;
  EXPECT_THROWS_WITH(RuntimeError, fused("r0=log(in0); r1=mul(r0,in0)", {tensor({1.0f, -1.0f})}),
                     "[log] anomaly detected: output 0 (f32[2]) holds NaN at flat index 1",
                     "fused_elementwise_test.cpp:" + std::to_string(line));
  EXPECT_THROWS_WITH(RuntimeError, fused("r0=exp(in0); r1=neg(r0); r2=exp(r1)", {tensor({1.0, 1000.0})}),
                     "[exp] anomaly detected: output 0 (f64[2]) holds Inf at flat index 1");
  const Inputs in{uniform({6, 700}, -2, 2, 1).to(f32), scalar_tensor(0.5f), uniform({700}, -1, 1, 3).to(f32),
                  uniform({6, 1}, -1, 1, 4).to(f32)};
  Tensor checked = fused(kChain, in);
  // A bool input and a comparison's register, each cast to what its op reads.
  const char* masked = "r0=gt(in1,in2); r1=where(r0,in1,in2); r2=mul(r1,in0)";
  const Inputs mask_in{uniform({6, 700}, -1, 1, 5) > 0.0, in[0], in[2]};
  Tensor checked_mask = fused_in(f32, masked, mask_in);
  detect_anomaly(false);
  EXPECT_TRUE(same_bits(checked, fused(kChain, in)));
  EXPECT_TRUE(same_bits(checked_mask, fused_in(f32, masked, mask_in)));
  EXPECT_TRUE(same_bits(checked_mask, where(in[0] > in[2], in[0], in[2]) * cast(mask_in[0], f32)));
}

// --- errors -----------------------------------------------------------------------------------

TEST(FusedElementwise, BadProgramsAreErrorsNamingTheOp) {
  Tensor x = zeros({2, 3}), y = zeros({3});
  const int line = __LINE__ + 1;
  EXPECT_THROWS_WITH(ValueError, fused("r0=frobnicate(in0)", {x}), "[fused_elementwise]", "unknown op 'frobnicate'",
                     "fused_elementwise_test.cpp:" + std::to_string(line));
  EXPECT_THROWS_WITH(ValueError, fused("r0=add(in0)", {x}), "[fused_elementwise]", "add takes 2");
  EXPECT_THROWS_WITH(ValueError, fused("r0=exp(r1)", {x}), "reads r1 before it is defined");
  EXPECT_THROWS_WITH(ValueError, fused("r1=exp(in0)", {x}), "defines r1, not r0");
  EXPECT_THROWS_WITH(ValueError, fused("r0=clamp(in0)", {x}), "clamp needs 2 parameter(s)");
  EXPECT_THROWS_WITH(ValueError, fused("r0=exp(in0) r1=exp(r0)", {x}), "expected ';'");
  EXPECT_THROWS_WITH(ValueError, fused("", {x}), "no instruction");
  EXPECT_THROWS_WITH(ValueError, fused("r0=pow(in0,r0)", {x}), "before it is defined");
  EXPECT_THROWS_WITH(ValueError, fused("r0=exp(in0); r1=pow(in0,r0)", {x}), "exponent must be an input");
  EXPECT_THROWS_WITH(ValueError, fused("r0=add(in0,in1)", {x}), "reads 2 input(s) but the node has 1");
  EXPECT_THROWS_WITH(ShapeError, fused("r0=pow(in0,in1)", {x, y}), "exponent in1 must hold one element");
  EXPECT_THROWS_WITH(ShapeError, fused("r0=add(in0,in1)", {x, zeros({4})}), "[fused_elementwise]");
  EXPECT_THROWS_WITH(DTypeError, fused("r0=neg(in0)", {zeros({3}, i32)}), "[fused_elementwise]",
                     "computes in f32 or f64, not i32");
  EXPECT_THROWS_WITH(DTypeError, fused_in(b8, "r0=neg(in0)", {x}), "computes in f32 or f64, not bool");
  EXPECT_THROWS_WITH(DTypeError,
                     ops::call_many(*ops::find_op("fused_elementwise"), Inputs{x}, {{"program", "r0=neg(in0)"},
                                    {"to", DType::string}}, SourceLoc::current()),
                     "the result cannot hold strings");
  EXPECT_THROWS_WITH(DTypeError, fused("r0=add(in0,in1)", {x, tensor<std::string>({"a", "b", "c"})}),
                     "input 1 holds strings");
}

}  // namespace
}  // namespace baton::testing
