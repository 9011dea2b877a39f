// ONNX import: hand-built models run with the right values, symbolic and value-shaped
// inputs, Model::run's checks, and hostile files (every one a baton::Error, never a crash).
#include <onnx/onnx_pb.h>

#include <gtest/gtest.h>

#include <random>

#include "baton/baton.h"
#include "baton/onnx.h"
#include "io/onnx_model_builder.h"

namespace baton {
namespace {

using ::onnx::TensorProto;

using onnx_testing::add_int_attr;
using onnx_testing::ModelBuilder;

// x[batch, 3] -> relu(x @ w^T + b): Gemm with transB, then Relu.
ModelBuilder linear_relu_model() {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {-1, 3}, "batch");
  b.floats("w", {2, 3}, {1, -2, 3, -4, 5, -6});
  b.floats("b", {2}, {0.5f, -0.5f});
  add_int_attr(b.node("Gemm", {"x", "w", "b"}, {"h"}), "transB", 1);
  b.node("Relu", {"h"}, {"y"});
  b.output("y");
  return b;
}

TEST(Onnx, RunsAHandBuiltModelWithASymbolicBatch) {
  onnx::Model m = linear_relu_model().load();
  ASSERT_EQ(m.inputs().size(), 1u);
  EXPECT_EQ(m.inputs()[0].name, "x");
  EXPECT_TRUE(sym::is_symbol(m.inputs()[0].shape[0]));
  Tensor w = tensor<float>({{1, -2, 3}, {-4, 5, -6}}), bias = tensor<float>({0.5f, -0.5f});
  for (int64_t batch : {1, 4}) {
    Tensor x = randn({batch, 3});
    Tensor got = m.run({x}).at(0);
    Tensor want = relu(linear(x, w, bias));
    ASSERT_EQ(got.shape(), want.shape());
    auto g = got.to_vector<float>(), e = want.to_vector<float>();
    for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], e[i], 1e-5);
  }
  EXPECT_NE(m.info().find("input x f32[batch,3]"), std::string::npos) << m.info();
  EXPECT_NE(m.info().find("Gemm 1"), std::string::npos) << m.info();
  EXPECT_NE(m.explain().find("linear"), std::string::npos) << m.explain();
}

TEST(Onnx, NamedInputsAndRunErrors) {
  onnx::Model m = linear_relu_model().load();
  Tensor x = ones({2, 3});
  EXPECT_EQ(m.run({{"x", x}}).at(0).shape(), (Shape{2, 2}));
  EXPECT_THROW(m.run({{"nope", x}}), ValueError);
  EXPECT_THROW(m.run(std::vector<Tensor>{}), ValueError);
  EXPECT_THROW(m.run({ones({2, 4})}), ShapeError);
  EXPECT_THROW(m.run({ones({2, 3}, DType::f64)}), ShapeError);
}

// Reshape's shape comes in as an input: the model is imported per distinct value.
TEST(Onnx, InputsThatShapeTheGraphSpecializeItPerValue) {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {2, 6});
  b.input("shape", TensorProto::INT64, {2});
  b.node("Reshape", {"x", "shape"}, {"y"});
  b.output("y");
  onnx::Model m = b.load();
  Tensor x = arange(0, 12, 1, f32).reshape({2, 6});
  Tensor a = m.run({x, tensor<int64_t>({3, 4})}).at(0);
  Tensor c = m.run({x, tensor<int64_t>({4, -1})}).at(0);
  EXPECT_EQ(a.shape(), (Shape{3, 4}));
  EXPECT_EQ(c.shape(), (Shape{4, 3}));
  EXPECT_EQ(c.to_vector<float>(), x.contiguous().to_vector<float>());
  EXPECT_THROW(m.run({x, tensor<int64_t>({5, 5})}), ShapeError);
}

// LoadOptions::input_shapes: a model exported for one fixed batch runs on any.
TEST(Onnx, InputShapesReplaceTheDeclaredOnes) {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {1, 3});
  b.node("Relu", {"x"}, {"y"});
  b.output("y");
  EXPECT_THROW(b.load().run({ones({4, 3})}), ShapeError);
  onnx::Model m = onnx::load_bytes(b.bytes(), "test.onnx", {.input_shapes = {{"x", {"n", 3}}}});
  EXPECT_EQ(m.run({ones({4, 3})}).at(0).shape(), (Shape{4, 3}));
  EXPECT_THROW(onnx::load_bytes(b.bytes(), "test.onnx", {.input_shapes = {{"x", {"n"}}}}), ShapeError);
}

