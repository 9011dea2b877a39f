// Every op-harness case (tests/harness) through ONNX: built as a static graph, saved as
// standard ONNX, passed by ONNX's own checker, loaded back and run, it gives the eager
// values. The few ops with no standard ONNX form are listed below with the reason, and
// their cases must fail to save with a GraphError naming them; a coverage test keeps that
// list honest (every registered op round-trips in some case or is listed).
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <map>
#include <set>

#include "baton/onnx.h"
#include "dispatch/registry.h"
#include "harness/op_harness.h"
#include "trace/builder.h"

namespace baton::testing {
namespace {

// Ops that have no standard ONNX form, and why. A case whose graph holds one must fail to
// save with a GraphError naming it.
const std::map<std::string, std::string>& not_standard_onnx() {
  static const std::map<std::string, std::string> table = {
      {"sgd_update", "updates parameters in place; an ONNX graph is a pure function"},
      {"adam_update", "updates parameters and moments in place"},
      {"assign", "writes a variable in place"},
      {"dropout", "draws a random mask, which another runtime draws differently (eval mode has no dropout node)"},
      // Steps only the optimizer's fusion passes make, which a plain save does not run;
      // optimized saves write them in the ai.baton domain.
      {"fused_elementwise", "a fused plan step"},
      {"conv2d_fused", "a fused plan step"},
      {"linear_fused", "a fused plan step"},
      {"if", "control flow: If export is not written yet"},
      {"loop", "control flow: Loop export is not written yet"},
      // Gradient steps that only graph autodiff makes (no case's forward graph holds one);
      // ONNX has no op for them and they are not composed yet.
      {"batch_norm_backward", "gradient step, not composed yet"},
      {"grid_sample_backward", "gradient step, not composed yet"},
      {"roi_align_backward", "gradient step, not composed yet"},
      {"max_pool2d_backward", "gradient step, not composed yet"},
      {"max_pool2d_window_backward", "gradient step, not composed yet"},
  };
  return table;
}

// A case's op as a static graph: placeholders in0, in1... fed with the case's inputs.
struct CaseGraph {
  Graph graph{"op"};
  Tensor output;
  std::vector<std::pair<std::string, Tensor>> feeds;
};

std::unique_ptr<CaseGraph> build(const OpCase& c) {
  auto built = std::make_unique<CaseGraph>();
  Inputs in = c.make_inputs(), placeholders;
  for (size_t i = 0; i < in.size(); ++i) {
    std::vector<SymDim> dims(in[i].shape().begin(), in[i].shape().end());
    placeholders.push_back(built->graph.placeholder(in[i].dtype(), dims, str("in", i)));
    built->feeds.emplace_back(str("in", i), in[i]);
  }
  built->output = c.fn(placeholders);
  built->graph.set_outputs({built->output});
  return built;
}

// The op names of the graph's nodes, in order.
std::vector<std::string> node_ops(const Graph& g) {
  std::vector<std::string> ops;
  for (const auto& node : GraphAccess::builder(g).ir().nodes()) ops.push_back(node->op_name());
  return ops;
}

// The first node whose op is listed as having no standard ONNX form ("" when none is).
std::string first_unexportable(const Graph& g) {
  for (const std::string& op : node_ops(g))
    if (not_standard_onnx().count(op)) return op;
  return "";
}

// ONNX's checker and its type-checking shape inference (the checker's full check): every
// node's input types are ones its op takes, and the declared output types are inferred.
::testing::AssertionResult passes_onnx_checks(const std::string& bytes) {
  ::onnx::ModelProto proto;
  if (!proto.ParseFromString(bytes)) return ::testing::AssertionFailure() << "not a ModelProto";
  try {
    ::onnx::checker::check_model(proto);
    ::onnx::shape_inference::InferShapes(proto, ::onnx::OpSchemaRegistry::Instance(),
                                         ::onnx::ShapeInferenceOptions(/*check_type_val=*/true, /*strict_mode_val=*/1));
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "ONNX refuses the export: " << e.what();
  }
  return ::testing::AssertionSuccess();
}

// Loads the model and runs it on the feeds it declares as inputs.
Tensor run_loaded(const std::string& bytes, const CaseGraph& built) {
  onnx::Model m = onnx::load_bytes(bytes, "op.onnx");
  std::vector<std::pair<std::string, Tensor>> feeds;
  for (const onnx::ValueInfo& info : m.inputs())
    for (const auto& [name, t] : built.feeds)
      if (name == info.name) feeds.emplace_back(name, t);
  std::vector<Tensor> out = m.run(feeds);
  EXPECT_EQ(out.size(), 1u);
  return out.at(0);
}

void expect_matches(const Tensor& got, const Tensor& expected, const OpCase& c) {
  EXPECT_EQ(got.dtype(), expected.dtype());
  EXPECT_ALL_CLOSE(got, expected, c.atol, c.rtol);
}

class OnnxRoundTrip : public ::testing::TestWithParam<OpCase> {};

TEST_P(OnnxRoundTrip, StandardOnnxGivesEagerValues) {
  const OpCase& c = GetParam();
  std::unique_ptr<CaseGraph> built = build(c);
  ASSERT_TRUE(built->output.is_symbolic()) << "the op ran instead of building a node";
  if (const std::string op = first_unexportable(built->graph); !op.empty()) {
    EXPECT_THROWS_WITH(GraphError, onnx::save_bytes(built->graph), "onnx.save", op + " (");
    return;
  }
  const std::string bytes = onnx::save_bytes(built->graph);
  ASSERT_TRUE(passes_onnx_checks(bytes));
  expect_matches(run_loaded(bytes, *built), c.fn(c.make_inputs()), c);
}

// The optimized form (fused steps in the ai.baton domain) reads back the same.
TEST_P(OnnxRoundTrip, OptimizedGivesEagerValues) {
  const OpCase& c = GetParam();
  std::unique_ptr<CaseGraph> built = build(c);
  if (const std::string op = first_unexportable(built->graph); !op.empty()) GTEST_SKIP() << op << " does not export";
  const std::string bytes = onnx::save_bytes(built->graph, {.optimized = true});
  expect_matches(run_loaded(bytes, *built), c.fn(c.make_inputs()), c);
}

INSTANTIATE_TEST_SUITE_P(AllOps, OnnxRoundTrip, ::testing::ValuesIn(all_cases()), case_name);

// Every registered op is a node of some case that round-trips, or is listed above.
TEST(OnnxRoundTripCoverage, EveryOpRoundTripsOrIsListed) {
  std::set<std::string> exercised;
  for (const OpCase& c : all_cases()) {
    std::unique_ptr<CaseGraph> built = build(c);
    if (!first_unexportable(built->graph).empty()) continue;
    for (const std::string& op : node_ops(built->graph)) exercised.insert(op);
  }
  std::vector<std::string> missing;
  for (const ops::OpDef* op : ops::all_ops())
    if (!exercised.count(op->name) && !not_standard_onnx().count(op->name)) missing.push_back(op->name);
  EXPECT_TRUE(missing.empty()) << "ops no round-tripping case exercises: " << ::testing::PrintToString(missing);
  for (const auto& [op, reason] : not_standard_onnx()) EXPECT_NE(ops::find_op(op), nullptr) << op << " is not an op";
}

}  // namespace
}  // namespace baton::testing
