// The pass manager: which passes a level runs, rounds until a fixpoint, the log, errors.
#include "passes/pass_testing.h"

namespace baton::passes::testing {
namespace {

// Every cleanup pass has work here, and their work makes more: simplifying exposes a
// common subexpression, folding leaves a node dead for the next round.
const char* kEverything =
    "graph @g(%x: f32[2,3], %a: f32[3], %one: f32[]) {\n"
    "  %0 = exp(%a) : f32[3]            # m.cpp:1\n"
    "  %1 = abs(%x) : f32[2,3]          # m.cpp:2\n"
    "  %2 = mul(%1, %one) : f32[2,3]    # m.cpp:3\n"
    "  %3 = add(%2, %0) : f32[2,3]      # m.cpp:4\n"
    "  %4 = add(%1, %0) : f32[2,3]      # m.cpp:5\n"
    "  %5 = neg(%3) : f32[2,3]          # m.cpp:6\n"
    "  %6 = neg(%5) : f32[2,3]          # m.cpp:7\n"
    "  %7 = relu(%x) : f32[2,3]         # m.cpp:8\n"
    "  %8 = mul(%6, %4) : f32[2,3]      # m.cpp:9\n"
    "  return %8\n"
    "}\n";

std::map<std::string, Tensor> everything_fixed() {
  return {{"a", tensor(std::vector<float>{0.5f, 1, 2}, {3})}, {"one", ones({})}};
}

TEST(PassManager, ListsThePassesInOrderCleanupFirst) {
  std::vector<std::string> names;
  for (const Pass& p : all_passes()) {
    names.push_back(p.name);
    EXPECT_EQ(p.level, names.size() <= 4 ? Level::O1 : Level::O2) << p.name;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"dce", "simplify", "cse", "constant_fold", "fold_batch_norm",
                                             "fuse_layer_norm", "fuse_epilogue", "fuse_conv_pool",
                                             "fuse_pool_gradient", "fuse_elementwise", "fuse_sum", "stream_updates"}));
  EXPECT_STREQ(to_string(Level::O0), "O0");
  EXPECT_STREQ(to_string(Level::O2), "O2");
}

TEST(PassManager, O0RunsNothing) {
  PassCase c(kEverything, everything_fixed());
  const std::string before = graph::to_text(c.g);
  EXPECT_TRUE(c.optimize(Level::O0).empty());
  EXPECT_EQ(graph::to_text(c.g), before);
}

TEST(PassManager, O1RunsRoundsUntilNothingChanges) {
  PassCase c(kEverything, everything_fixed());
  std::vector<Effect> log = c.optimize(Level::O1);
  EXPECT_EQ(graph::to_text(c.g),
            "graph @g(%x: f32[2,3], %a: f32[3], %one: f32[], %k0: f32[3]) {\n"
            "  %0 = abs(%x) : f32[2,3]        # m.cpp:2\n"
            "  %1 = add(%0, %k0) : f32[2,3]   # m.cpp:4\n"
            "  %2 = mul(%1, %1) : f32[2,3]    # m.cpp:9\n"
            "  return %2\n"
            "}\n");
  // Round 1 runs all four; round 2 removes the neg that simplifying bypassed; round 3
  // changes nothing and is not logged.
  std::vector<std::string> summary;
  for (const Effect& e : log) summary.push_back(str(e.pass, " ", e.nodes_before, "->", e.nodes_after));
  EXPECT_EQ(summary, (std::vector<std::string>{"dce 9->8", "simplify 8->6", "cse 6->5", "constant_fold 5->4",
                                               "dce 4->3"}));
  ASSERT_EQ(log.size(), 5u);
  EXPECT_EQ(details(log[0]), "removed %7 = relu(%x) (m.cpp:8)\n");
  EXPECT_EQ(details(log[1]),
            "simplified %2 = mul(%1, %one) (m.cpp:3) to %1 (x * 1 -> x)\n"
            "simplified %6 = neg(%5) (m.cpp:7) to %3 (neg(neg(x)) -> x)\n");
  EXPECT_EQ(details(log[2]), "merged %3 = add(%1, %0) (m.cpp:5) into %2 = add(%1, %0) (m.cpp:4)\n");
  EXPECT_EQ(details(log[3]), "folded %0 = exp(%a) (m.cpp:1) into a constant f32[3]\n");
  EXPECT_EQ(details(log[4]), "removed %2 = neg(%1) (m.cpp:6)\n");
  c.expect_same_values();
}

// Then the fusion passes: what the cleanup leaves is one element-wise group.
TEST(PassManager, O2RunsTheCleanupToo) {
  PassCase c(kEverything, everything_fixed());
  c.optimize(Level::O2);
  EXPECT_EQ(text_of(c.g),
            "graph @g(%x: f32[2,3], %a: f32[3], %one: f32[], %k0: f32[3]) {\n"
            "  %0 = fused_elementwise(%x, %k0) {program=\"r0=abs(in0); r1=add(r0,in1); r2=mul(r1,r1)\"} : f32[2,3] "
            "# m.cpp:9\n"
            "  return %0\n"
            "}\n");
  c.expect_same_values();
}

TEST(PassManager, AnErrorNamesThePassAndTheNode) {
  // Unverified text: the permute lacks its dims.
  PassCase c(
      "graph @g(%x: f32[2,3]) {\n"
      "  %0 = permute(%x) : f32[3,2]   # bad.cpp:9\n"
      "  return %0\n"
      "}\n");
  EXPECT_THROWS_WITH(GraphError, passes::optimize(c.g, Level::O1, c.ctx),
                     "optimizer pass 'simplify' failed on node 'permute' built at bad.cpp:9",
                     "missing attribute 'dims'");
}

TEST(PassManager, WorksWithoutKnowledgeOfInputs) {
  // A context with no callbacks: nothing is fixed and nothing folds, the rest runs.
  PassCase c(kEverything);
  Context bare;
  std::vector<Effect> log = passes::optimize(c.g, Level::O1, bare);
  EXPECT_EQ(graph::to_text(c.g),
            "graph @g(%x: f32[2,3], %a: f32[3], %one: f32[]) {\n"
            "  %0 = exp(%a) : f32[3]           # m.cpp:1\n"
            "  %1 = abs(%x) : f32[2,3]         # m.cpp:2\n"
            "  %2 = mul(%1, %one) : f32[2,3]   # m.cpp:3\n"
            "  %3 = add(%2, %0) : f32[2,3]     # m.cpp:4\n"
            "  %4 = add(%1, %0) : f32[2,3]     # m.cpp:5\n"
            "  %5 = mul(%3, %4) : f32[2,3]     # m.cpp:9\n"
            "  return %5\n"
            "}\n");
  c.expect_same_values();
}

}  // namespace
}  // namespace baton::passes::testing