TEST(Onnx, ConstantSubexpressionsFoldWhileLoading) {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {2, 3});
  b.node("Shape", {"x"}, {"s"});                    // static: a constant [2, 3]
  b.ints("minus_one", {-1});
  b.node("Concat", {"minus_one"}, {"flat"})->add_attribute()->set_name("axis");
  b.g->mutable_node(1)->mutable_attribute(0)->set_type(::onnx::AttributeProto::INT);
  b.node("Reshape", {"x", "flat"}, {"y"});
  b.output("y");
  b.output("s");
  onnx::Model m = b.load();
  std::vector<Tensor> out = m.run({ones({2, 3})});
  EXPECT_EQ(out[0].shape(), (Shape{6}));
  EXPECT_EQ(out[1].to_vector<int64_t>(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(m.graph().num_nodes(), 1u) << m.graph().to_text();  // only the reshape
}

// Each case must end in this error kind with `text` in its message.
template <class E>
void expect_load_error(const std::string& bytes, const std::string& text) {
  try {
    onnx::load_bytes(bytes, "bad.onnx");
    ADD_FAILURE() << "loaded; expected: " << text;
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

TEST(Onnx, MalformedModelsAreErrorsNamingTheProblem) {
  expect_load_error<IOError>("", "not an ONNX model");
  expect_load_error<IOError>("\xff\xff\xff\xff garbage", "not an ONNX model");
  {
    ModelBuilder b(99);
    expect_load_error<GraphError>(b.bytes(), "opset 99");
  }
  {
    ModelBuilder b;
    b.input("x", TensorProto::FLOAT, {2});
    b.node("NoSuchOp", {"x"}, {"y"});
    b.output("y");
    expect_load_error<GraphError>(b.bytes(), "node 'NoSuchOp1' (NoSuchOp): baton has no importer");
  }
  {
    ModelBuilder b;
    b.input("x", TensorProto::FLOAT, {2});
    b.node("Relu", {"later"}, {"y"});
    b.node("Relu", {"x"}, {"later"});
    b.output("y");
    expect_load_error<GraphError>(b.bytes(), "reads 'later', which no earlier node");
  }
  {
    ModelBuilder b;
    b.input("x", TensorProto::FLOAT, {2});
    b.node("Relu", {"x"}, {"y"});
    b.node("Relu", {"x"}, {"y"});
    b.output("y");
    expect_load_error<GraphError>(b.bytes(), "defines 'y' a second time");
  }
  {  // the ai.baton domain holds only what optimized exports write
    ModelBuilder b;
    b.input("x", TensorProto::FLOAT, {2});
    b.input("v", TensorProto::FLOAT, {2});
    b.node("assign", {"v", "x"}, {"y"})->set_domain("ai.baton");
    b.output("y");
    expect_load_error<GraphError>(b.bytes(), "does not come from an optimized export");
  }
  {
    ModelBuilder b;
    b.input("x", TensorProto::FLOAT, {2});
    b.node("no_such_op", {"x"}, {"y"})->set_domain("ai.baton");
    b.output("y");
    expect_load_error<GraphError>(b.bytes(), "baton has no op of this name");
  }
  {
    ModelBuilder b;
    b.input("x", TensorProto::FLOAT, {2});
    b.output("missing");
    expect_load_error<GraphError>(b.bytes(), "returns 'missing', which nothing defines");
  }
  {
    ModelBuilder b;
    b.input("x", TensorProto::FLOAT, {2, 3});
    b.floats("w", {4, 4}, std::vector<float>(16, 1.f));
    b.node("MatMul", {"x", "w"}, {"y"});
    b.output("y");
    expect_load_error<ShapeError>(b.bytes(), "node 'MatMul1' (MatMul)");
  }
}

TEST(Onnx, HostileTensorsAreRefusedBeforeAllocating) {
  auto model_with = [](auto edit) {
    ModelBuilder b;
    b.floats("w", {2}, {1, 2});
    edit(*b.g->mutable_initializer(0));
    b.output("w");
    return b.bytes();
  };
  expect_load_error<IOError>(model_with([](TensorProto& t) { t.set_dims(0, -3); }), "negative dim");
  expect_load_error<IOError>(model_with([](TensorProto& t) {
                               t.set_dims(0, int64_t(1) << 40);
                               t.add_dims(int64_t(1) << 40);
                             }),
                             "more elements than int64");
  expect_load_error<IOError>(model_with([](TensorProto& t) { t.set_dims(0, int64_t(1) << 50); }),
                             "holds 2 values for");
  expect_load_error<IOError>(model_with([](TensorProto& t) {
                               t.clear_float_data();
                               t.set_raw_data(std::string(7, '\0'));
                             }),
                             "7 bytes of data for 2 elements");
  expect_load_error<IOError>(model_with([](TensorProto& t) { t.set_data_location(TensorProto::EXTERNAL); }),
                             "external file");
  expect_load_error<DTypeError>(model_with([](TensorProto& t) { t.set_data_type(TensorProto::COMPLEX64); }),
                                "no COMPLEX64 tensors");
}

// Truncations and bit flips of a valid model: each loads (and runs) or is a baton::Error.
TEST(Onnx, TruncatedAndBitFlippedModelsNeverCrash) {
  const std::string good = linear_relu_model().bytes();
  auto try_load = [](const std::string& bytes) {
    try {
      onnx::Model m = onnx::load_bytes(bytes, "fuzzed.onnx");
      if (m.inputs().size() == 1 && m.inputs()[0].dtype == f32 && m.inputs()[0].shape.size() == 2) {
        Shape s = m.inputs()[0].shape;
        for (int64_t& d : s)
          if (sym::is_symbol(d) || d > 64) d = 2;
        m.run({ones(s)});
      }
    } catch (const Error&) {
    }
  };
  for (size_t n = 0; n < good.size(); ++n) try_load(good.substr(0, n));
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    std::string bad = good;
    for (int flips = 0; flips < 3; ++flips) bad[rng() % bad.size()] ^= char(1 << (rng() % 8));
    try_load(bad);
  }
}

TEST(Onnx, LoadErrorsNameTheFile) {
  EXPECT_THROW(onnx::load("/nonexistent/model.onnx"), IOError);
  EXPECT_THROW(onnx::load_tensor("/nonexistent/input_0.pb"), IOError);
}

}  // namespace
}  // namespace baton
