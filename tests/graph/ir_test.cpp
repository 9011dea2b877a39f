// Graph IR: symbolic dims, building graphs, use lists, editing, cloning.
#include <gtest/gtest.h>

#include <set>
#include <sstream>

#include "graph/sample_graphs.h"
#include "graph/text.h"
#include "harness/op_harness.h"
#include "trace/verify.h"

namespace baton::graph::testing {
namespace {

using trace::verify;

std::string printed(const auto& x) {
  std::ostringstream os;
  os << x;
  return os.str();
}

TEST(GraphDim, KnownAndSymbolicSizes) {
  Dim batch("batch"), n(784), zero(0);
  EXPECT_TRUE(batch.is_symbolic());
  EXPECT_TRUE(n.is_static());
  EXPECT_EQ(n.value(), 784);
  EXPECT_EQ(zero.value(), 0);
  EXPECT_EQ(batch.symbol(), "batch");
  EXPECT_EQ(Dim("batch"), batch);
  EXPECT_NE(Dim("seq"), batch);
  EXPECT_NE(Dim(3), Dim(4));
  EXPECT_THROWS_WITH(ShapeError, batch.value(), "'batch' is symbolic");
  EXPECT_THROWS_WITH(ValueError, Dim("1st"), "invalid dim symbol '1st'");
  EXPECT_THROWS_WITH(ValueError, Dim(""), "invalid dim symbol");
  EXPECT_THROWS_WITH(ValueError, Dim(-1), "must be >= 0");
}

TEST(GraphDim, SymShapePrintsComparesAndConverts) {
  SymShape s{"batch", 784};
  EXPECT_EQ(printed(s), "[batch,784]");
  EXPECT_EQ(printed(SymShape{}), "[]");
  EXPECT_FALSE(s.is_static());
  EXPECT_EQ(s, (SymShape{"batch", 784}));
  EXPECT_NE(s, (SymShape{"batch", 785}));
  EXPECT_NE(s, (SymShape{"batch"}));
  SymShape fixed(Shape{2, 3});
  EXPECT_TRUE(fixed.is_static());
  EXPECT_EQ(fixed.to_shape(), (Shape{2, 3}));
  EXPECT_EQ(SymShape{}.to_shape(), Shape{});
  EXPECT_THROWS_WITH(ShapeError, s.to_shape(), "[batch,784]", "symbolic");
  EXPECT_EQ(printed(TensorType{i64, {"n", 1}}), "i64[n,1]");
}

TEST(GraphIr, BuildsValuesNodesAndUses) {
  Graph g = mlp_graph();
  ASSERT_EQ(g.num_nodes(), 2u);
  Value* x = g.input(0);
  Node* mm = g.nodes()[0].get();
  Node* relu = g.nodes()[1].get();
  EXPECT_EQ(x->name(), "x");
  EXPECT_EQ(x->producer(), nullptr);
  EXPECT_EQ(mm->op_name(), "matmul");
  EXPECT_EQ(mm->op(), ops::find_op("matmul"));
  EXPECT_EQ(mm->output()->producer(), mm);
  EXPECT_EQ(mm->output()->output_index(), 0);
  EXPECT_EQ(x->uses(), (std::vector<Use>{{mm, 0}}));
  EXPECT_EQ(g.input(1)->uses(), (std::vector<Use>{{mm, 1}}));
  EXPECT_EQ(mm->output()->uses(), (std::vector<Use>{{relu, 0}}));
  EXPECT_EQ(g.outputs(), std::vector<Value*>{relu->output()});
  EXPECT_TRUE(g.is_output(relu->output()));
  // ids are unique within the graph
  std::set<int64_t> ids{g.input(0)->id(), g.input(1)->id(), mm->output()->id(), relu->output()->id()};
  EXPECT_EQ(ids.size(), 4u);
  EXPECT_NO_THROW(verify(g));
}

TEST(GraphIr, MoveBeforePutsAReplacementWhereTheOldNodeWas) {
  Graph g = mlp_graph();
  Node* mm = g.nodes()[0].get();
  Node* scaled = g.add_node("neg", {g.input(0)}, {g.input(0)->type});
  g.move_before(scaled, mm);
  EXPECT_EQ(g.nodes()[0].get(), scaled);
  EXPECT_EQ(g.nodes()[1].get(), mm);
  EXPECT_TRUE(g.is_topologically_sorted());
  EXPECT_THROWS_WITH(ValueError, g.move_before(scaled, nullptr), "not in this graph");
}

TEST(GraphIr, NodeRemembersTheCallersSourceLine) {
  Graph g;
  Value* x = g.add_input("x", {f32, {2}});
  Node* n = g.add_node("relu", {x}, {{f32, {2}}});  // this line
  EXPECT_EQ(n->loc.file, "ir_test.cpp");
  EXPECT_EQ(n->loc.line, __LINE__ - 2);
}

TEST(GraphIr, MultipleOutputsAndUnknownOps) {
  Graph g = pool_graph();
  Node* pool = g.nodes()[0].get();
  ASSERT_EQ(pool->num_outputs(), 2u);
  EXPECT_EQ(pool->output(1)->dtype(), i64);
  EXPECT_EQ(pool->output(1)->output_index(), 1);
  EXPECT_EQ(pool->attrs.ints("kernel"), (Ints{2, 2}));
  Node* odd = g.add_node("not_an_op", {pool->output(0)}, {{f32, {1}}});
  EXPECT_EQ(odd->op(), nullptr);
  EXPECT_EQ(odd->op_name(), "not_an_op");
}

TEST(GraphIr, RejectsNamesTheTextFormCannotHold) {
  Graph g;
  EXPECT_THROWS_WITH(ValueError, g.add_input("12", {f32, {}}), "invalid value name '12'");
  EXPECT_THROWS_WITH(ValueError, g.add_input("a b", {f32, {}}), "invalid value name");
  EXPECT_THROWS_WITH(ValueError, g.add_node("bad op", {}, {}), "invalid op name 'bad op'");
  EXPECT_THROWS_WITH(ValueError, g.add_node("return", {}, {}), "invalid op name 'return'");
  EXPECT_THROWS_WITH(ValueError, Graph("has space"), "invalid graph name");
  EXPECT_NO_THROW(g.add_input("fc1.weight", {f32, {}}));
  EXPECT_NO_THROW(g.add_input("0.bias", {f32, {}}));
}

TEST(GraphIr, EraseNodeNeedsNoUses) {
  Graph g = mlp_graph();
  Node* mm = g.nodes()[0].get();
  Node* relu = g.nodes()[1].get();
  EXPECT_THROWS_WITH(ValueError, g.erase_node(mm), "cannot erase node 'matmul'", "still used");
  EXPECT_THROWS_WITH(ValueError, g.erase_node(relu), "cannot erase node 'relu'");  // a graph output
  g.set_outputs({mm->output()});
  g.erase_node(relu);
  EXPECT_EQ(g.num_nodes(), 1u);
  EXPECT_TRUE(mm->output()->uses().empty());
  g.set_outputs({});
  g.erase_node(mm);
  EXPECT_TRUE(g.input(0)->uses().empty());
  EXPECT_EQ(g.num_nodes(), 0u);
  EXPECT_NO_THROW(verify(g));
}

TEST(GraphIr, ReplaceAllUsesRewiresNodesAndOutputs) {
  Graph g = mlp_graph();
  Value* x = g.input(0);
  Node* mm = g.nodes()[0].get();
  Node* relu = g.nodes()[1].get();
  Node* exp = g.add_node("exp", {mm->output()}, {{f32, {"batch", 512}}}, {}, Location("mlp.cpp", 14));
  g.set_outputs({relu->output(), mm->output()});
  g.replace_all_uses(mm->output(), x);  // types differ: the IR leaves that to the caller
  EXPECT_EQ(relu->input(0), x);
  EXPECT_EQ(exp->input(0), x);
  EXPECT_EQ(g.outputs()[1], x);
  EXPECT_TRUE(mm->output()->uses().empty());
  EXPECT_EQ(x->uses().size(), 3u);
  g.erase_node(mm);
  // The graph is well formed, but relu and exp now compute on x: their declared types lie.
  EXPECT_THROWS_WITH(ValueError, verify(g), "(2 problems)",
                     "result 0 (%0) is declared f32[batch,512] but 'relu' gives f32[batch,784]");
}

TEST(GraphIr, TopologicalOrderCheck) {
  Graph g = mlp_graph();
  EXPECT_TRUE(g.is_topologically_sorted());
  g.nodes()[0]->set_input(0, g.nodes()[1]->output());  // matmul reads relu's result
  EXPECT_FALSE(g.is_topologically_sorted());
  EXPECT_TRUE(g.input(0)->uses().empty());
}

TEST(GraphIr, CloneIsDeepAndIndependent) {
  for (Graph& g : all_sample_graphs()) {
    Graph c = g.clone();
    EXPECT_EQ(to_text(c), to_text(g));
    EXPECT_NO_THROW(verify(c, {.allow_unknown_ops = true}));
    for (size_t i = 0; i < g.num_nodes(); ++i) {
      EXPECT_NE(c.nodes()[i].get(), g.nodes()[i].get());
      EXPECT_EQ(c.nodes()[i]->output(0)->id(), g.nodes()[i]->output(0)->id());
      for (size_t s = 0; s < g.nodes()[i]->subgraphs.size(); ++s)
        EXPECT_NE(c.nodes()[i]->subgraphs[s], g.nodes()[i]->subgraphs[s]);
    }
  }
  Graph g = if_graph();
  Graph c = g.clone();
  c.nodes()[0]->subgraphs[0]->set_name("changed");
  c.input(0)->set_name("renamed");
  EXPECT_EQ(g.nodes()[0]->subgraphs[0]->name(), "then_branch");
  EXPECT_EQ(g.input(0)->name(), "c");
  EXPECT_EQ(g.input(0)->uses().size(), 1u);
  EXPECT_EQ(g.input(0)->uses()[0].user, g.nodes()[0].get());
}

TEST(GraphIr, ValueNamesNumberUnnamedValuesInOrder) {
  Graph g = reduce_graph();
  ValueNames names(g);
  EXPECT_EQ(names(g.input(0)), "%a");
  EXPECT_EQ(names(g.input(1)), "%0");
  EXPECT_EQ(names(g.nodes()[0]->output()), "%total");
  EXPECT_EQ(names(g.nodes()[1]->output()), "%1");
  EXPECT_EQ(names(g.nodes()[2]->output()), "%2");
  Graph other = mlp_graph();
  EXPECT_EQ(names(other.input(0)), str("%?", other.input(0)->id()));
}

}  // namespace
}  // namespace baton::graph::testing
