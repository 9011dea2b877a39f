// Every op-harness case (tests/harness) through ONNX: built as a static graph, saved as
// standard ONNX, passed by ONNX's own checker, loaded back and run, it gives the eager
// values; so does each case's gradient graph, and the optimized form. The few ops with no
// standard ONNX form are listed below with the reason, and graphs holding them must fail
// to save with a GraphError naming the op and the user's line; a coverage test keeps that
// list honest (every registered op round-trips in some case's graph or is listed).
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
      {"random_uniform", "draws from baton's generator, which another runtime's RandomUniform does not reproduce"},
      {"random_normal", "draws from baton's generator, which another runtime's RandomNormal does not reproduce"},
      {"random_int", "draws from baton's generator; ONNX has no random integers"},
      // Steps only the optimizer's fusion passes make, which a plain save does not run;
      // optimized saves write them in the ai.baton domain.
      {"fused_elementwise", "a fused plan step"},
      {"fused_elementwise_sum", "a fused plan step"},
      {"fused_elementwise_max", "a fused plan step"},
      {"fused_elementwise_min", "a fused plan step"},
      {"fused_elementwise_and_sum", "a fused plan step"},
      {"fused_elementwise_and_max", "a fused plan step"},
      {"fused_elementwise_and_min", "a fused plan step"},
      {"fused_elementwise_prod", "a fused plan step"},
      {"fused_elementwise_and_prod", "a fused plan step"},
      {"conv2d_fused", "a fused plan step"},
      {"conv2d_max_pool2d", "a fused plan step"},
      {"conv2d_max_pool2d_values", "a fused plan step"},
      {"linear_fused", "a fused plan step"},
      // Gradient steps that only graph autodiff makes (no case's forward graph holds one);
      // ONNX has no op for them and they are not composed yet.
      {"grid_sample_backward", "gradient step, not composed yet"},
      {"roi_align_backward", "gradient step, not composed yet"},
      {"resize_backward", "gradient step, not composed yet"},
      // Its ONNX form, ai.onnx.ml's LabelEncoder, holds the vocabulary as an attribute: a
      // constant vocabulary exports (onnx_strings_test.cpp), a fed one (as here) cannot.
      {"vocabulary_index", "a string lookup whose vocabulary is fed, not a constant"},
  };
  return table;
}

// A case's op as a static graph: placeholders in0, in1... fed with the case's inputs. Its
// outputs are the op's result, or (gradient) the gradients of sum(result * r) for the
// inputs the harness differentiates, as tests/trace/modes_test.cpp takes them.
struct CaseGraph {
  Graph graph{"op"};
  std::vector<Tensor> outputs;
  std::vector<std::pair<std::string, Tensor>> feeds;
};

std::vector<size_t> differentiated_inputs(const OpCase& c, const Inputs& in) {
  std::vector<size_t> which;
  for (size_t i = 0; i < in.size(); ++i) {
    const bool listed = c.grad_inputs.empty() ? in[i].dtype() == f64
                                              : std::count(c.grad_inputs.begin(), c.grad_inputs.end(), int(i)) > 0;
    if (listed) which.push_back(i);
  }
  return which;
}

// The weights r of the gradient's loss, shaped as the case's result.
Tensor loss_weights(const OpCase& c) { return uniform(c.fn(c.make_inputs()).shape(), -1, 1, 7); }

Inputs gradients(const OpCase& c, const Inputs& in, const std::vector<size_t>& which) {
  Inputs wrt;
  for (size_t i : which) wrt.push_back(in[i]);
  return grad({(c.fn(in) * loss_weights(c)).sum()}, wrt);
}

// The case's inputs, f64 ones as f32 when `f32` (the harness's second pass).
Inputs case_inputs(const OpCase& c, bool f32_inputs) {
  Inputs in = c.make_inputs();
  if (f32_inputs)
    for (Tensor& t : in)
      if (t.dtype() == f64) t = t.to(f32);
  return in;
}

std::unique_ptr<CaseGraph> build(const OpCase& c, bool gradient = false, bool f32_inputs = false) {
  auto built = std::make_unique<CaseGraph>();
  Inputs in = case_inputs(c, f32_inputs), placeholders;
  for (size_t i = 0; i < in.size(); ++i) {
    std::vector<SymDim> dims(in[i].shape().begin(), in[i].shape().end());
    placeholders.push_back(built->graph.placeholder(in[i].dtype(), dims, str("in", i)));
    built->feeds.emplace_back(str("in", i), in[i]);
  }
  built->outputs = gradient ? gradients(c, placeholders, differentiated_inputs(c, in)) : Inputs{c.fn(placeholders)};
  built->graph.set_outputs(built->outputs);
  return built;
}

