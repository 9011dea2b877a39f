// ONNX Resize and Upsample on hand-built models, against hand-computed values: each
// interpolation mode, the coordinate modes that change the answer, tf_crop_and_resize's
// extrapolation, opset 10 and Upsample's legacy rules, and the clear failures.
#include <gtest/gtest.h>

#include "baton/baton.h"
#include "baton/onnx.h"
#include "io/onnx_model_builder.h"

namespace baton {
namespace {

using ::onnx::TensorProto;
using onnx_testing::add_float_attr;
using onnx_testing::add_floats_attr;
using onnx_testing::add_int_attr;
using onnx_testing::add_string_attr;
using onnx_testing::ModelBuilder;

struct ResizeCase {
  std::vector<int64_t> in_dims;
  std::vector<float> scales;   // or
  std::vector<int64_t> sizes;
  std::vector<float> roi;
  std::vector<std::pair<std::string, std::string>> strings;  // string attributes
};

// y = Resize(x, roi, scales, sizes) at opset 13 (the scales/sizes/roi given are initializers).
ModelBuilder resize_model(const ResizeCase& rc) {
  ModelBuilder b(13);
  b.input("x", TensorProto::FLOAT, rc.in_dims);
  std::vector<std::string> inputs{"x", "", "", ""};
  if (!rc.roi.empty()) b.floats("roi", {int64_t(rc.roi.size())}, rc.roi), inputs[1] = "roi";
  if (!rc.scales.empty()) b.floats("scales", {int64_t(rc.scales.size())}, rc.scales), inputs[2] = "scales";
  if (!rc.sizes.empty()) b.ints("sizes", rc.sizes), inputs[3] = "sizes";
  while (!inputs.empty() && inputs.back().empty()) inputs.pop_back();
  auto* n = b.node("Resize", inputs, {"y"});
  for (const auto& [name, value] : rc.strings) add_string_attr(n, name, value);
  b.output("y");
  return b;
}

std::vector<float> run(const ModelBuilder& b, const Tensor& x, Shape expected_shape) {
  const Tensor y = b.load().run({x}).at(0);
  EXPECT_EQ(y.shape(), expected_shape);
  return y.contiguous().to_vector<float>();
}

void expect_floats(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << "element " << i;
}

TEST(OnnxResize, NearestHalfPixelDoublesEachPixel) {
  // half_pixel: sources -0.25, 0.25, 0.75, 1.25 round (prefer floor) to 0, 0, 1, 1.
  ModelBuilder b = resize_model({{1, 1, 2, 2}, {1, 1, 2, 2}, {}, {}, {}});
  const Tensor x = tensor(std::vector<float>{1, 2, 3, 4}, Shape{1, 1, 2, 2});
  expect_floats(run(b, x, Shape{1, 1, 4, 4}), {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4});
}

TEST(OnnxResize, LinearAlignCornersWithSizes) {
  // align_corners, 3 -> 5: sources 0, 0.5, 1, 1.5, 2.
  ModelBuilder b = resize_model(
      {{1, 1, 1, 3}, {}, {1, 1, 1, 5}, {}, {{"mode", "linear"}, {"coordinate_transformation_mode", "align_corners"}}});
  const Tensor x = tensor(std::vector<float>{0, 2, 10}, Shape{1, 1, 1, 3});
  expect_floats(run(b, x, Shape{1, 1, 1, 5}), {0, 1, 2, 6, 10});
}

TEST(OnnxResize, LinearDownsampleAlignCornersUsesTheUnroundedLength) {
  // ONNX scales 4 by 0.6 to a length of 2.4 (2 outputs): sources 0 and 3 / 1.4.
  ModelBuilder b = resize_model(
      {{1, 4}, {1, 0.6f}, {}, {}, {{"mode", "linear"}, {"coordinate_transformation_mode", "align_corners"}}});
  const Tensor x = tensor(std::vector<float>{1, 2, 3, 4}, Shape{1, 4});
  expect_floats(run(b, x, Shape{1, 2}), {1, 1 + 3 / 1.4f});
}

// Cubic weights with A = -0.75 at t = 0.5: -3/32, 19/32, 19/32, -3/32.
TEST(OnnxResize, CubicAsymmetricClampsAtTheEdges) {
  ModelBuilder b = resize_model(
      {{1, 4}, {1, 2}, {}, {}, {{"mode", "cubic"}, {"coordinate_transformation_mode", "asymmetric"}}});
  const Tensor x = tensor(std::vector<float>{0, 0, 1, 0}, Shape{1, 4});
  // sources 0, 0.5, ..., 3.5; at 3.5 the neighbours 4 and 5 repeat the last element.
  expect_floats(run(b, x, Shape{1, 8}), {0, -3 / 32.f, 0, 19 / 32.f, 1, 19 / 32.f, 0, -3 / 32.f});
}

TEST(OnnxResize, CubicExcludeOutsideRenormalizes) {
  ResizeCase rc{{1, 4}, {1, 2}, {}, {}, {{"mode", "cubic"}, {"coordinate_transformation_mode", "asymmetric"}}};
  ModelBuilder b = resize_model(rc);
  add_int_attr(b.g->mutable_node(0), "exclude_outside", 1);
  const Tensor x = tensor(std::vector<float>{0, 0, 1, 0}, Shape{1, 4});
  const std::vector<float> y = run(b, x, Shape{1, 8});
  // At 0.5 neighbour -1 drops: 1 * (-3/32) / (35/32). At 3.5 neighbours 4, 5 drop: 1 * (-3/32) / (16/32).
  EXPECT_NEAR(y[1], -3.0 / 35.0, 1e-6);
  EXPECT_NEAR(y[7], -3.0 / 16.0, 1e-6);
  EXPECT_NEAR(y[3], 19 / 32.f, 1e-6);  // all four inside: unchanged
}

TEST(OnnxResize, TfCropAndResizeExtrapolates) {
  // roi [-0.5, 1.5] of width 3: sources -1, 1, 3; the outer two lie outside the input.
  ModelBuilder b = resize_model({{1, 3},
                                 {},
                                 {1, 3},
                                 {0, -0.5f, 1, 1.5f},
                                 {{"mode", "linear"}, {"coordinate_transformation_mode", "tf_crop_and_resize"}}});
  add_float_attr(b.g->mutable_node(0), "extrapolation_value", 7);
  const Tensor x = tensor(std::vector<float>{1, 2, 3}, Shape{1, 3});
  expect_floats(run(b, x, Shape{1, 3}), {7, 2, 7});
}

TEST(OnnxResize, SymbolicBatchWithScaleOneIsKept) {
  ModelBuilder b(13);
  b.input("x", TensorProto::FLOAT, {-1, 2}, "N");
  b.floats("scales", {2}, {1, 1.5f});
  b.node("Resize", {"x", "", "scales"}, {"y"});
  b.output("y");
  onnx::Model m = b.load();
  const Tensor y = m.run({tensor(std::vector<float>{1, 2, 3, 4}, Shape{2, 2})}).at(0);
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  // half_pixel 2 -> 3: sources -1/6, 1/2, 7/6 -> 0, 0, 1 (a half rounds down, then clamped).
  expect_floats(y.contiguous().to_vector<float>(), {1, 1, 2, 3, 3, 4});
}

// A symbolic spatial dim under a whole scale is twice that symbol; the model runs any size.
TEST(OnnxResize, SymbolicSpatialDimIsResized) {
  ModelBuilder b(13);
  b.input("x", TensorProto::FLOAT, {1, -1}, "W");
  b.floats("scales", {2}, {1, 2});
  b.node("Resize", {"x", "", "scales"}, {"y"});
  b.output("y");
  expect_floats(run(b, tensor(std::vector<float>{1, 2}, Shape{1, 2}), Shape{1, 4}), {1, 1, 2, 2});
  expect_floats(run(b, tensor(std::vector<float>{1, 2, 3}, Shape{1, 3}), Shape{1, 6}), {1, 1, 2, 2, 3, 3});
}

// Scales fed as a model input are read when the model runs: one import serves every value.
TEST(OnnxResize, FedScalesImportOnce) {
  ModelBuilder b(13);
  b.input("x", TensorProto::FLOAT, {1, 2});
  b.input("scales", TensorProto::FLOAT, {2});
  b.node("Resize", {"x", "", "scales"}, {"y"});
  b.output("y");
  onnx::Model m = b.load();
  const Tensor x = tensor(std::vector<float>{1, 2}, Shape{1, 2});
  const Tensor twice = m.run({x, tensor(std::vector<float>{1, 2}, Shape{2})}).at(0);
  const Tensor thrice = m.run({x, tensor(std::vector<float>{2, 3}, Shape{2})}).at(0);
  EXPECT_EQ(twice.shape(), (Shape{1, 4}));
  EXPECT_EQ(thrice.shape(), (Shape{2, 6}));
  expect_floats(thrice.contiguous().to_vector<float>(), {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2});
}

// Sizes computed from another input's shape (interpolate(x, size=y.shape[2:])) give the
// output that input's symbols, so it adds to that input.
TEST(OnnxResize, SizesFromAShapeKeepItsSymbols) {
  ModelBuilder b(13);
  b.input("x", TensorProto::FLOAT, {1, 2});
  b.input("like", TensorProto::FLOAT, {1, -1}, "L");
  b.node("Shape", {"like"}, {"sizes"});
  b.node("Resize", {"x", "", "", "sizes"}, {"up"});
  b.node("Add", {"up", "like"}, {"y"});
  b.output("y");
  onnx::Model m = b.load();
  const Tensor x = tensor(std::vector<float>{1, 2}, Shape{1, 2});
  for (int64_t n : {3, 5}) EXPECT_EQ(m.run({x, zeros({1, n})}).at(0).shape(), (Shape{1, n}));
}

TEST(OnnxResize, Opset10NearestCeilsWhenShrinking) {
  ModelBuilder b(10);
  b.input("x", TensorProto::FLOAT, {1, 1, 2, 4});
  b.floats("scales", {4}, {1, 1, 0.6f, 0.6f});
  b.node("Resize", {"x", "scales"}, {"y"});
  b.output("y");
  // asymmetric sources 0 and 1/0.6 (1.67 -> 2) along the width, 0 along the height.
  const Tensor x = tensor(std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8}, Shape{1, 1, 2, 4});
  expect_floats(run(b, x, Shape{1, 1, 1, 2}), {1, 3});
}

TEST(OnnxResize, UpsampleRepeatsByFloor) {
  for (int64_t opset : {7, 9}) {
    ModelBuilder b(opset);
    b.input("x", TensorProto::FLOAT, {1, 2});
    if (opset < 9) {
      add_floats_attr(b.node("Upsample", {"x"}, {"y"}), "scales", {2, 3});
    } else {
      b.floats("scales", {2}, {2, 3});
      b.node("Upsample", {"x", "scales"}, {"y"});
    }
    b.output("y");
    const Tensor x = tensor(std::vector<float>{1, 2}, Shape{1, 2});
    expect_floats(run(b, x, Shape{2, 6}), {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2});
  }
}

TEST(OnnxResize, UpsampleLinear) {
  ModelBuilder b(9);
  b.input("x", TensorProto::FLOAT, {1, 2});
  b.floats("scales", {2}, {1, 2});
  add_string_attr(b.node("Upsample", {"x", "scales"}, {"y"}), "mode", "linear");
  b.output("y");
  // asymmetric sources 0, 0.5, 1, 1.5 (the last clamps to the edge).
  expect_floats(run(b, tensor(std::vector<float>{2, 4}, Shape{1, 2}), Shape{1, 4}), {2, 3, 4, 4});
}

}  // namespace
}  // namespace baton
