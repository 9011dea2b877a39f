// Constant folding: nodes on fixed inputs are computed by their kernels while planning and
// become constants (inputs %k0, %k1... here); what is big, fetched, written, symbolic or
// random is left to run.
#include "passes/pass_testing.h"

namespace baton::passes::testing {
namespace {

Tensor f32_values(std::vector<float> v) { return tensor(v, {int64_t(v.size())}); }

TEST(PassConstantFold, FoldsAChainThroughTheRealKernels) {
  PassCase c(
      "graph @g(%x: f32[3], %a: f32[3], %b: f32[3]) {\n"
      "  %0 = mul(%a, %b) : f32[3]   # m.cpp:1\n"
      "  %1 = exp(%0) : f32[3]       # m.cpp:2\n"
      "  %2 = add(%x, %1) : f32[3]   # m.cpp:3\n"
      "  return %2\n"
      "}\n",
      {{"a", f32_values({1, 2, 3})}, {"b", f32_values({0.5f, -1, 0.25f})}});
  Effect e = c.run_pass("constant_fold");
  EXPECT_EQ(graph::to_text(c.g),
            "graph @g(%x: f32[3], %a: f32[3], %b: f32[3], %k0: f32[3], %k1: f32[3]) {\n"
            "  %0 = add(%x, %k1) : f32[3]   # m.cpp:3\n"
            "  return %0\n"
            "}\n");
  EXPECT_EQ(details(e),
            "folded %0 = mul(%a, %b) (m.cpp:1) into a constant f32[3]\n"
            "folded %1 = exp(%k0) (m.cpp:2) into a constant f32[3]\n");
  EXPECT_EQ(c.value(4).to_vector<float>(), exp(f32_values({0.5f, -2, 0.75f})).to_vector<float>());
  c.expect_same_values();
}

TEST(PassConstantFold, RespectsTheSizeLimit) {
  // f32[2] takes 8 bytes, at the limit: folded. f32[3] takes 12: left to run.
  PassCase c(
      "graph @g(%x: f32[3], %a: f32[3], %b: f32[2]) {\n"
      "  %0 = exp(%a) : f32[3]\n"
      "  %1 = exp(%b) : f32[2]\n"
      "  %2 = mul(%x, %0) : f32[3]\n"
      "  %3 = sum(%1) {dims=[], keepdim=0} : f32[]\n"
      "  %4 = mul(%2, %3) : f32[3]\n"
      "  return %4\n"
      "}\n",
      {{"a", f32_values({1, 2, 3})}, {"b", f32_values({-1, 1})}});
  c.ctx.fold_limit_bytes = 8;
  c.run_pass("constant_fold");
  EXPECT_EQ(graph::to_text(c.g),
            "graph @g(%x: f32[3], %a: f32[3], %b: f32[2], %k0: f32[2], %k1: f32[]) {\n"
            "  %0 = exp(%a) : f32[3]\n"
            "  %1 = mul(%x, %0) : f32[3]\n"
            "  %2 = mul(%1, %k1) : f32[3]\n"
            "  return %2\n"
            "}\n");
  c.expect_same_values();
}

TEST(PassConstantFold, LeavesFetchedWrittenSymbolicAndRandomResults) {
  // %0 is handed back (the caller could write into a constant); %c is written by the
  // assign, so it is not constant; %s has a symbolic shape; dropout draws anew each run.
  const std::string text =
      "graph @g(%a: f32[3], %c: f32[3], %s: f32[n], %x: f32[3]) {\n"
      "  %0 = exp(%a) : f32[3]\n"
      "  %1 = neg(%c) : f32[3]\n"
      "  %2 = assign(%c, %x) : f32[3]\n"
      "  %3 = exp(%s) : f32[n]\n"
      "  %4 = sum(%3) {dims=[], keepdim=0} : f32[]\n"
      "  %5, %6 = dropout(%a) {p=0.5} : f32[3], f32[3]\n"
      "  %7 = add(%1, %5) : f32[3]\n"
      "  return %0, %7, %4\n"
      "}\n";
  PassCase c(text, {{"a", f32_values({1, 2, 3})}, {"c", f32_values({4, 5, 6})}, {"s", f32_values({1, 1, 1})}});
  Effect e = c.run_pass("constant_fold");
  EXPECT_EQ(graph::to_text(c.g), text);
  EXPECT_TRUE(e.details.empty());
}

TEST(PassConstantFold, FoldsEveryResultOfAMultiOutputOp) {
  PassCase c(
      "graph @g(%x: f32[1,1,2,2], %a: f32[1,1,4,4]) {\n"
      "  %0, %1 = max_pool2d(%a) {kernel=[2,2], stride=[2,2], padding=[0,0]} : f32[1,1,2,2], i64[1,1,2,2]\n"
      "  %2 = add(%x, %0) : f32[1,1,2,2]\n"
      "  %3 = cast(%1) {dtype=f32} : f32[1,1,2,2]\n"
      "  %4 = mul(%2, %3) : f32[1,1,2,2]\n"
      "  return %4\n"
      "}\n",
      {{"a", reshape(arange(0, 16, 1, f32), {1, 1, 4, 4})}});
  c.run_pass("constant_fold");
  EXPECT_EQ(graph::to_text(c.g),
            "graph @g(%x: f32[1,1,2,2], %a: f32[1,1,4,4], %k0: f32[1,1,2,2], %k1: i64[1,1,2,2], %k2: f32[1,1,2,2]) {\n"
            "  %0 = add(%x, %k0) : f32[1,1,2,2]\n"
            "  %1 = mul(%0, %k2) : f32[1,1,2,2]\n"
            "  return %1\n"
            "}\n");
  c.expect_same_values();
}

TEST(PassConstantFold, AKernelErrorNamesThePassAndTheNode) {
  // Index 5 into 3 rows: the error a run would raise, raised while planning instead.
  PassCase c(
      "graph @g(%x: f32[1,2], %a: f32[3,2], %i: i64[1]) {\n"
      "  %0 = index_select(%a, %i) {dim=0} : f32[1,2]   # model.cpp:7\n"
      "  %1 = add(%x, %0) : f32[1,2]\n"
      "  return %1\n"
      "}\n",
      {{"a", zeros({3, 2})}, {"i", tensor(std::vector<int64_t>{5}, {1})}});
  EXPECT_THROWS_WITH(GraphError, c.optimize(Level::O1), "optimizer pass 'constant_fold'",
                     "node 'index_select' built at model.cpp:7", "index");
}

TEST(PassConstantFold, DoesNothingWithoutAWayToAddConstants) {
  const std::string text =
      "graph @g(%x: f32[3], %a: f32[3]) {\n"
      "  %0 = exp(%a) : f32[3]\n"
      "  %1 = add(%x, %0) : f32[3]\n"
      "  return %1\n"
      "}\n";
  PassCase c(text, {{"a", f32_values({1, 2, 3})}});
  c.ctx.inputs.add_constant = nullptr;
  c.run_pass("constant_fold");
  EXPECT_EQ(graph::to_text(c.g), text);
}

}  // namespace
}  // namespace baton::passes::testing
