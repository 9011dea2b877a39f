// The verifier: valid graphs pass; each broken invariant is reported, all at once, with
// the graph, the node and its source line.
#include <gtest/gtest.h>

#include "graph/sample_graphs.h"
#include "graph/text.h"
#include "harness/op_harness.h"

namespace baton::graph::testing {
namespace {

TEST(GraphVerify, SampleGraphsAreValid) {
  for (Graph& g : all_sample_graphs()) EXPECT_NO_THROW(verify(g, {.allow_unknown_ops = true})) << g;
  EXPECT_NO_THROW(verify(mlp_graph()));
  EXPECT_NO_THROW(verify(reduce_graph()));
  EXPECT_NO_THROW(verify(pool_graph()));
}

TEST(GraphVerify, UseBeforeDefinition) {
  Graph g = mlp_graph();
  g.nodes()[0]->set_input(0, g.nodes()[1]->output());
  EXPECT_THROWS_WITH(ValueError, verify(g), "graph @mlp is invalid (1 problem)",
                     "node %0 = matmul (mlp.cpp:12): input 0 uses %1 before its definition");
}

TEST(GraphVerify, UnknownOpUnlessAllowed) {
  Graph g = mlp_graph();
  Node* n = g.add_node("frobnicate", {g.input(0)}, {{f32, {"batch", 784}}}, {}, Location("mlp.cpp", 20));
  EXPECT_THROWS_WITH(ValueError, verify(g),
                     "node %2 = frobnicate (mlp.cpp:20): unknown op 'frobnicate' (not in the op registry)");
  EXPECT_NO_THROW(verify(g, {.allow_unknown_ops = true}));
  EXPECT_EQ(n->op(), nullptr);
}

TEST(GraphVerify, OutputCountMustMatchTheOp) {
  Graph g;
  Value* x = g.add_input("x", {f32, {1, 1, 4, 4}});
  g.add_node("relu", {x}, {{f32, {1, 1, 4, 4}}, {f32, {1, 1, 4, 4}}}, {}, Location("m.cpp", 3));
  g.add_node("max_pool2d", {x}, {{f32, {1, 1, 2, 2}}}, {}, Location("m.cpp", 4));
  EXPECT_THROWS_WITH(ValueError, verify(g), "(2 problems)",
                     "node %0, %1 = relu (m.cpp:3): has 2 outputs but op 'relu' has 1",
                     "node %2 = max_pool2d (m.cpp:4): has 1 outputs but op 'max_pool2d' has 2");
}

TEST(GraphVerify, DanglingOutputsAndForeignInputs) {
  Graph g = mlp_graph();
  Graph other = mlp_graph();
  g.set_outputs({g.nodes()[1]->output(), other.input(0), nullptr});
  g.add_node("relu", {other.input(1)}, {{f32, {784, 512}}}, {}, Location("mlp.cpp", 30));
  EXPECT_THROWS_WITH(ValueError, verify(g), "(3 problems)",
                     str("graph @mlp: output 1 (%?", other.input(0)->id(), ") is not defined in this graph"),
                     "graph @mlp: output 2 is null",
                     str("node %2 = relu (mlp.cpp:30): input 0 (%?", other.input(1)->id(),
                         ") is not defined in this graph"));
}

TEST(GraphVerify, DuplicateNames) {
  Graph g = mlp_graph();
  g.nodes()[1]->output()->set_name("x");
  EXPECT_THROWS_WITH(ValueError, verify(g), "graph @mlp: more than one value is named %x");
}

TEST(GraphVerify, ProblemsInsideSubgraphsNameTheirPath) {
  Graph g = if_graph();
  Graph& then_g = *g.nodes()[0]->subgraphs[0];
  then_g.add_node("relu", {then_g.input(0)}, {}, {}, Location("cf.cpp", 8));
  EXPECT_THROWS_WITH(ValueError, verify(g, {.allow_unknown_ops = true}),
                     "graph @then_branch (subgraph 0 of node %0 = If (cf.cpp:3) in graph @branchy), "
                     "node relu (cf.cpp:8): has 0 outputs but op 'relu' has 1");
  EXPECT_THROWS_WITH(ValueError, verify(g), "unknown op 'If'", "(2 problems)");
}

TEST(GraphVerify, SubgraphsAreClosed) {
  // A branch reading a value of the enclosing graph is reported: pass it as an input.
  Graph g = if_graph();
  Graph& else_g = *g.nodes()[0]->subgraphs[1];
  else_g.nodes()[0]->set_input(0, g.input(1));
  EXPECT_THROWS_WITH(ValueError, verify(g, {.allow_unknown_ops = true}), "graph @else_branch",
                     "input 0 (%?", "is not defined in this graph");
  else_g.nodes()[0]->set_input(0, else_g.input(0));
  EXPECT_NO_THROW(verify(g, {.allow_unknown_ops = true}));
}

TEST(GraphVerify, ParsedTextIsVerified) {
  Graph g = parse_graph(
      "graph @f(%x: f32[2]) {\n"
      "  %0 = relu(%x) : f32[2]   # a.cpp:1\n"
      "  %1 = nope(%0) : f32[2]   # a.cpp:2\n"
      "  return %1\n"
      "}\n");
  EXPECT_THROWS_WITH(ValueError, verify(g), "node %1 = nope (a.cpp:2): unknown op 'nope'");
}

}  // namespace
}  // namespace baton::graph::testing
