// Graphviz export: the expected shapes and labels, and `dot` accepts the output.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "graph/sample_graphs.h"
#include "graph/text.h"

namespace baton::graph::testing {
namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(GraphDot, LabelsInputsNodesOutputsAndEdges) {
  std::string dot = to_dot(mlp_graph());
  EXPECT_TRUE(dot.starts_with("digraph \"mlp\" {\n")) << dot;
  EXPECT_TRUE(dot.ends_with("}\n"));
  EXPECT_TRUE(contains(dot, "g0_in0 [shape=ellipse")) << dot;
  EXPECT_TRUE(contains(dot, "label=\"%x\\nf32[batch,784]\"")) << dot;
  EXPECT_TRUE(contains(dot, "g0_n0 [shape=box, label=\"matmul\\n%0: f32[batch,512]\", tooltip=\"mlp.cpp:12\"]"))
      << dot;
  EXPECT_TRUE(contains(dot, "g0_out0 [shape=doubleoctagon")) << dot;
  EXPECT_TRUE(contains(dot, "g0_in0 -> g0_n0 [label=\"f32[batch,784]\"]")) << dot;
  EXPECT_TRUE(contains(dot, "g0_n0 -> g0_n1 [label=\"f32[batch,512]\"]")) << dot;
  EXPECT_TRUE(contains(dot, "g0_n1 -> g0_out0 [label=\"f32[batch,512]\"]")) << dot;
}

TEST(GraphDot, MultipleOutputsAndSubgraphs) {
  std::string pool = to_dot(pool_graph());
  EXPECT_TRUE(contains(pool, "g0_n0 -> g0_out1 [label=\"1: i64[batch,3,4,4]\"]")) << pool;
  std::string cf = to_dot(if_graph());
  EXPECT_TRUE(contains(cf, "subgraph cluster_0 {")) << cf;
  EXPECT_TRUE(contains(cf, "label=\"@then_branch\"")) << cf;
  EXPECT_TRUE(contains(cf, "g0_n0 -> g1_in0 [style=dashed")) << cf;
  EXPECT_TRUE(contains(cf, "color=red")) << cf;  // "If" is not a registered op yet
}

TEST(GraphDot, GraphvizAcceptsTheOutput) {
  if (!std::filesystem::exists("/usr/bin/dot")) GTEST_SKIP() << "graphviz is not installed";
  auto dir = std::filesystem::temp_directory_path();
  int k = 0;
  for (Graph& g : all_sample_graphs()) {
    auto path = dir / ("baton_graph_dot_test_" + std::to_string(k++) + ".dot");
    std::ofstream(path) << to_dot(g);
    std::string cmd = "/usr/bin/dot -Tsvg '" + path.string() + "' -o /dev/null 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << to_dot(g);
    std::filesystem::remove(path);
  }
}

}  // namespace
}  // namespace baton::graph::testing
