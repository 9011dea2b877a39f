// The elementwise-fusion pass: chains, trees and broadcast operands become one
// fused_elementwise node, comparisons, where and casts to the group's type included;
// intermediates read outside the group, fetched, of another dtype or shape, or of written
// state stop a group.
//
// Values are compared exactly (expect_same_values): the fused program applies the same
// element functions as the ops' kernels, in the same order, each instruction checked bit
// for bit against its op in tests/ops/fused_elementwise_test.cpp. The compiler may fuse a
// multiply and an add into an FMA only within one expression (the same code fused or
// not), never across instructions, whose results are stored to block buffers; so mul then
// add (the chain below) rounds twice, as the separate kernels do.
#include "passes/pass_testing.h"

namespace baton::passes::testing {
namespace {

TEST(PassFuseElementwise, AChainWithABroadcastBiasBecomesOneNode) {
  PassCase c(
      "graph @g(%x: f32[4,300], %a: f32[], %b: f32[300]) {\n"
      "  %0 = mul(%x, %a) : f32[4,300]   # m.cpp:1\n"
      "  %1 = add(%0, %b) : f32[4,300]   # m.cpp:2\n"
      "  %2 = tanh(%1) : f32[4,300]   # m.cpp:3\n"
      "  %y = sub(%2, %x) : f32[4,300]   # m.cpp:4\n"
      "  return %y\n"
      "}\n");
  Effect e = c.run_pass("fuse_elementwise");
  EXPECT_EQ(text_of(c.g),
            "graph @g(%x: f32[4,300], %a: f32[], %b: f32[300]) {\n"
            "  %y = fused_elementwise(%x, %a, %b) {program=\"r0=mul(in0,in1); r1=add(r0,in2); r2=tanh(r1); "
            "r3=sub(r2,in0)\"} : f32[4,300] # m.cpp:4\n"
            "  return %y\n"
            "}\n");
  EXPECT_EQ(details(e),
            "fused %0 = mul(%x, %a) (m.cpp:1), %1 = add(%0, %b) (m.cpp:2), %2 = tanh(%1) (m.cpp:3), "
            "%y = sub(%2, %x) (m.cpp:4) into %y = fused_elementwise(%x, %a, %b)\n");
  EXPECT_EQ(c.g.nodes().front()->fused_from, "mul + add + tanh + sub");
  c.expect_same_values();
}

// Two branches meet in a binary op; %0 is read twice inside the group (a diamond).
TEST(PassFuseElementwise, ATreeWithASharedIntermediateBecomesOneNode) {
  PassCase c(
      "graph @g(%x: f64[3,5], %y: f64[3,5]) {\n"
      "  %0 = exp(%x) : f64[3,5]   # m.cpp:1\n"
      "  %1 = sigmoid(%y) : f64[3,5]   # m.cpp:2\n"
      "  %2 = mul(%0, %1) : f64[3,5]   # m.cpp:3\n"
      "  %3 = add(%2, %0) : f64[3,5]   # m.cpp:4\n"
      "  %4 = leaky_relu(%3) {negative_slope=0.2} : f64[3,5]   # m.cpp:5\n"
      "  return %4\n"
      "}\n");
  c.run_pass("fuse_elementwise");
  EXPECT_EQ(text_of(c.g),
            "graph @g(%x: f64[3,5], %y: f64[3,5]) {\n"
            "  %0 = fused_elementwise(%x, %y) {program=\"r0=exp(in0); r1=sigmoid(in1); r2=mul(r0,r1); "
            "r3=add(r2,r0); r4=leaky_relu[0.2](r3)\"} : f64[3,5] # m.cpp:5\n"
            "  return %0\n"
            "}\n");
  c.expect_same_values();
}

// %1 is also read by a matmul and %0 is fetched: the group is neg + add only.
TEST(PassFuseElementwise, AnIntermediateReadOutsideOrFetchedStopsTheGroup) {
  PassCase c(
      "graph @g(%x: f32[2,2], %y: f32[2,2], %w: f32[2,2]) {\n"
      "  %0 = mul(%x, %y) : f32[2,2]   # m.cpp:1\n"
      "  %1 = exp(%0) : f32[2,2]   # m.cpp:2\n"
      "  %2 = neg(%1) : f32[2,2]   # m.cpp:3\n"
      "  %3 = matmul(%1, %w) : f32[2,2]   # m.cpp:4\n"
      "  %4 = add(%2, %3) : f32[2,2]   # m.cpp:5\n"
      "  return %4, %0\n"
      "}\n");
  Effect e = c.run_pass("fuse_elementwise");
  EXPECT_EQ(text_of(c.g),
            "graph @g(%x: f32[2,2], %y: f32[2,2], %w: f32[2,2]) {\n"
            "  %0 = mul(%x, %y) : f32[2,2] # m.cpp:1\n"
            "  %1 = exp(%0) : f32[2,2] # m.cpp:2\n"
            "  %2 = matmul(%1, %w) : f32[2,2] # m.cpp:4\n"
            "  %3 = fused_elementwise(%1, %2) {program=\"r0=neg(in0); r1=add(r0,in1)\"} : f32[2,2] # m.cpp:5\n"
            "  return %3, %0\n"
            "}\n");
  EXPECT_EQ(details(e), "fused %2 = neg(%1) (m.cpp:3), %4 = add(%2, %3) (m.cpp:5) into %4 = fused_elementwise(%1, %3)\n");
  c.expect_same_values();
}

void expect_unchanged(const std::string& text) {
  PassCase c(text);
  Effect e = c.run_pass("fuse_elementwise");
  EXPECT_EQ(graph::to_text(c.g), text);
  EXPECT_TRUE(e.details.empty());
}

TEST(PassFuseElementwise, IntegersAndSingleNodesStay) {
  expect_unchanged(  // integers wrap around: no program computes them
      "graph @g(%x: i32[4]) {\n"
      "  %0 = neg(%x) : i32[4]\n"
      "  %1 = abs(%0) : i32[4]\n"
      "  return %1\n"
      "}\n");
  expect_unchanged(
      "graph @g(%x: f32[4]) {\n"
      "  %0 = exp(%x) : f32[4]\n"
      "  return %0\n"
      "}\n");
}

// A leaky ReLU written as where(x > 0, x, x * 0.1), plus a bias: the comparison's bool
// stays in a register (1 or 0), so the whole expression is one pass over memory.
TEST(PassFuseElementwise, AComparisonAndWhereJoinTheirOperands) {
  PassCase c(
      "graph @g(%x: f32[4,300], %z: f32[], %s: f32[], %b: f32[300]) {\n"
      "  %0 = gt(%x, %z) : bool[4,300]   # m.cpp:1\n"
      "  %1 = mul(%x, %s) : f32[4,300]   # m.cpp:1\n"
      "  %2 = where(%0, %x, %1) : f32[4,300]   # m.cpp:1\n"
      "  %y = add(%2, %b) : f32[4,300]   # m.cpp:2\n"
      "  return %y\n"
      "}\n");
  Effect e = c.run_pass("fuse_elementwise");
  EXPECT_EQ(text_of(c.g),
            "graph @g(%x: f32[4,300], %z: f32[], %s: f32[], %b: f32[300]) {\n"
            "  %y = fused_elementwise(%x, %z, %s, %b) {program=\"r0=gt(in0,in1); r1=mul(in0,in2); "
            "r2=where(r0,in0,r1); r3=add(r2,in3)\"} : f32[4,300] # m.cpp:2\n"
            "  return %y\n"
            "}\n");
  EXPECT_EQ(c.g.nodes().front()->fused_from, "gt + mul + where + add");
  c.expect_same_values();
}

// A cast adds no instruction: its input is read converted. A bool mask (0 and 1), an i64
// bias of a smaller shape (its conversion is the cast's, broadcast as its result was) and
// an f32 value in an f64 group; the program's type is then an attribute, as the first
// input (the mask) does not tell it.
TEST(PassFuseElementwise, CastsToTheGroupsTypeJoinWithoutAnInstruction) {
  PassCase c(
      "graph @g(%m: bool[4,8], %h: i64[8], %x: f32[4,8], %y: f64[4,8]) {\n"
      "  %0 = cast(%m) {dtype=f64} : f64[4,8]   # m.cpp:1\n"
      "  %1 = cast(%h) {dtype=f64} : f64[8]   # m.cpp:2\n"
      "  %2 = exp(%x) : f32[4,8]   # m.cpp:3\n"
      "  %3 = cast(%2) {dtype=f64} : f64[4,8]   # m.cpp:4\n"
      "  %4 = mul(%0, %y) : f64[4,8]   # m.cpp:5\n"
      "  %5 = add(%4, %1) : f64[4,8]   # m.cpp:6\n"
      "  %6 = sub(%5, %3) : f64[4,8]   # m.cpp:7\n"
      "  return %6\n"
      "}\n");
  c.run_pass("fuse_elementwise");
  EXPECT_EQ(text_of(c.g),
            "graph @g(%m: bool[4,8], %h: i64[8], %x: f32[4,8], %y: f64[4,8]) {\n"
            "  %0 = exp(%x) : f32[4,8] # m.cpp:3\n"
            "  %1 = fused_elementwise(%m, %h, %0, %y) {program=\"r0=mul(in0,in3); r1=add(r0,in1); "
            "r2=sub(r1,in2)\", dtype=f64} : f64[4,8] # m.cpp:7\n"
            "  return %1\n"
            "}\n");
  EXPECT_EQ(c.g.nodes().back()->fused_from, "cast + cast + cast + mul + add + sub");
  c.expect_same_values();
}

// A cast to an integer rounds: it stays a node, and the group reads its result converted
// back (the cast back joins). A comparison two groups read stays a node too, each reading
// its bool result.
TEST(PassFuseElementwise, IntegerCastsAndSharedComparisonsStayNodes) {
  PassCase c(
      "graph @g(%x: f32[4,8], %y: f32[4,8]) {\n"
      "  %0 = cast(%x) {dtype=i32} : i32[4,8]\n"
      "  %1 = cast(%0) {dtype=f32} : f32[4,8]\n"
      "  %2 = sub(%x, %1) : f32[4,8]\n"
      "  %3 = lt(%x, %y) : bool[4,8]\n"
      "  %4 = exp(%2) : f32[4,8]\n"
      "  %5 = where(%3, %4, %y) : f32[4,8]\n"
      "  %6 = neg(%y) : f32[4,8]\n"
      "  %7 = where(%3, %x, %6) : f32[4,8]\n"
      "  return %5, %7\n"
      "}\n");
  c.run_pass("fuse_elementwise");
  EXPECT_EQ(graph::to_text(c.g),
            "graph @g(%x: f32[4,8], %y: f32[4,8]) {\n"
            "  %0 = cast(%x) {dtype=i32} : i32[4,8]\n"
            "  %1 = lt(%x, %y) : bool[4,8]\n"
            "  %2 = fused_elementwise(%0, %x, %1, %y) {program=\"r0=sub(in1,in0); r1=exp(r0); "
            "r2=where(in2,r1,in3)\", dtype=f32} : f32[4,8]\n"
            "  %3 = fused_elementwise(%y, %1, %x) {program=\"r0=neg(in0); r1=where(in1,in2,r0)\"} : f32[4,8]\n"
            "  return %2, %3\n"
            "}\n");
  c.expect_same_values();
}

// A group may end in a cast to any dtype or in a comparison: the program computes in the
// group's type and its result is converted as it is stored (`to`). Here a quantized
// result (floor, then i32) and a mask that two where groups read.
TEST(PassFuseElementwise, ACastOrAComparisonEndsAGroupConvertingItsResult) {
  PassCase c(
      "graph @g(%x: f32[4,8], %s: f32[], %y: f64[4,8]) {\n"
      "  %0 = mul(%x, %s) : f32[4,8]   # m.cpp:1\n"
      "  %1 = floor(%0) : f32[4,8]   # m.cpp:2\n"
      "  %q = cast(%1) {dtype=i32} : i32[4,8]   # m.cpp:3\n"
      "  %2 = exp(%x) : f32[4,8]   # m.cpp:4\n"
      "  %m = gt(%2, %s) : bool[4,8]   # m.cpp:5\n"
      "  %3 = where(%m, %x, %s) : f32[4,8]   # m.cpp:6\n"
      "  %4 = neg(%3) : f32[4,8]   # m.cpp:7\n"
      "  %5 = cast(%m) {dtype=f64} : f64[4,8]   # m.cpp:8\n"
      "  %6 = mul(%5, %y) : f64[4,8]   # m.cpp:9\n"
      "  return %q, %4, %6\n"
      "}\n");
  c.run_pass("fuse_elementwise");
  EXPECT_EQ(text_of(c.g),
            "graph @g(%x: f32[4,8], %s: f32[], %y: f64[4,8]) {\n"
            "  %q = fused_elementwise(%x, %s) {program=\"r0=mul(in0,in1); r1=floor(r0)\", to=i32} : i32[4,8] "
            "# m.cpp:3\n"
            "  %m = fused_elementwise(%x, %s) {program=\"r0=exp(in0); r1=gt(r0,in1)\", to=bool} : bool[4,8] "
            "# m.cpp:5\n"
            "  %0 = fused_elementwise(%m, %x, %s) {program=\"r0=where(in0,in1,in2); r1=neg(r0)\", dtype=f32} "
            ": f32[4,8] # m.cpp:7\n"
            "  %1 = fused_elementwise(%m, %y) {program=\"r0=mul(in0,in1)\", dtype=f64} : f64[4,8] # m.cpp:9\n"
            "  return %q, %0, %1\n"
            "}\n");
  c.expect_same_values();
}

// A mask as a float result, cast(x * s > 0, f32): the comparison's 1 or 0 is the result.
TEST(PassFuseElementwise, AComparisonCastToAFloatEndsAGroup) {
  PassCase c(
      "graph @g(%x: f32[4,8], %s: f32[]) {\n"
      "  %0 = mul(%x, %s) : f32[4,8]\n"
      "  %1 = gt(%0, %s) : bool[4,8]\n"
      "  %2 = cast(%1) {dtype=f64} : f64[4,8]\n"
      "  return %2\n"
      "}\n");
  c.run_pass("fuse_elementwise");
  EXPECT_EQ(graph::to_text(c.g),
            "graph @g(%x: f32[4,8], %s: f32[]) {\n"
            "  %0 = fused_elementwise(%x, %s) {program=\"r0=mul(in0,in1); r1=gt(r0,in1)\", to=f64} : f64[4,8]\n"
            "  return %0\n"
            "}\n");
  c.expect_same_values();
}

// exp(%b) on 8 elements would run once per output element (4 times over) if fused.
TEST(PassFuseElementwise, AProducerOfASmallerShapeStaysOutside) {
  expect_unchanged(
      "graph @g(%x: f32[4,8], %b: f32[8]) {\n"
      "  %0 = exp(%b) : f32[8]\n"
      "  %1 = add(%x, %0) : f32[4,8]\n"
      "  return %1\n"
      "}\n");
}

// The fused node runs where %2 was, after the assign: exp(%v) must not move past it.
TEST(PassFuseElementwise, ANodeReadingWrittenStateDoesNotMove) {
  PassCase c(
      "graph @g(%v: f32[4], %x: f32[4], %y: f32[4]) {\n"
      "  %0 = exp(%v) : f32[4]\n"
      "  %1 = assign(%v, %x) : f32[4]\n"
      "  %2 = add(%0, %y) : f32[4]\n"
      "  %3 = relu(%2) : f32[4]\n"
      "  return %3\n"
      "}\n");
  c.run_pass("fuse_elementwise");
  EXPECT_EQ(graph::to_text(c.g),
            "graph @g(%v: f32[4], %x: f32[4], %y: f32[4]) {\n"
            "  %0 = exp(%v) : f32[4]\n"
            "  %1 = assign(%v, %x) : f32[4]\n"
            "  %2 = fused_elementwise(%0, %y) {program=\"r0=add(in0,in1); r1=relu(r0)\"} : f32[4]\n"
            "  return %2\n"
            "}\n");
  c.expect_same_values();
}

// pow's exponent stays an input of one element, even when computed by a fusable op.
TEST(PassFuseElementwise, PowByAOneElementExponent) {
  PassCase c(
      "graph @g(%x: f32[2,3], %e: f32[1,1]) {\n"
      "  %0 = abs(%e) : f32[1,1]\n"
      "  %1 = sqrt(%x) : f32[2,3]\n"
      "  %2 = pow(%1, %0) : f32[2,3]\n"
      "  %3 = pow(%2, %e) : f32[2,3]\n"
      "  return %3\n"
      "}\n");
  c.run_pass("fuse_elementwise");
  EXPECT_EQ(graph::to_text(c.g),
            "graph @g(%x: f32[2,3], %e: f32[1,1]) {\n"
            "  %0 = abs(%e) : f32[1,1]\n"
            "  %1 = fused_elementwise(%x, %0, %e) {program=\"r0=sqrt(in0); r1=pow(r0,in1); r2=pow(r1,in2)\"} : f32[2,3]\n"
            "  return %1\n"
            "}\n");
  c.expect_same_values();
}

// The whole O2 pipeline: the cleanup first (neg(neg(x)) is x, then dead code), and a group
// made in one round grows in the next, once the dead negs no longer read %0.
TEST(PassFuseElementwise, RunsAtO2AfterTheCleanupAndGrowsAcrossRounds) {
  PassCase c(
      "graph @g(%x: f32[64,130], %c: f32[130]) {\n"
      "  %0 = exp(%x) : f32[64,130]\n"
      "  %1 = neg(%0) : f32[64,130]\n"
      "  %2 = neg(%1) : f32[64,130]\n"
      "  %3 = mul(%2, %c) : f32[64,130]\n"
      "  %4 = gelu(%3) : f32[64,130]\n"
      "  %5 = clamp(%4) {min=-1, max=1.5} : f32[64,130]\n"
      "  return %5\n"
      "}\n");
  std::vector<Effect> log = c.optimize(Level::O2);
  EXPECT_EQ(graph::to_text(c.g),
            "graph @g(%x: f32[64,130], %c: f32[130]) {\n"
            "  %0 = fused_elementwise(%x, %c) {program=\"r0=exp(in0); r1=mul(r0,in1); r2=gelu(r1); "
            "r3=clamp[-1,1.5](r2)\"} : f32[64,130]\n"
            "  return %0\n"
            "}\n");
  ASSERT_FALSE(log.empty());
  EXPECT_EQ(log.back().pass, "fuse_elementwise");
  c.expect_same_values();
}

// A node fused before is one more member: its program is spliced in, its pow exponent
// staying an input.
TEST(PassFuseElementwise, AFusedNodeJoinsALaterGroup) {
  PassCase c(
      "graph @g(%x: f32[3,4], %y: f32[3,4], %e: f32[]) {\n"
      "  %0 = fused_elementwise(%x, %e) {program=\"r0=abs(in0); r1=pow(r0,in1)\"} : f32[3,4]\n"
      "  %1 = mul(%0, %y) : f32[3,4]\n"
      "  %2 = fused_elementwise(%1, %x) {program=\"r0=tanh(in0); r1=sub(r0,in1)\"} : f32[3,4]\n"
      "  return %2\n"
      "}\n");
  c.run_pass("fuse_elementwise");
  EXPECT_EQ(graph::to_text(c.g),
            "graph @g(%x: f32[3,4], %y: f32[3,4], %e: f32[]) {\n"
            "  %0 = fused_elementwise(%x, %e, %y) {program=\"r0=abs(in0); r1=pow(r0,in1); r2=mul(r1,in2); "
            "r3=tanh(r2); r4=sub(r3,in0)\"} : f32[3,4]\n"
            "  return %0\n"
            "}\n");
  EXPECT_EQ(c.g.nodes().front()->fused_from, "fused_elementwise + mul + fused_elementwise");
  c.expect_same_values();
}

// A backward graph: the relu's output feeds two uses, whose gradients the add accumulates;
// relu_backward then masks the sum and the chain's mul (x * w's gradient for x) follows.
TEST(PassFuseElementwise, ReluBackwardJoinsAGradientChain) {
  PassCase c(
      "graph @g(%g1: f32[8,32], %g2: f32[8,32], %r: f32[8,32], %w: f32[32]) {\n"
      "  %0 = add(%g1, %g2) : f32[8,32]   # m.cpp:1\n"
      "  %1 = relu_backward(%0, %r) : f32[8,32]   # m.cpp:2\n"
      "  %2 = mul(%1, %w) : f32[8,32]   # m.cpp:3\n"
      "  return %2\n"
      "}\n");
  Effect e = c.run_pass("fuse_elementwise");
  EXPECT_EQ(text_of(c.g),
            "graph @g(%g1: f32[8,32], %g2: f32[8,32], %r: f32[8,32], %w: f32[32]) {\n"
            "  %0 = fused_elementwise(%g1, %g2, %r, %w) {program=\"r0=add(in0,in1); r1=relu_backward(r0,in2); "
            "r2=mul(r1,in3)\"} : f32[8,32] # m.cpp:3\n"
            "  return %0\n"
            "}\n");
  EXPECT_EQ(details(e),
            "fused %0 = add(%g1, %g2) (m.cpp:1), %1 = relu_backward(%0, %r) (m.cpp:2), %2 = mul(%1, %w) (m.cpp:3) "
            "into %2 = fused_elementwise(%g1, %g2, %r, %w)\n");
  c.expect_same_values();
}

// The same chain made by autodiff: relu's result read twice (r * r + r), so its gradient
// is an accumulation, then the relu's mask, then the product's gradient for x. One
// gradient step fuses all of it, and its values are the unoptimized plan's (==).
TEST(PassFuseElementwise, AnAutodiffGradientChainThroughReluFuses) {
  Graph g("grad");
  Tensor x = g.placeholder(f32, {16, 64}, "x");
  Tensor w = g.placeholder(f32, {64}, "w");
  Tensor r = relu(x * w);
  Tensor dx = grad((r * r + r).sum(), {x}).at(0);
  g.set_outputs({dx});
  const Tensor xv = baton::testing::uniform({16, 64}, -1, 1, 1).to(f32);
  const Tensor wv = baton::testing::uniform({64}, -1, 1, 2).to(f32);
  Session fused(g), plain(g, SessionOptions{.level = OptLevel::O0});
  const Tensor got = fused.run({dx}, {{x, xv}, {w, wv}}).at(0);
  const Tensor want = plain.run({dx}, {{x, xv}, {w, wv}}).at(0);
  EXPECT_NE(fused.explain().find("relu_backward(r"), std::string::npos) << fused.explain();
  EXPECT_TRUE(baton::testing::all_close(got, want, 0, 0)) << "the same element functions in the same order";
}

// A plan parses each program once (the op's prepare hook); explain() shows it per step.
TEST(PassFuseElementwise, ExplainShowsEachFusedStepsProgram) {
  Graph g("chain");
  Tensor x = g.placeholder(f32, {64}, "x");
  Tensor y = tanh(x * 2.0f) - x;
  Session s(g);
  Tensor out = s.run({y}, {{x, baton::testing::uniform({64}, -1, 1, 1).to(f32)}}).at(0);
  EXPECT_NE(s.explain().find("[r0=mul(in0,in1); r1=tanh(r0); r2=sub(r1,in0)]"), std::string::npos) << s.explain();
}

}  // namespace
}  // namespace baton::passes::testing
