// Dead-code elimination: what reaches no output goes; effects and what they read stay.
#include "passes/pass_testing.h"

namespace baton::passes::testing {
namespace {

TEST(PassDce, RemovesNodesNoOutputNeeds) {
  PassCase c(
      "graph @g(%x: f32[4]) {\n"
      "  %0 = exp(%x) : f32[4]    # m.cpp:1\n"
      "  %1 = relu(%x) : f32[4]   # m.cpp:2\n"
      "  %2 = neg(%0) : f32[4]    # m.cpp:3\n"
      "  return %1\n"
      "}\n");
  Effect e = c.run_pass("dce");
  EXPECT_EQ(graph::to_text(c.g),
            "graph @g(%x: f32[4]) {\n"
            "  %0 = relu(%x) : f32[4]   # m.cpp:2\n"
            "  return %0\n"
            "}\n");
  EXPECT_EQ(e.nodes_before, 3u);
  EXPECT_EQ(e.nodes_after, 1u);
  EXPECT_EQ(details(e),
            "removed %0 = exp(%x) (m.cpp:1)\n"
            "removed %2 = neg(%0) (m.cpp:3)\n");
  c.expect_same_values();
}

TEST(PassDce, KeepsEffectsAndWhatTheyRead) {
  // Nothing reads the assign, but it writes %v: it stays, and so does the exp it reads.
  PassCase c(
      "graph @g(%v: f32[4], %x: f32[4]) {\n"
      "  %0 = exp(%x) : f32[4]\n"
      "  %1 = assign(%v, %0) : f32[4]\n"
      "  %2 = neg(%x) : f32[4]\n"
      "  %3 = relu(%x) : f32[4]\n"
      "  return %3\n"
      "}\n");
  Effect e = c.run_pass("dce");
  EXPECT_EQ(graph::to_text(c.g),
            "graph @g(%v: f32[4], %x: f32[4]) {\n"
            "  %0 = exp(%x) : f32[4]\n"
            "  %1 = assign(%v, %0) : f32[4]\n"
            "  %2 = relu(%x) : f32[4]\n"
            "  return %2\n"
            "}\n");
  EXPECT_EQ(details(e), "removed %2 = neg(%x)\n");
  c.expect_same_values();  // %v after the run included
}

TEST(PassDce, KeepsOptimizerUpdatesWithoutOutputs) {
  const std::string text =
      "graph @g(%p: f32[3], %grad: f32[3], %lr: f64[], %step: i64[], %m: f32[3]) {\n"
      "  %0 = mul(%grad, %grad) : f32[3]\n"
      "  sgd_update(%p, %0, %lr, %step, %m) {momentum=0.9, dampening=0, weight_decay=0, nesterov=0}\n"
      "  return\n"
      "}\n";
  PassCase c(text);
  Effect e = c.run_pass("dce");
  EXPECT_EQ(graph::to_text(c.g), text);
  EXPECT_TRUE(e.details.empty());
  c.expect_same_values();  // %p, %step and %m after the run
}

TEST(PassDce, ChangesNothingWhenEverythingIsNeeded) {
  const std::string text =
      "graph @g(%x: f32[2], %y: f32[2]) {\n"
      "  %0 = add(%x, %y) : f32[2]\n"
      "  %1 = exp(%0) : f32[2]\n"
      "  return %1, %0, %x\n"
      "}\n";
  PassCase c(text);
  Effect e = c.run_pass("dce");
  EXPECT_EQ(graph::to_text(c.g), text);
  EXPECT_EQ(e.nodes_after, e.nodes_before);
  c.expect_same_values();
}

}  // namespace
}  // namespace baton::passes::testing
