// ONNX importers of import_vision.cpp and MaxPool's Indices output on hand-built models:
// NonMaxSuppression (constant thresholds, thresholds read when the model runs, absent
// optional inputs), GridSample, RoiAlign (attribute defaults by opset), MaxUnpool (with and
// without output_shape) and MaxPool's Indices (row- and column-major, asymmetric pads, 1-D),
// against hand-worked values or loops in the test; and the clear failures.
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

// Thresholds fed as model inputs are read when the model runs: one import, one graph.
TEST(OnnxVision, NonMaxSuppressionWithInputThresholds) {
  ModelBuilder b(11);
  b.input("boxes", TensorProto::FLOAT, {1, 4, 4});
  b.input("scores", TensorProto::FLOAT, {1, 1, 4});
  b.input("max", TensorProto::INT64, {1});
  b.input("iou", TensorProto::FLOAT, {1});
  add_int_attr(b.node("NonMaxSuppression", {"boxes", "scores", "max", "iou"}, {"selected"}), "center_point_box", 0);
  b.output("selected");
  onnx::Model m = b.load();
  EXPECT_NE(m.graph().to_text().find("non_max_suppression("), std::string::npos);  // imported already
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

// ---- MaxUnpool and MaxPool's Indices ---------------------------------------------------

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

// The argmax of each window of x [N, C, H, W] (first maximum; padded places never win),
// as a flat index over the whole input, row- or column-major within each plane.
struct Pooling {
  int64_t kh, kw, sh, sw, pad_top, pad_left, oh, ow;
};
std::vector<int64_t> argmax_indices(const Tensor& x, const Pooling& q, bool column_major) {
  const int64_t planes = x.size(0) * x.size(1), h = x.size(2), w = x.size(3);
  const std::vector<float> v = x.to_vector<float>();
  std::vector<int64_t> out;
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t i = 0; i < q.oh; ++i)
      for (int64_t j = 0; j < q.ow; ++j) {
        int64_t best_y = -1, best_x = -1;
        for (int64_t a = 0; a < q.kh; ++a)
          for (int64_t b = 0; b < q.kw; ++b) {
            const int64_t y = i * q.sh - q.pad_top + a, xx = j * q.sw - q.pad_left + b;
            if (y < 0 || y >= h || xx < 0 || xx >= w) continue;
            if (best_y < 0 || v[size_t((p * h + y) * w + xx)] > v[size_t((p * h + best_y) * w + best_x)])
              best_y = y, best_x = xx;
          }
        out.push_back(p * h * w + (column_major ? best_x * h + best_y : best_y * w + best_x));
      }
  return out;
}

Tensor max_pool_indices(const Tensor& x, int64_t k, int64_t stride, std::vector<int64_t> pads, int64_t storage_order,
                        Tensor* values = nullptr) {
  ModelBuilder b(12);
  std::vector<int64_t> dims(x.shape().begin(), x.shape().end());
  b.input("x", TensorProto::FLOAT, dims);
  auto* n = b.node("MaxPool", {"x"}, {"y", "i"});
  set_ints(n, "kernel_shape", std::vector<int64_t>(size_t(x.dim() - 2), k));
  set_ints(n, "strides", std::vector<int64_t>(size_t(x.dim() - 2), stride));
  set_ints(n, "pads", pads);
  add_int_attr(n, "storage_order", storage_order);
  b.output("y");
  b.output("i");
  std::vector<Tensor> out = b.load().run({x});
  if (values) *values = out.at(0);
  return out.at(1);
}

TEST(OnnxVision, MaxPoolIndicesRowAndColumnMajor) {
  const Tensor x = uniform({2, 3, 5, 6}, -1, 1, 21).to(f32);
  for (int64_t order : {0, 1}) {
    Tensor values;
    const Tensor i = max_pool_indices(x, 2, 2, {0, 0, 0, 0}, order, &values);
    EXPECT_EQ(i.dtype(), i64);
    EXPECT_EQ(i.shape(), (Shape{2, 3, 2, 3}));
    EXPECT_EQ(i.to_vector<int64_t>(), argmax_indices(x, {2, 2, 2, 2, 0, 0, 2, 3}, order == 1)) << "storage_order " << order;
    EXPECT_EQ(values.to_vector<float>(), max_pool2d(x, {{2, 2}, {2, 2}, {0, 0}}).to_vector<float>());
  }
}

TEST(OnnxVision, MaxPoolIndicesWithPads) {
  const Tensor x = uniform({1, 2, 5, 5}, -1, 1, 22).to(f32);
  // Symmetric pads within half the kernel (pooling pads itself) and asymmetric ones (the
  // input is padded first, and the indices translated back).
  EXPECT_EQ(max_pool_indices(x, 3, 1, {1, 1, 1, 1}, 0).to_vector<int64_t>(),
            argmax_indices(x, {3, 3, 1, 1, 1, 1, 5, 5}, false));
  EXPECT_EQ(max_pool_indices(x, 3, 2, {2, 0, 1, 2}, 1).to_vector<int64_t>(),
            argmax_indices(x, {3, 3, 2, 2, 2, 0, 3, 3}, true));
}

TEST(OnnxVision, MaxPoolIndices1d) {
  const Tensor x = uniform({2, 2, 7}, -1, 1, 23).to(f32);
  const Tensor i = max_pool_indices(x, 3, 2, {1, 1}, 0);
  EXPECT_EQ(i.shape(), (Shape{2, 2, 4}));
  EXPECT_EQ(i.to_vector<int64_t>(), argmax_indices(reshape(x, Shape{2, 2, 1, 7}), {1, 3, 1, 2, 0, 1, 1, 4}, false));
}

TEST(OnnxVision, MaxPoolIndicesErrors) {
  ModelBuilder b(12);
  b.input("x", TensorProto::FLOAT, {1, 1, 5, 5});
  auto* n = b.node("MaxPool", {"x"}, {"y", "i"});
  set_ints(n, "kernel_shape", {2, 2});
  set_ints(n, "dilations", {2, 2});
  b.output("y");
  b.output("i");
  EXPECT_NE(error_of([&] { b.load(); }).find("without dilations"), std::string::npos);
}

}  // namespace
}  // namespace baton
