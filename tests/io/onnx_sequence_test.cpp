// ONNX sequences and optionals (src/io/onnx/import_sequence.cpp): the sequence ops unroll
// over items known while loading; sequence and optional inputs import per value.
#include <gtest/gtest.h>

#include "baton/baton.h"
#include "baton/onnx.h"
#include "harness/op_harness.h"
#include "io/onnx_model_builder.h"

namespace baton {
namespace {

using ::onnx::TensorProto;
using onnx::Value;
using onnx_testing::add_graph_attr;
using onnx_testing::add_int_attr;
using onnx_testing::GraphBuilder;
using onnx_testing::ModelBuilder;

std::vector<float> floats(const Tensor& t) { return t.to_vector<float>(); }

TEST(OnnxSequences, BuiltInsideTheModelTheyUnrollIntoTensorOps) {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {2});
  b.input("y", TensorProto::FLOAT, {2});
  b.ints("one", {1}, true);
  b.node("SequenceConstruct", {"x", "y"}, {"s"});
  b.node("SequenceInsert", {"s", "x", "one"}, {"s2"});  // x, x, y
  b.node("SequenceAt", {"s2", "one"}, {"second"});
  b.node("SequenceLength", {"s2"}, {"n"});
  add_int_attr(b.node("ConcatFromSequence", {"s2"}, {"cat"}), "axis", 0);
  auto* stacked = b.node("ConcatFromSequence", {"s2"}, {"stacked"});
  add_int_attr(stacked, "axis", 0);
  add_int_attr(stacked, "new_axis", 1);
  b.output("second");
  b.output("n");
  b.output("cat");
  b.output("stacked");
  onnx::Model m = b.load();
  std::vector<Tensor> out = m.run({tensor({1.f, 2.f}), tensor({3.f, 4.f})});
  EXPECT_EQ(floats(out[0]), (std::vector<float>{1, 2}));
  EXPECT_EQ(out[1].item<int64_t>(), 3);
  EXPECT_EQ(floats(out[2]), (std::vector<float>{1, 2, 1, 2, 3, 4}));
  EXPECT_EQ(out[3].shape(), (Shape{3, 2}));
}

TEST(OnnxSequences, SplitToSequenceAndASequenceOutput) {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {3, 2});
  auto* split = b.node("SplitToSequence", {"x"}, {"rows"});
  add_int_attr(split, "keepdims", 0);
  b.output("rows");
  onnx::Model m = b.load();
  EXPECT_TRUE(m.outputs()[0].sequence);
  std::vector<Value> out = m.run_values({tensor({{1.f, 2.f}, {3.f, 4.f}, {5.f, 6.f}})});
  ASSERT_EQ(out[0].kind(), Value::Kind::sequence);
  ASSERT_EQ(out[0].items().size(), 3u);
  EXPECT_EQ(out[0].items()[2].shape(), (Shape{2}));
  EXPECT_EQ(floats(out[0].items()[2]), (std::vector<float>{5, 6}));
  EXPECT_THROWS_WITH(ValueError, m.run({tensor({{1.f, 2.f}, {3.f, 4.f}, {5.f, 6.f}})}), "output 'rows' is sequence of 3",
                     "run_values");
}

// SequenceMap(s, bias) with the body y = item + bias, over a sequence input.
ModelBuilder map_model() {
  ModelBuilder b;
  b.sequence_input("s", TensorProto::FLOAT, 1);
  b.input("bias", TensorProto::FLOAT, {1});
  auto* n = b.node("SequenceMap", {"s", "bias"}, {"out"});
  GraphBuilder body = add_graph_attr(n, "body");
  body.input("item", TensorProto::FLOAT, {-1});
  body.input("b", TensorProto::FLOAT, {1});
  body.node("Add", {"item", "b"}, {"sum"});
  body.output("sum");
  b.output("out");
  return b;
}

TEST(OnnxSequences, SequenceInputsImportPerValueAndMapTheirItems) {
  onnx::Model m = map_model().load();
  EXPECT_TRUE(m.inputs()[0].sequence);
  EXPECT_NE(m.info().find("input s sequence of f32[unk]"), std::string::npos) << m.info();
  const Value s = Value::sequence({tensor({1.f, 2.f}), tensor({10.f})});
  std::vector<Value> out = m.run_values({s, tensor({0.5f})});
  ASSERT_EQ(out[0].items().size(), 2u);
  EXPECT_EQ(floats(out[0].items()[0]), (std::vector<float>{1.5f, 2.5f}));
  EXPECT_EQ(floats(out[0].items()[1]), (std::vector<float>{10.5f}));
  out = m.run_values({Value::sequence({tensor({7.f})}), tensor({1.f})});  // another length
  EXPECT_EQ(floats(out[0].items()[0]), (std::vector<float>{8.f}));
  EXPECT_THROWS_WITH(ShapeError, m.run_values({tensor({1.f}), tensor({1.f})}),
                     "input 's' is sequence of f32[unk], given f32[1]");
  EXPECT_THROWS_WITH(ShapeError, m.run_values({Value::sequence({tensor({1})}), tensor({1.f})}), "given sequence of 1: i32[1]");
}

TEST(OnnxSequences, OptionalInputsMayBeEmpty) {
  ModelBuilder b;
  b.optional_input("maybe", TensorProto::FLOAT, {2});
  b.node("OptionalHasElement", {"maybe"}, {"has"});
  b.output("has");
  onnx::Model m = b.load();
  EXPECT_TRUE(m.inputs()[0].optional);
  EXPECT_FALSE(m.run_values({Value()})[0].tensor().item<bool>());
  EXPECT_TRUE(m.run_values({tensor({1.f, 2.f})})[0].tensor().item<bool>());
}

TEST(OnnxSequences, BadPositionsAndKindsAreErrorsNamingTheNode) {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {2});
  b.ints("five", {5}, true);
  b.node("SequenceConstruct", {"x"}, {"s"});
  b.node("SequenceAt", {"s", "five"}, {"y"});
  b.output("y");
  EXPECT_THROWS_WITH(GraphError, b.load(), "(SequenceAt): position 5 is out of range for a sequence of 1");
  ModelBuilder relu;
  relu.input("x", TensorProto::FLOAT, {2});
  relu.node("SequenceConstruct", {"x"}, {"s"});
  relu.node("Relu", {"s"}, {"y"});
  relu.output("y");
  EXPECT_THROWS_WITH(GraphError, relu.load(), "(Relu)", "input 0 ('s') is a sequence; this op takes a tensor");
}

}  // namespace
}  // namespace baton
