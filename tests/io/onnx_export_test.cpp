// ONNX export: models and ops written by onnx::save pass ONNX's own checker and, read back
// by onnx::load, give the outputs the original graph gives.
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "baton/baton.h"
#include "baton/onnx.h"

namespace baton {
namespace {

// Runs the graph's outputs on `x` as built, and as exported and re-imported.
std::pair<std::vector<Tensor>, std::vector<Tensor>> round_trip(Graph& g, const Tensor& placeholder,
                                                               const std::vector<Tensor>& outputs, const Tensor& x) {
  g.set_outputs(outputs);
  Session session(g);
  std::vector<Tensor> want = session.run(outputs, {{placeholder, x}});
  const std::string bytes = onnx::save_bytes(g);
  ::onnx::ModelProto proto;
  EXPECT_TRUE(proto.ParseFromString(bytes));
  EXPECT_NO_THROW(::onnx::checker::check_model(proto)) << "the ONNX checker refuses the export";
  onnx::Model m = onnx::load_bytes(bytes, "exported.onnx");
  return {want, m.run({x})};
}

void expect_close(const std::vector<Tensor>& want, const std::vector<Tensor>& got, double tol) {
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    onnx::Comparison c = onnx::compare(got[i], want[i], {.rtol = tol, .atol = tol});
    EXPECT_TRUE(c.ok()) << "output " << i << ": " << c.problem;
  }
}

TEST(OnnxExport, ModelsRoundTripInEvalMode) {
  manual_seed(3);
  struct Case {
    std::shared_ptr<nn::Module> model;
    Shape input;
  };
  for (Case& k : std::vector<Case>{{nn::mnist_mlp(), {3, 1, 28, 28}}, {nn::mnist_cnn(), {3, 1, 28, 28}},
                                   {nn::resnet18(10), {2, 3, 64, 64}}}) {
    k.model->eval();
    Graph g;
    Tensor x = g.placeholder(f32, {"batch", k.input[1], k.input[2], k.input[3]}, "x");
    Tensor y = k.model->forward(x);
    auto [want, got] = round_trip(g, x, {y}, randn(k.input));
    // The same kernels run the same ops; folding batch norm into the convolutions (which
    // the import's plan does) reorders float sums: 1e-4.
    expect_close(want, got, 1e-4);
  }
}

TEST(OnnxExport, OpsRoundTrip) {
  Graph g;
  Tensor x = g.placeholder(f32, {"n", 4, 6}, "x");
  Tensor idx = tensor<int64_t>({2, 0, 1});
  std::vector<Tensor> outs = {
      softmax(x, -1),
      log_softmax(x, 1),
      sum(x, {1}, true),
      max(x, {2}),
      x.permute({0, 2, 1}),
      slice(x, 2, 1, 5, 2),
      cat({x, x * 2.0f}, 1),
      x.unsqueeze(1).squeeze(1),
      leaky_relu(x, 0.2),
      elu(x, 0.5),
      clamp(x, -0.5, 0.5),
      gelu(x),
      silu(x),
      rsqrt(abs(x) + 1.0f),
      where(ne(x, 0.0f), x, x * 3.0f),
      pad(x, {1, 2}, 0.5),
      layer_norm(x, {6}),
      index_select(x, 2, idx),
      cast(argmax(x, 2), f32),
      x.reshape({-1, 6}).sum(),
  };
  auto [want, got] = round_trip(g, x, outs, randn({2, 4, 6}));
  expect_close(want, got, 1e-5);
}

// An optimized save holds what the plan runs (batch norm folded, fused steps in the
// ai.baton domain) and reads back to the same outputs.
TEST(OnnxExport, OptimizedModelsRoundTripThroughTheBatonDomain) {
  manual_seed(4);
  auto model = nn::resnet18(10);
  model->eval();
  Graph g;
  Tensor x = g.placeholder(f32, {"batch", 3, 32, 32}, "x");
  Tensor y = model->forward(x);
  Tensor z = gelu(y) * 2.0f + sigmoid(y);  // an element-wise chain: one fused_elementwise step
  g.set_outputs({y, z});
  const Tensor input = randn({2, 3, 32, 32});
  Session session(g);
  std::vector<Tensor> want = session.run({y, z}, {{x, input}});
  const std::string bytes = onnx::save_bytes(g, {.optimized = true});
  ::onnx::ModelProto proto;
  ASSERT_TRUE(proto.ParseFromString(bytes));
  int baton_ops = 0, batch_norms = 0;
  for (const ::onnx::NodeProto& n : proto.graph().node()) {
    baton_ops += n.domain() == "ai.baton";
    batch_norms += n.op_type() == "BatchNormalization";
  }
  EXPECT_GT(baton_ops, 10);  // the fused convolutions and the element-wise chain
  EXPECT_EQ(batch_norms, 0);
  onnx::Model m = onnx::load_bytes(bytes, "optimized.onnx");
  EXPECT_NE(m.graph().to_text().find("fused_elementwise"), std::string::npos);
  expect_close(want, m.run({input}), 1e-4);
}

// An optimized save of a loss whose element-wise terms only a sum reads: one
// fused_elementwise_sum in the ai.baton domain, which reads back to the same value; of
// the largest error per row, one fused_elementwise_max; and of a softmax written out, a
// fused_elementwise_and_max and a fused_elementwise_and_sum, each with two results.
TEST(OnnxExport, OptimizedFusedSumRoundTripsThroughTheBatonDomain) {
  Graph g;
  Tensor y = g.placeholder(f32, {64, 256}, "y");
  Tensor t = g.placeholder(f32, {64, 256}, "t");
  Tensor per_row = sum((y - t) * (y - t), {1});
  Tensor worst = max(abs(y - t), {1});
  Tensor scores = y * 0.5f + t;
  Tensor e = exp(scores - max(scores, {1}, true));
  Tensor softmax = e / sum(e, {1}, true);
  g.set_outputs({per_row, worst, softmax});
  const Tensor yv = randn({64, 256}), tv = randn({64, 256});
  Session session(g);
  const std::vector<Tensor> want = session.run({per_row, worst, softmax}, {{y, yv}, {t, tv}});
  const std::string bytes = onnx::save_bytes(g, {.optimized = true});
  ::onnx::ModelProto proto;
  ASSERT_TRUE(proto.ParseFromString(bytes));
  std::map<std::string, int> fused;
  for (const ::onnx::NodeProto& n : proto.graph().node())
    if (n.domain() == "ai.baton") fused[n.op_type()] += 1;
  EXPECT_EQ(fused["fused_elementwise_sum"], 1);
  EXPECT_EQ(fused["fused_elementwise_max"], 1);
  EXPECT_EQ(fused["fused_elementwise_and_max"], 1);
  EXPECT_EQ(fused["fused_elementwise_and_sum"], 1);
  onnx::Model m = onnx::load_bytes(bytes, "loss.onnx");
  EXPECT_NE(m.graph().to_text().find("fused_elementwise_sum"), std::string::npos);
  expect_close(want, m.run({yv, tv}), 0);  // the same kernel on the same values
}

// Fused steps reading a bool mask first (the program's type an attribute, `dtype`) and
// converting their result (`to`): saved in the ai.baton domain and read back to the same
// values.
TEST(OnnxExport, OptimizedMaskedStepRoundTripsItsProgramsTypes) {
  Graph g;
  Tensor m = g.placeholder(b8, {8, 100}, "m");
  Tensor x = g.placeholder(f64, {8, 100}, "x");
  Tensor y = where(m, x * 2.0, exp(x)) * cast(m, f64);
  Tensor q = cast(floor(x * 4.0), i32);
  g.set_outputs({y, q});
  const Tensor mv = randn({8, 100}) > 0.0, xv = randn({8, 100}).to(f64);
  Session session(g);
  const std::vector<Tensor> want = session.run({y, q}, {{m, mv}, {x, xv}});
  const std::string bytes = onnx::save_bytes(g, {.optimized = true});
  onnx::Model loaded = onnx::load_bytes(bytes, "masked.onnx");
  const std::string text = loaded.graph().to_text();
  EXPECT_NE(text.find("r3=mul(r2,in0)\", dtype=f64}"), std::string::npos) << text;
  EXPECT_NE(text.find("r1=floor(r0)\", to=i32}"), std::string::npos) << text;
  expect_close(want, loaded.run({mv, xv}), 0);
}

// The same with the terms fetched too: one fused_elementwise_and_sum with both results
// in the ai.baton domain, read back to the same values.
TEST(OnnxExport, OptimizedKeptSumRoundTripsThroughTheBatonDomain) {
  Graph g;
  Tensor y = g.placeholder(f32, {64, 256}, "y");
  Tensor t = g.placeholder(f32, {64, 256}, "t");
  Tensor terms = (y - t) * (y - t);
  Tensor per_row = sum(terms, {1});
  g.set_outputs({per_row, terms});
  const Tensor yv = randn({64, 256}), tv = randn({64, 256});
  Session session(g);
  const std::vector<Tensor> want = session.run({per_row, terms}, {{y, yv}, {t, tv}});
  const std::string bytes = onnx::save_bytes(g, {.optimized = true});
  ::onnx::ModelProto proto;
  ASSERT_TRUE(proto.ParseFromString(bytes));
  int kept_sums = 0;
  for (const ::onnx::NodeProto& n : proto.graph().node())
    kept_sums += n.domain() == "ai.baton" && n.op_type() == "fused_elementwise_and_sum" && n.output_size() == 2;
  EXPECT_EQ(kept_sums, 1);
  onnx::Model m = onnx::load_bytes(bytes, "terms.onnx");
  expect_close(want, m.run({yv, tv}), 0);
}

// A gradient graph saved optimized: the pooling's backward with the relu's backward fused
// in (a mask of the relu's result) keeps the gradient only where that result is > 0.
TEST(OnnxExport, OptimizedPoolingBackwardKeepsTheFusedReluMask) {
  Graph g;
  Tensor x = g.placeholder(f32, {2, 3, 6, 6}, "x");
  Tensor r = relu(x);
  Tensor loss = (max_pool2d(r, {.kernel = {2, 2}}) * 3.0f).sum();
  Tensor dx = grad(loss, {x}).at(0);
  g.set_outputs({dx});
  const Tensor input = randn({2, 3, 6, 6});
  Session session(g);
  const std::vector<Tensor> want = session.run({dx}, {{x, input}});
  const std::string bytes = onnx::save_bytes(g, {.optimized = true});
  ::onnx::ModelProto proto;
  ASSERT_TRUE(proto.ParseFromString(bytes));
  int masks = 0;
  for (const ::onnx::NodeProto& n : proto.graph().node()) masks += n.op_type() == "Where";
  EXPECT_EQ(masks, 1);
  expect_close(want, onnx::load_bytes(bytes, "grad.onnx").run({input}), 1e-6);
}

// compile(): the traced graph of a call exports like a static one; the parameters it read
// become initializers.
TEST(OnnxExport, ACompiledFunctionsGraphExports) {
  manual_seed(5);
  auto mlp = nn::mnist_mlp();
  mlp->eval();
  auto f = compile([&](const Tensor& x) { return softmax(mlp->forward(x), 1); });
  const Tensor x = randn({3, 1, 28, 28});
  const Tensor want = f(x);
  onnx::Model m = onnx::load_bytes(onnx::save_bytes(f.graph()), "compiled.onnx");
  expect_close({want}, m.run({x}), 1e-5);
}

TEST(OnnxExport, AGraphWithoutAnOnnxFormIsAnErrorAndWritesNothing) {
  Graph g;
  Tensor x = g.placeholder(f32, {2, 3}, "x");
  Tensor v = g.variable(zeros({2, 3}), "v");
  Tensor y = assign(v, x + 1.0f);
  g.set_outputs({y});
  const std::string path = (std::filesystem::temp_directory_path() / "baton_export_error.onnx").string();
  std::filesystem::remove(path);
  try {
    onnx::save(g, path);
    ADD_FAILURE() << "saved";
  } catch (const GraphError& e) {
    EXPECT_NE(std::string(e.what()).find("assign"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  Graph empty;
  EXPECT_THROW(onnx::save_bytes(empty), GraphError);
}

}  // namespace
}  // namespace baton
