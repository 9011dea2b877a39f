// Common-subexpression elimination: same op, inputs and attributes are merged; nothing
// whose result could differ (effects, random ops, reads of written state) is.
#include <limits>

#include "passes/pass_testing.h"

namespace baton::passes::testing {
namespace {

TEST(PassCse, MergesSameOpInputsAndAttributesInOnePass) {
  // %1 merges into %0, so %3 then reads %0 like %2 and merges too; %4 differs in dims.
  PassCase c(
      "graph @g(%x: f32[2,3], %w: f32[3,3]) {\n"
      "  %0 = matmul(%x, %w) : f32[2,3]                    # m.cpp:1\n"
      "  %1 = matmul(%x, %w) : f32[2,3]                    # m.cpp:2\n"
      "  %2 = sum(%0) {dims=[1], keepdim=0} : f32[2]\n"
      "  %3 = sum(%1) {dims=[1], keepdim=0} : f32[2]\n"
      "  %4 = sum(%1) {dims=[0], keepdim=0} : f32[3]\n"
      "  %5 = add(%2, %3) : f32[2]\n"
      "  return %5, %4\n"
      "}\n");
  Effect e = c.run_pass("cse");
  EXPECT_EQ(graph::to_text(c.g),
            "graph @g(%x: f32[2,3], %w: f32[3,3]) {\n"
            "  %0 = matmul(%x, %w) : f32[2,3]   # m.cpp:1\n"
            "  %1 = sum(%0) {dims=[1], keepdim=0} : f32[2]\n"
            "  %2 = sum(%0) {dims=[0], keepdim=0} : f32[3]\n"
            "  %3 = add(%1, %1) : f32[2]\n"
            "  return %3, %2\n"
            "}\n");
  EXPECT_EQ(e.nodes_before, 6u);
  EXPECT_EQ(e.nodes_after, 4u);
  EXPECT_EQ(details(e),
            "merged %1 = matmul(%x, %w) (m.cpp:2) into %0 = matmul(%x, %w) (m.cpp:1)\n"
            "merged %3 = sum(%0) into %2 = sum(%0)\n");
  c.expect_same_values();
}

TEST(PassCse, DoesNotMergeAcrossAnAssignToASharedInput) {
  // Both exps read %v, but the assign between them writes it: they differ. Views of %v
  // and their readers are just as volatile.
  const std::string text =
      "graph @g(%v: f32[4], %x: f32[4]) {\n"
      "  %0 = exp(%v) : f32[4]\n"
      "  %1 = view(%v) {shape=[2,2]} : f32[2,2]\n"
      "  %2 = relu(%1) : f32[2,2]\n"
      "  %3 = assign(%v, %x) : f32[4]\n"
      "  %4 = exp(%v) : f32[4]\n"
      "  %5 = view(%v) {shape=[2,2]} : f32[2,2]\n"
      "  %6 = relu(%5) : f32[2,2]\n"
      "  %7 = sub(%4, %0) : f32[4]\n"
      "  %8 = sub(%6, %2) : f32[2,2]\n"
      "  return %7, %8\n"
      "}\n";
  PassCase c(text);
  Effect e = c.run_pass("cse");
  EXPECT_EQ(graph::to_text(c.g), text);
  EXPECT_TRUE(e.details.empty());
  c.expect_same_values();
}

TEST(PassCse, DoesNotMergeAWriteThroughAView) {
  // The assign writes %v through the view %0, so %v is written state all the same.
  const std::string text =
      "graph @g(%v: f32[4], %x: f32[2,2]) {\n"
      "  %0 = view(%v) {shape=[2,2]} : f32[2,2]\n"
      "  %1 = neg(%v) : f32[4]\n"
      "  %2 = assign(%0, %x) : f32[2,2]\n"
      "  %3 = neg(%v) : f32[4]\n"
      "  %4 = sub(%3, %1) : f32[4]\n"
      "  return %4\n"
      "}\n";
  PassCase c(text);
  c.run_pass("cse");
  EXPECT_EQ(graph::to_text(c.g), text);
  c.expect_same_values();
}

TEST(PassCse, NeverMergesRandomOpsOrEffects) {
  // Two dropouts draw two masks; two assigns are two writes. (No value check: the masks
  // depend on the generator's position, which is the point.)
  const std::string text =
      "graph @g(%x: f32[8], %v: f32[8]) {\n"
      "  %0, %1 = dropout(%x) {p=0.5} : f32[8], f32[8]\n"
      "  %2, %3 = dropout(%x) {p=0.5} : f32[8], f32[8]\n"
      "  %4 = add(%0, %2) : f32[8]\n"
      "  %5 = assign(%v, %x) : f32[8]\n"
      "  %6 = assign(%v, %x) : f32[8]\n"
      "  return %4, %5, %6\n"
      "}\n";
  PassCase c(text);
  Effect e = c.run_pass("cse");
  EXPECT_EQ(graph::to_text(c.g), text);
  EXPECT_TRUE(e.details.empty());
}

TEST(PassCse, ComparesFloatAttributesBitForBit) {
  // 0.0 == -0.0, yet x / 0.0 and x / -0.0 are infinities of opposite signs: merged, the
  // product would change sign.
  PassCase c(
      "graph @g(%x: f32[2]) {\n"
      "  %0 = full_like(%x) {value=0.0, dtype=f32} : f32[2]\n"
      "  %1 = full_like(%x) {value=-0.0, dtype=f32} : f32[2]\n"
      "  %2 = full_like(%x) {value=0.0, dtype=f32} : f32[2]\n"
      "  %3 = div(%x, %0) : f32[2]\n"
      "  %4 = div(%x, %1) : f32[2]\n"
      "  %5 = div(%x, %2) : f32[2]\n"
      "  %6 = mul(%3, %4) : f32[2]\n"
      "  %7 = mul(%6, %5) : f32[2]\n"
      "  return %7\n"
      "}\n");
  Effect e = c.run_pass("cse");
  EXPECT_EQ(details(e),
            "merged %2 = full_like(%x) into %0 = full_like(%x)\n"
            "merged %5 = div(%x, %0) into %3 = div(%x, %0)\n");
  c.expect_same_values();
}

TEST(PassCse, MergesCommutativeOpsWithTheirInputsSwapped) {
  // %1 is %0 (add commutes); %3 then reads %0 and is %2 swapped (mul); eq commutes too;
  // sub does not.
  PassCase c(
      "graph @g(%a: f32[2,3], %b: f32[3]) {\n"
      "  %0 = add(%a, %b) : f32[2,3]\n"
      "  %1 = add(%b, %a) : f32[2,3]\n"
      "  %2 = mul(%0, %a) : f32[2,3]\n"
      "  %3 = mul(%a, %1) : f32[2,3]\n"
      "  %4 = eq(%a, %b) : bool[2,3]\n"
      "  %5 = eq(%b, %a) : bool[2,3]\n"
      "  %6 = sub(%a, %b) : f32[2,3]\n"
      "  %7 = sub(%b, %a) : f32[2,3]\n"
      "  %8 = add(%2, %3) : f32[2,3]\n"
      "  %9 = where(%4, %8, %6) : f32[2,3]\n"
      "  %10 = where(%5, %7, %8) : f32[2,3]\n"
      "  return %9, %10\n"
      "}\n");
  Effect e = c.run_pass("cse");
  EXPECT_EQ(graph::to_text(c.g),
            "graph @g(%a: f32[2,3], %b: f32[3]) {\n"
            "  %0 = add(%a, %b) : f32[2,3]\n"
            "  %1 = mul(%0, %a) : f32[2,3]\n"
            "  %2 = eq(%a, %b) : bool[2,3]\n"
            "  %3 = sub(%a, %b) : f32[2,3]\n"
            "  %4 = sub(%b, %a) : f32[2,3]\n"
            "  %5 = add(%1, %1) : f32[2,3]\n"
            "  %6 = where(%2, %5, %3) : f32[2,3]\n"
            "  %7 = where(%2, %4, %5) : f32[2,3]\n"
            "  return %6, %7\n"
            "}\n");
  EXPECT_EQ(details(e),
            "merged %1 = add(%b, %a) into %0 = add(%a, %b)\n"
            "merged %3 = mul(%a, %0) into %2 = mul(%0, %a)\n"
            "merged %5 = eq(%b, %a) into %4 = eq(%a, %b)\n");
  c.expect_same_values();
}

TEST(PassCse, KeepsMaximumsOfSwappedInputsApart) {
  // maximum keeps its first of two equal inputs, and +0 == -0: maximum(+0, -0) is -0 and
  // maximum(-0, +0) is +0, so x divided by them gives infinities of opposite signs.
  const std::string text =
      "graph @g(%x: f32[2]) {\n"
      "  %0 = full_like(%x) {value=0.0, dtype=f32} : f32[2]\n"
      "  %1 = full_like(%x) {value=-0.0, dtype=f32} : f32[2]\n"
      "  %2 = maximum(%0, %1) : f32[2]\n"
      "  %3 = maximum(%1, %0) : f32[2]\n"
      "  %4 = div(%x, %2) : f32[2]\n"
      "  %5 = div(%x, %3) : f32[2]\n"
      "  return %4, %5\n"
      "}\n";
  PassCase c(text);
  Effect e = c.run_pass("cse");
  EXPECT_EQ(graph::to_text(c.g), text);
  EXPECT_TRUE(e.details.empty());
  const Tensor one = ones({}), plus_zero = full({}, 0.0), minus_zero = full({}, -0.0);
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ((one / maximum(plus_zero, minus_zero)).item<float>(), -inf);
  EXPECT_EQ((one / maximum(minus_zero, plus_zero)).item<float>(), inf);
  c.expect_same_values();
}

TEST(PassCse, KeepsTwoFetchedResultsApart) {
  // Merged, both results would be one tensor: a caller writing into one would change the
  // other. Views of one value share storage anyway, so they merge.
  PassCase c(
      "graph @g(%x: f32[4]) {\n"
      "  %0 = exp(%x) : f32[4]\n"
      "  %1 = exp(%x) : f32[4]\n"
      "  %2 = view(%0) {shape=[2,2]} : f32[2,2]\n"
      "  %3 = view(%0) {shape=[2,2]} : f32[2,2]\n"
      "  return %0, %1, %2, %3\n"
      "}\n");
  c.run_pass("cse");
  EXPECT_EQ(graph::to_text(c.g),
            "graph @g(%x: f32[4]) {\n"
            "  %0 = exp(%x) : f32[4]\n"
            "  %1 = exp(%x) : f32[4]\n"
            "  %2 = view(%0) {shape=[2,2]} : f32[2,2]\n"
            "  return %0, %1, %2, %2\n"
            "}\n");
  c.expect_same_values();
}

}  // namespace
}  // namespace baton::passes::testing
