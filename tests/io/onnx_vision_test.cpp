// ONNX importers of import_vision.cpp on hand-built models:
// NonMaxSuppression (constant and model-input thresholds, absent optional inputs),
// GridSample, RoiAlign (attribute defaults by opset), MaxUnpool (with and without
// output_shape), against hand-worked values or loops in the test; and the clear failures.
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "baton/baton.h"
#include "baton/onnx.h"
#include "harness/op_harness.h"
#include "io/onnx_model_builder.h"

namespace baton {
namespace {

using ::onnx::TensorProto;
using onnx_testing::add_float_attr;
using onnx_testing::add_int_attr;
using onnx_testing::add_string_attr;
using onnx_testing::ModelBuilder;
using testing::uniform;

void set_ints(::onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// ---- NonMaxSuppression -----------------------------------------------------------------

const Tensor kBoxes = tensor<float>({{{0, 0, 1, 1}, {0, 0.1f, 1, 1.1f}, {0, 10, 1, 11}, {0, 10.2f, 1, 11.2f}}});
const Tensor kScores = tensor<float>({{{0.9f, 0.8f, 0.7f, 0.95f}}});

TEST(OnnxVision, NonMaxSuppressionWithConstantThresholds) {
  ModelBuilder b(11);
  b.input("boxes", TensorProto::FLOAT, {1, 4, 4});
  b.input("scores", TensorProto::FLOAT, {1, 1, 4});
  b.ints("max", {5});
  b.floats("iou", {1}, {0.5f});
  b.floats("score", {}, {0.75f});
  b.node("NonMaxSuppression", {"boxes", "scores", "max", "iou", "score"}, {"selected"});
  b.output("selected");
  const Tensor y = b.load().run({kBoxes, kScores}).at(0);
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  EXPECT_EQ(y.to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 3, 0, 0, 0}));
}

// Thresholds fed as model inputs: the model is imported again for their values.
TEST(OnnxVision, NonMaxSuppressionWithInputThresholds) {
  ModelBuilder b(11);
  b.input("boxes", TensorProto::FLOAT, {1, 4, 4});
  b.input("scores", TensorProto::FLOAT, {1, 1, 4});
  b.input("max", TensorProto::INT64, {1});
  b.input("iou", TensorProto::FLOAT, {1});
  add_int_attr(b.node("NonMaxSuppression", {"boxes", "scores", "max", "iou"}, {"selected"}), "center_point_box", 0);
  b.output("selected");
  onnx::Model m = b.load();
  auto run = [&](int64_t max, float iou) {
    return m.run({kBoxes, kScores, tensor<int64_t>({max}), tensor<float>({iou})}).at(0).to_vector<int64_t>();
  };
  EXPECT_EQ(run(5, 0.5f), (std::vector<int64_t>{0, 0, 3, 0, 0, 0}));
  EXPECT_EQ(run(5, 0.9f), (std::vector<int64_t>{0, 0, 3, 0, 0, 0, 0, 0, 1, 0, 0, 2}));
  EXPECT_EQ(run(1, 0.9f), (std::vector<int64_t>{0, 0, 3}));
}

TEST(OnnxVision, NonMaxSuppressionWithoutOptionalInputsSelectsNothing) {
  ModelBuilder b(11);
  b.input("boxes", TensorProto::FLOAT, {1, 4, 4});
  b.input("scores", TensorProto::FLOAT, {1, 1, 4});
  b.node("NonMaxSuppression", {"boxes", "scores"}, {"selected"});
  b.output("selected");
  const Tensor y = b.load().run({kBoxes, kScores}).at(0);
  EXPECT_EQ(y.shape(), (Shape{0, 3}));
}

TEST(OnnxVision, NonMaxSuppressionErrors) {
  ModelBuilder b(11);
  b.input("boxes", TensorProto::FLOAT, {1, 4, 4});
  b.input("scores", TensorProto::FLOAT, {1, 1, 4});
  add_int_attr(b.node("NonMaxSuppression", {"boxes", "scores"}, {"selected"}), "center_point_box", 2);
  b.output("selected");
  EXPECT_NE(error_of([&] { b.load().run({kBoxes, kScores}); }).find("center_point_box must be 0 or 1"),
            std::string::npos);
  ModelBuilder wrong(11);
  wrong.input("boxes", TensorProto::FLOAT, {1, 4, 3});
  wrong.input("scores", TensorProto::FLOAT, {1, 1, 4});
  wrong.node("NonMaxSuppression", {"boxes", "scores"}, {"selected"});
  wrong.output("selected");
  EXPECT_NE(error_of([&] { wrong.load().run({uniform({1, 4, 3}).to(f32), kScores}); }).find("boxes must be"),
            std::string::npos);
}

// ---- GridSample, RoiAlign ------------------------------------------------------------------

TEST(OnnxVision, GridSampleAttributes) {
  ModelBuilder b(16);
  b.input("x", TensorProto::FLOAT, {1, 1, 2, 2});
  b.input("grid", TensorProto::FLOAT, {1, 1, 3, 2});
  auto* n = b.node("GridSample", {"x", "grid"}, {"y"});
  add_int_attr(n, "align_corners", 1);
  add_string_attr(n, "padding_mode", "border");
  b.output("y");
  const Tensor x = tensor<float>({{{{1, 2}, {3, 4}}}});
  const Tensor grid = tensor<float>({{{{-1, -1}, {0, 0}, {3, 1}}}});
  // Corner, centre, and a point right of the image clamped to its right edge.
  EXPECT_EQ(b.load().run({x, grid}).at(0).to_vector<float>(), (std::vector<float>{1, 2.5f, 4}));
}

TEST(OnnxVision, RoiAlignDefaultsFollowTheOpset) {
  const Tensor x = uniform({1, 2, 5, 6}, -1, 1, 3).to(f32);
  const Tensor rois = tensor<float>({{0.3f, 0.6f, 3.5f, 4.1f}, {1, 1, 2, 2}});
  const Tensor batch = tensor<int64_t>({0, 0});
  for (int64_t opset : {10, 16}) {
    ModelBuilder b(opset);
    b.input("x", TensorProto::FLOAT, {1, 2, 5, 6});
    b.input("rois", TensorProto::FLOAT, {2, 4});
    b.input("batch", TensorProto::INT64, {2});
    auto* n = b.node("RoiAlign", {"x", "rois", "batch"}, {"y"});
    add_int_attr(n, "output_height", 3);
    add_int_attr(n, "output_width", 2);
    add_float_attr(n, "spatial_scale", 0.5f);
    b.output("y");
    const RoiAlignOptions o{3, 2, 0, 0.5, opset >= 16, false};
    const Tensor expected = roi_align(x, rois, batch, o);
    const Tensor y = b.load().run({x, rois, batch}).at(0);
    EXPECT_EQ(y.shape(), (Shape{2, 2, 3, 2}));
    EXPECT_EQ(y.to_vector<float>(), expected.to_vector<float>()) << "opset " << opset;
  }
}

// ---- MaxUnpool ---------------------------------------------------

TEST(OnnxVision, MaxUnpoolWithAndWithoutOutputShape) {
  for (bool with_shape : {false, true}) {
    ModelBuilder b(11);
    b.input("x", TensorProto::FLOAT, {1, 1, 2, 2});
    b.input("i", TensorProto::INT64, {1, 1, 2, 2});
    std::vector<std::string> inputs{"x", "i"};
    if (with_shape) b.ints("shape", {1, 1, 5, 4}), inputs.push_back("shape");
    auto* n = b.node("MaxUnpool", inputs, {"y"});
    set_ints(n, "kernel_shape", {2, 2});
    set_ints(n, "strides", {2, 2});
    b.output("y");
    const Tensor y = b.load().run({tensor<float>({{{{1, 2}, {3, 4}}}}), tensor<int64_t>({{{{0, 3}, {9, 14}}}})}).at(0);
    // The indices count in the unpooled 4x4; output_shape adds a row of zeros below.
    std::vector<float> expected{1, 0, 0, 2, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 4, 0};
    if (with_shape) expected.insert(expected.end(), 4, 0.0f);
    EXPECT_EQ(y.shape(), (with_shape ? Shape{1, 1, 5, 4} : Shape{1, 1, 4, 4}));
    EXPECT_EQ(y.to_vector<float>(), expected);
  }
}

TEST(OnnxVision, MaxUnpoolErrors) {
  ModelBuilder b(11);
  b.input("x", TensorProto::FLOAT, {1, 1, 2, 2});
  b.input("i", TensorProto::INT64, {1, 1, 2, 2});
  b.ints("shape", {1, 1, 3, 3});
  auto* n = b.node("MaxUnpool", {"x", "i", "shape"}, {"y"});
  set_ints(n, "kernel_shape", {2, 2});
  set_ints(n, "strides", {2, 2});  // unpooled 4x4
  b.output("y");
  const std::string error = error_of([&] { b.load(); });
  EXPECT_NE(error.find("smaller than the unpooled size"), std::string::npos) << error;
}

}  // namespace
}  // namespace baton