// What eager autograd gives for the gradient graph's outputs.
Inputs eager_gradients(const OpCase& c) {
  Inputs leaves = c.make_inputs();
  const std::vector<size_t> which = differentiated_inputs(c, leaves);
  for (size_t i : which) leaves[i].requires_grad_();
  return gradients(c, leaves, which);
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
std::vector<Tensor> run_loaded(const std::string& bytes, const CaseGraph& built) {
  onnx::Model m = onnx::load_bytes(bytes, "op.onnx");
  std::vector<std::pair<std::string, Tensor>> feeds;
  for (const onnx::ValueInfo& info : m.inputs())
    for (const auto& [name, t] : built.feeds)
      if (name == info.name) feeds.emplace_back(name, t);
  return m.run(feeds);
}

void expect_matches(const std::vector<Tensor>& got, const std::vector<Tensor>& expected, double atol, double rtol) {
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].dtype(), expected[i].dtype()) << "output " << i;
    EXPECT_ALL_CLOSE(got[i], expected[i], atol, rtol) << "output " << i;
  }
}

// Saves the graph as standard ONNX and checks it reads back to `expected`; or, when the
// graph holds an op of the table above, that saving fails naming it.
void expect_standard_round_trip(const CaseGraph& built, const std::vector<Tensor>& expected, double atol, double rtol) {
  if (const std::string op = first_unexportable(built.graph); !op.empty()) {
    EXPECT_THROWS_WITH(GraphError, onnx::save_bytes(built.graph), "onnx.save", op + " (", "_test.cpp:");
    return;
  }
  const std::string bytes = onnx::save_bytes(built.graph);
  ASSERT_TRUE(passes_onnx_checks(bytes));
  expect_matches(run_loaded(bytes, built), expected, atol, rtol);
}

void standard_round_trip(const OpCase& c) {
  std::unique_ptr<CaseGraph> built = build(c);
  ASSERT_TRUE(built->outputs[0].is_symbolic()) << "the op ran instead of building a node";
  expect_standard_round_trip(*built, {c.fn(c.make_inputs())}, c.atol, c.rtol);
}

// In f32, as models are mostly exported, within the harness's f32 tolerance (the loaded
// graph may run other kernels, oneDNN's among them, than eager f32 did).
void f32_round_trip(const OpCase& c) {
  if (!c.check_f32) return;
  expect_standard_round_trip(*build(c, false, /*f32_inputs=*/true), {c.fn(case_inputs(c, true))}, 1e-4, 1e-4);
}

// The gradient graph (the backward ops) exports too; tolerances as modes_test's graph
// gradients, whose sums run in another order than eager autograd's.
void gradient_round_trip(const OpCase& c) {
  if (!c.check_grad) return;
  expect_standard_round_trip(*build(c, /*gradient=*/true), eager_gradients(c), 1e-9, 1e-7);
}

// The optimized form (fused steps in the ai.baton domain) reads back the same.
void optimized_round_trip(const OpCase& c) {
  std::unique_ptr<CaseGraph> built = build(c);
  if (!first_unexportable(built->graph).empty()) return;
  const std::string bytes = onnx::save_bytes(built->graph, {.optimized = true});
  expect_matches(run_loaded(bytes, *built), {c.fn(c.make_inputs())}, c.atol, c.rtol);
}

// One test per case (each ctest process pays the start of the library and of ONNX's
// schemas), the four forms inside.
class OnnxRoundTrip : public ::testing::TestWithParam<OpCase> {};

TEST_P(OnnxRoundTrip, GivesEagerValues) {
  const OpCase& c = GetParam();
  for (const auto& [form, check] : {std::pair{"standard ONNX", &standard_round_trip}, {"f32", &f32_round_trip},
                                    {"gradient graph", &gradient_round_trip}, {"optimized", &optimized_round_trip}}) {
    SCOPED_TRACE(form);
    check(c);
  }
}

INSTANTIATE_TEST_SUITE_P(AllOps, OnnxRoundTrip, ::testing::ValuesIn(all_cases()), case_name);

// Every registered op is a node of some case's graph (or gradient graph) that round-trips,
// or is listed above.
TEST(OnnxRoundTripCoverage, EveryOpRoundTripsOrIsListed) {
  std::set<std::string> exercised;
  for (const OpCase& c : all_cases()) {
    for (bool gradient : {false, true}) {
      if (gradient && !c.check_grad) continue;
      std::unique_ptr<CaseGraph> built = build(c, gradient);
      if (!first_unexportable(built->graph).empty()) continue;
      for (const std::string& op : node_ops(built->graph)) exercised.insert(op);
    }
  }
  std::vector<std::string> missing;
  for (const ops::OpDef* op : ops::all_ops())
    if (!exercised.count(op->name) && !not_standard_onnx().count(op->name)) missing.push_back(op->name);
  EXPECT_TRUE(missing.empty()) << "ops no round-tripping case exercises: " << ::testing::PrintToString(missing);
  for (const auto& [op, reason] : not_standard_onnx()) EXPECT_NE(ops::find_op(op), nullptr) << op << " is not an op";
}

}  // namespace
}  // namespace baton::testing
