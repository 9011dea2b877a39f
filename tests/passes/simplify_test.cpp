// Algebraic simplification: identities that leave values unchanged, applied only when the
// constant is fixed, the type is kept, and no state or caller-visible storage is aliased.
#include "passes/pass_testing.h"

namespace baton::passes::testing {
namespace {

TEST(PassSimplify, IdentityOperandsLeaveX) {
  PassCase c(
      "graph @g(%x: f32[2,3], %one: f32[], %zero: f32[2,3]) {\n"
      "  %0 = relu(%x) : f32[2,3]\n"
      "  %1 = mul(%0, %one) : f32[2,3]    # m.cpp:1\n"
      "  %2 = mul(%one, %1) : f32[2,3]    # m.cpp:2\n"
      "  %3 = add(%2, %zero) : f32[2,3]   # m.cpp:3\n"
      "  %4 = add(%zero, %3) : f32[2,3]   # m.cpp:4\n"
      "  %5 = sub(%4, %zero) : f32[2,3]   # m.cpp:5\n"
      "  %6 = div(%5, %one) : f32[2,3]    # m.cpp:6\n"
      "  %7 = exp(%6) : f32[2,3]\n"
      "  return %7\n"
      "}\n",
      {{"one", ones({})}, {"zero", zeros({2, 3})}});
  Effect e = c.run_pass("simplify");
  EXPECT_EQ(graph::to_text(c.g),
            "graph @g(%x: f32[2,3], %one: f32[], %zero: f32[2,3]) {\n"
            "  %0 = relu(%x) : f32[2,3]\n"
            "  %1 = exp(%0) : f32[2,3]\n"
            "  return %1\n"
            "}\n");
  EXPECT_EQ(details(e),
            "simplified %1 = mul(%0, %one) (m.cpp:1) to %0 (x * 1 -> x)\n"
            "simplified %2 = mul(%one, %0) (m.cpp:2) to %0 (1 * x -> x)\n"
            "simplified %3 = add(%0, %zero) (m.cpp:3) to %0 (x + 0 -> x)\n"
            "simplified %4 = add(%zero, %0) (m.cpp:4) to %0 (0 + x -> x)\n"
            "simplified %5 = sub(%0, %zero) (m.cpp:5) to %0 (x - 0 -> x)\n"
            "simplified %6 = div(%0, %one) (m.cpp:6) to %0 (x / 1 -> x)\n");
  c.expect_same_values();
}

TEST(PassSimplify, KeepsABroadcastingOneAndConstantsThatAreNotIdentities) {
  // %1's one broadcasts %0 to a bigger shape; %two is not 1 everywhere; %fed is 1 in this
  // run but a feed, so the next run may differ; 0 - x is not x.
  const std::string text =
      "graph @g(%x: f32[3], %one: f32[2,3], %two: f32[3], %fed: f32[], %zero: f32[3]) {\n"
      "  %0 = relu(%x) : f32[3]\n"
      "  %1 = mul(%0, %one) : f32[2,3]\n"
      "  %2 = mul(%0, %two) : f32[3]\n"
      "  %3 = mul(%0, %fed) : f32[3]\n"
      "  %4 = sub(%zero, %0) : f32[3]\n"
      "  %5 = div(%one, %0) : f32[2,3]\n"
      "  return %1, %2, %3, %4, %5\n"
      "}\n";
  PassCase c(text, {{"one", ones({2, 3})}, {"two", tensor(std::vector<float>{1, 2, 1}, {3})}, {"zero", zeros({3})}});
  Effect e = c.run_pass("simplify");
  EXPECT_EQ(graph::to_text(c.g), text);
  EXPECT_TRUE(e.details.empty());
  c.expect_same_values();
}

TEST(PassSimplify, NeverForwardsACopyOfWrittenStateOrToAFetchedInput) {
  // %0 copies %v before the assign writes it: forwarding %v would make %5 read the new
  // value. %2 and %4 are handed back: forwarding %x would hand the caller its own input.
  const std::string text =
      "graph @g(%v: f32[3], %x: f32[3], %one: f32[]) {\n"
      "  %0 = mul(%v, %one) : f32[3]\n"
      "  %1 = assign(%v, %x) : f32[3]\n"
      "  %2 = mul(%x, %one) : f32[3]\n"
      "  %3 = neg(%x) : f32[3]\n"
      "  %4 = neg(%3) : f32[3]\n"
      "  %5 = exp(%0) : f32[3]\n"
      "  return %5, %2, %4\n"
      "}\n";
  PassCase c(text, {{"one", ones({})}});
  c.run_pass("simplify");
  EXPECT_EQ(graph::to_text(c.g), text);
  c.expect_same_values();
}

TEST(PassSimplify, KeepsAnIdentityOpWhoseOperandMayBeStrided) {
  // mul makes the expanded %0 contiguous, and view() needs that; %x is a graph input,
  // which a caller may feed strided.
  const std::string text =
      "graph @g(%x: f32[3], %one: f32[]) {\n"
      "  %0 = expand(%x) {shape=[2,3]} : f32[2,3]\n"
      "  %1 = mul(%0, %one) : f32[2,3]\n"
      "  %2 = view(%1) {shape=[6]} : f32[6]\n"
      "  %3 = neg(%x) : f32[3]\n"
      "  %4 = neg(%3) : f32[3]\n"
      "  %5 = div(%x, %one) : f32[3]\n"
      "  return %2, %4, %5\n"
      "}\n";
  PassCase c(text, {{"one", ones({})}});
  Effect e = c.run_pass("simplify");
  EXPECT_EQ(graph::to_text(c.g), text);
  EXPECT_TRUE(e.details.empty());
  c.expect_same_values();
}

TEST(PassSimplify, MaxPoolingWhoseIndicesNothingReadsKeepsOnlyItsValues) {
  PassCase c(
      "graph @g(%x: f32[1,2,4,4]) {\n"
      "  %0, %1 = max_pool2d(%x) {kernel=[2,2], stride=[2,2], padding=[0,0]} : f32[1,2,2,2], i64[1,2,2,2]   # m.cpp:1\n"
      "  %2, %3 = max_pool2d(%x) {kernel=[2,2], stride=[1,1], padding=[0,0]} : f32[1,2,3,3], i64[1,2,3,3]\n"
      "  return %0, %2, %3\n"
      "}\n");
  Effect e = c.run_pass("simplify");
  EXPECT_EQ(graph::to_text(c.g),
            "graph @g(%x: f32[1,2,4,4]) {\n"
            "  %0 = max_pool2d_values(%x) {kernel=[2,2], stride=[2,2], padding=[0,0]} : f32[1,2,2,2]   # m.cpp:1\n"
            "  %1, %2 = max_pool2d(%x) {kernel=[2,2], stride=[1,1], padding=[0,0]} : f32[1,2,3,3], i64[1,2,3,3]\n"
            "  return %0, %1, %2\n"
            "}\n");
  EXPECT_EQ(details(e),
            "simplified %0, %1 = max_pool2d(%x) (m.cpp:1) to max_pool2d_values (nothing reads the indices)\n");
  c.expect_same_values();
}

TEST(PassSimplify, MaxPoolingWhoseIndicesOnlyItsBackwardReadsKeepsWindowOffsets) {
  PassCase c(
      "graph @g(%x: f32[1,2,4,4], %gy: f32[1,2,2,2]) {\n"
      "  %0, %1 = max_pool2d(%x) {kernel=[2,2], stride=[2,2], padding=[0,0]} : f32[1,2,2,2], i64[1,2,2,2]   # m.cpp:1\n"
      "  %2 = max_pool2d_backward(%gy, %1) {kernel=[2,2], stride=[2,2], padding=[0,0], input_shape=[1,2,4,4]} "
      ": f32[1,2,4,4]   # m.cpp:2\n"
      "  %3, %4 = max_pool2d(%x) {kernel=[3,3], stride=[1,1], padding=[1,1]} : f32[1,2,4,4], i64[1,2,4,4]\n"
      "  %5 = max_pool2d_backward(%x, %4) {kernel=[3,3], stride=[1,1], padding=[1,1], input_shape=[1,2,4,4]} "
      ": f32[1,2,4,4]\n"
      "  return %0, %2, %3, %4, %5\n"
      "}\n");
  Effect e = c.run_pass("simplify");
  // The second pooling's indices are returned too: they stay flat indices.
  EXPECT_EQ(graph::to_text(c.g),
            "graph @g(%x: f32[1,2,4,4], %gy: f32[1,2,2,2]) {\n"
            "  %0, %1 = max_pool2d_window(%x) {kernel=[2,2], stride=[2,2], padding=[0,0]} : f32[1,2,2,2], "
            "i32[1,2,2,2]                      # m.cpp:1\n"
            "  %2 = max_pool2d_window_backward(%gy, %1) {kernel=[2,2], stride=[2,2], padding=[0,0], "
            "input_shape=[1,2,4,4]} : f32[1,2,4,4]   # m.cpp:2\n"
            "  %3, %4 = max_pool2d(%x) {kernel=[3,3], stride=[1,1], padding=[1,1]} : f32[1,2,4,4], i64[1,2,4,4]\n"
            "  %5 = max_pool2d_backward(%x, %4) {kernel=[3,3], stride=[1,1], padding=[1,1], input_shape=[1,2,4,4]} "
            ": f32[1,2,4,4]\n"
            "  return %0, %2, %3, %4, %5\n"
            "}\n");
  EXPECT_EQ(details(e),
            "simplified %0, %1 = max_pool2d(%x) (m.cpp:1) to max_pool2d_window and its 1 backward op(s) to "
            "max_pool2d_window_backward (window offsets, not flat indices)\n");
  c.expect_same_values();
}

TEST(PassSimplify, CastsViewsPermutesAndNegations) {
  PassCase c(
      "graph @g(%x: f32[2,3,4]) {\n"
      "  %0 = exp(%x) : f32[2,3,4]\n"
      "  %1 = cast(%0) {dtype=f32} : f32[2,3,4]\n"
      "  %2 = view(%1) {shape=[6,4]} : f32[6,4]\n"
      "  %3 = view(%2) {shape=[4,6]} : f32[4,6]\n"
      "  %4 = view(%3) {shape=[4,6]} : f32[4,6]\n"
      "  %5 = permute(%4) {dims=[1,0]} : f32[6,4]\n"
      "  %6 = permute(%5) {dims=[-1,0]} : f32[4,6]\n"
      "  %7 = neg(%6) : f32[4,6]\n"
      "  %8 = neg(%7) : f32[4,6]\n"
      "  %9 = relu(%8) : f32[4,6]\n"
      "  return %9\n"
      "}\n");
  Effect e = c.run_pass("simplify");
  // The pass leaves the nodes it bypassed to dead-code elimination.
  EXPECT_EQ(graph::to_text(c.g),
            "graph @g(%x: f32[2,3,4]) {\n"
            "  %0 = exp(%x) : f32[2,3,4]\n"
            "  %1 = view(%0) {shape=[6,4]} : f32[6,4]\n"
            "  %2 = view(%0) {shape=[4,6]} : f32[4,6]\n"
            "  %3 = permute(%2) {dims=[1,0]} : f32[6,4]\n"
            "  %4 = neg(%2) : f32[4,6]\n"
            "  %5 = relu(%2) : f32[4,6]\n"
            "  return %5\n"
            "}\n");
  EXPECT_EQ(details(e),
            "simplified %1 = cast(%0) to %0 (cast to the same dtype -> x)\n"
            "simplified %3 = view(%2) to %3 = view(%0) (view of a view -> one view of the original)\n"
            "simplified %4 = view(%3) to %3 (view to the same shape -> x)\n"
            "simplified %6 = permute(%5) to %3 (permute undoing a permute -> x)\n"
            "simplified %8 = neg(%7) to %3 (neg(neg(x)) -> x)\n");
  c.expect_same_values();
}

TEST(PassSimplify, AFetchedViewOfAnInputMayBecomeTheInput) {
  // The view already shares the input's storage, so handing back the input itself gives
  // the caller nothing it could not write before.
  PassCase c(
      "graph @g(%x: f32[2,2]) {\n"
      "  %0 = view(%x) {shape=[2,2]} : f32[2,2]\n"
      "  %1 = permute(%x) {dims=[0,1]} : f32[2,2]\n"
      "  return %0, %1\n"
      "}\n");
  c.run_pass("simplify");
  EXPECT_EQ(graph::to_text(c.g),
            "graph @g(%x: f32[2,2]) {\n"
            "  return %x, %x\n"
            "}\n");
  c.expect_same_values();
}

TEST(PassSimplify, ComposesTwoPermutesIntoOne) {
  // [a,b,c] -> [b,c,a] -> [c,a,b]: one permute with dims [2,0,1].
  PassCase c(
      "graph @g(%x: f32[2,3,4]) {\n"
      "  %0 = permute(%x) {dims=[1,2,0]} : f32[3,4,2]\n"
      "  %1 = permute(%0) {dims=[1,2,0]} : f32[4,2,3]\n"
      "  %2 = relu(%1) : f32[4,2,3]\n"
      "  return %2\n"
      "}\n");
  c.run_pass("simplify");
  EXPECT_EQ(graph::to_text(c.g),
            "graph @g(%x: f32[2,3,4]) {\n"
            "  %0 = permute(%x) {dims=[1,2,0]} : f32[3,4,2]\n"
            "  %1 = permute(%x) {dims=[2,0,1]} : f32[4,2,3]\n"
            "  %2 = relu(%1) : f32[4,2,3]\n"
            "  return %2\n"
            "}\n");
  c.expect_same_values();
}

TEST(PassSimplify, KeepsACastOfAGraphInputAndATransposeOfASquare) {
  // A fed tensor may be strided and cast makes it contiguous; a [3,3] transpose keeps the
  // type but not the values.
  const std::string text =
      "graph @g(%x: f32[3,3]) {\n"
      "  %0 = cast(%x) {dtype=f32} : f32[3,3]\n"
      "  %1 = permute(%0) {dims=[1,0]} : f32[3,3]\n"
      "  %2 = relu(%1) : f32[3,3]\n"
      "  return %2\n"
      "}\n";
  PassCase c(text);
  c.run_pass("simplify");
  EXPECT_EQ(graph::to_text(c.g), text);
  c.expect_same_values();
}

}  // namespace
}  // namespace baton::passes::testing
