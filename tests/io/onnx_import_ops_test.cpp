// ONNX importers composed from public ops: If and Loop (control flow over subgraphs, with
// symbolic and known conditions), OneHot, DepthToSpace and Mod, on hand-built models.
#include <gtest/gtest.h>

#include <limits>
#include <tuple>

#include "baton/baton.h"
#include "baton/onnx.h"
#include "harness/op_harness.h"
#include "io/onnx_model_builder.h"

namespace baton {
namespace {

using ::onnx::TensorProto;
using onnx_testing::add_graph_attr;
using onnx_testing::add_int_attr;
using onnx_testing::add_string_attr;
using onnx_testing::GraphBuilder;
using onnx_testing::ModelBuilder;

bool has_op(const onnx::Model& m, const std::string& op) {
  return m.graph().to_text().find(op + "(") != std::string::npos;
}

// y = cond ? x + 1 : x * 2, the branches reading x and the initializers of the main graph.
ModelBuilder if_model(bool known_condition, bool value = false) {
  ModelBuilder b;
  if (known_condition) b.boolean("c", value);
  else b.input("c", TensorProto::BOOL, {});
  b.input("x", TensorProto::FLOAT, {3});
  b.floats("one", {1}, {1});
  b.floats("two", {1}, {2});
  auto* n = b.node("If", {"c"}, {"y"});
  GraphBuilder then_branch = add_graph_attr(n, "then_branch");
  then_branch.node("Add", {"x", "one"}, {"t"});
  then_branch.output("t");
  GraphBuilder else_branch = add_graph_attr(n, "else_branch");
  else_branch.node("Mul", {"x", "two"}, {"e"});
  else_branch.output("e");
  b.output("y");
  return b;
}

TEST(OnnxImportOps, IfWithASymbolicConditionRunsEitherBranch) {
  onnx::Model m = if_model(false).load();
  const Tensor x = tensor<float>({1, 2, 3});
  EXPECT_EQ(m.run({scalar_tensor<bool>(true), x}).at(0).to_vector<float>(), (std::vector<float>{2, 3, 4}));
  EXPECT_EQ(m.run({scalar_tensor<bool>(false), x}).at(0).to_vector<float>(), (std::vector<float>{2, 4, 6}));
  EXPECT_TRUE(has_op(m, "if")) << m.graph().to_text();
}

TEST(OnnxImportOps, IfWithAKnownConditionImportsTheTakenBranchOnly) {
  const Tensor x = tensor<float>({1, 2, 3});
  onnx::Model yes = if_model(true, true).load();
  EXPECT_EQ(yes.run({x}).at(0).to_vector<float>(), (std::vector<float>{2, 3, 4}));
  EXPECT_FALSE(has_op(yes, "if")) << yes.graph().to_text();
  onnx::Model no = if_model(true, false).load();
  EXPECT_EQ(no.run({x}).at(0).to_vector<float>(), (std::vector<float>{2, 4, 6}));
  EXPECT_FALSE(has_op(no, "if")) << no.graph().to_text();
}

// Body (iter, cond_in, k_in, s_in) -> (cond_out, k_in + iter, s_in + x[, scans]);
// cond_out is cond_in, or k_out < limit when `limit` is given.
GraphBuilder loop_body(::onnx::NodeProto* n, const std::string& limit, bool scan) {
  GraphBuilder body = add_graph_attr(n, "body");
  body.input("iter", TensorProto::INT64, {});
  body.input("cond_in", TensorProto::BOOL, {});
  body.input("k_in", TensorProto::INT64, {});
  body.input("s_in", TensorProto::FLOAT, {2});
  body.node("Add", {"k_in", "iter"}, {"k_out"});
  body.node("Add", {"s_in", "x"}, {"s_out"});
  if (limit.empty()) body.node("Identity", {"cond_in"}, {"cond_out"});
  else body.node("Less", {"k_out", limit}, {"cond_out"});
  body.output("cond_out");
  body.output("k_out");
  body.output("s_out");
  if (scan) {
    body.node("Identity", {"k_out"}, {"k_scan"});
    body.output("k_scan");
  }
  return body;
}

TEST(OnnxImportOps, LoopWithASymbolicTripCountIsALoopNode) {
  ModelBuilder b;
  b.input("M", TensorProto::INT64, {});
  b.input("x", TensorProto::FLOAT, {2});
  b.boolean("keep", true);
  b.ints("k0", {0}, /*scalar=*/true);
  b.floats("s0", {2}, {0, 0});
  loop_body(b.node("Loop", {"M", "keep", "k0", "s0"}, {"k", "s"}), "", false);
  b.output("k");
  b.output("s");
  onnx::Model m = b.load();
  const Tensor x = tensor<float>({1, -2});
  std::vector<Tensor> four = m.run({scalar_tensor<int64_t>(4), x});
  EXPECT_EQ(four.at(0).item<int64_t>(), 0 + 0 + 1 + 2 + 3);
  EXPECT_EQ(four.at(1).to_vector<float>(), (std::vector<float>{4, -8}));
  std::vector<Tensor> none = m.run({scalar_tensor<int64_t>(0), x});
  EXPECT_EQ(none.at(0).item<int64_t>(), 0);
  EXPECT_EQ(none.at(1).to_vector<float>(), (std::vector<float>{0, 0}));
  EXPECT_TRUE(has_op(m, "loop")) << m.graph().to_text();
}

// A known trip count and condition: unrolled, so scan outputs work; the body's condition
// (k < 5) ends it after 4 of the 10 iterations.
TEST(OnnxImportOps, LoopWithAKnownConditionUnrollsAndStacksScanOutputs) {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {2});
  b.ints("M", {10}, /*scalar=*/true);
  b.ints("limit", {5}, /*scalar=*/true);
  b.boolean("keep", true);
  b.ints("k0", {0}, /*scalar=*/true);
  b.floats("s0", {2}, {0, 0});
  loop_body(b.node("Loop", {"M", "keep", "k0", "s0"}, {"k", "s", "ks"}), "limit", true);
  b.output("k");
  b.output("s");
  b.output("ks");
  onnx::Model m = b.load();
  std::vector<Tensor> out = m.run({tensor<float>({1, 2})});
  EXPECT_EQ(out.at(0).item<int64_t>(), 6);
  EXPECT_EQ(out.at(1).to_vector<float>(), (std::vector<float>{4, 8}));
  EXPECT_EQ(out.at(2).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 3, 6}));
  EXPECT_FALSE(has_op(m, "loop")) << m.graph().to_text();
}

// No trip count, a condition computed from an input: the first iteration unrolls, the
// rest is a Loop node.
TEST(OnnxImportOps, LoopWithAConditionComputedAtRunTime) {
  ModelBuilder b;
  b.input("limit", TensorProto::INT64, {});
  b.input("x", TensorProto::FLOAT, {2});
  b.boolean("keep", true);
  b.ints("k0", {0}, /*scalar=*/true);
  b.floats("s0", {2}, {0, 0});
  loop_body(b.node("Loop", {"", "keep", "k0", "s0"}, {"k", "s"}), "limit", false);
  b.output("k");
  b.output("s");
  onnx::Model m = b.load();
  const Tensor x = tensor<float>({1, 2});
  std::vector<Tensor> out = m.run({scalar_tensor<int64_t>(5), x});
  EXPECT_EQ(out.at(0).item<int64_t>(), 6);  // k: 0, 1, 3, 6
  EXPECT_EQ(out.at(1).to_vector<float>(), (std::vector<float>{4, 8}));
  out = m.run({scalar_tensor<int64_t>(0), x});  // the body runs once
  EXPECT_EQ(out.at(0).item<int64_t>(), 0);
  EXPECT_EQ(out.at(1).to_vector<float>(), (std::vector<float>{1, 2}));
  EXPECT_TRUE(has_op(m, "loop")) << m.graph().to_text();
}

TEST(OnnxImportOps, LoopScanOutputsNeedAKnownCondition) {
  ModelBuilder b;
  b.input("limit", TensorProto::INT64, {});
  b.input("x", TensorProto::FLOAT, {2});
  b.boolean("keep", true);
  b.ints("k0", {0}, /*scalar=*/true);
  b.floats("s0", {2}, {0, 0});
  b.ints("M", {3}, /*scalar=*/true);
  loop_body(b.node("Loop", {"M", "keep", "k0", "s0"}, {"k", "s", "ks"}), "limit", true);
  b.output("k");
  b.output("s");
  b.output("ks");
  // The condition depends on the input `limit`: the model imports per value of it.
  onnx::Model m = b.load();
  std::vector<Tensor> out = m.run({scalar_tensor<int64_t>(2), tensor<float>({1, 2})});
  EXPECT_EQ(out.at(0).item<int64_t>(), 3);  // k: 0, 1, 3 (stops at 3 >= 2)
  EXPECT_EQ(out.at(2).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 3}));
}

// Shapes, repeats, bounds, conditions and diagonals taken from a model input's values are
// read when the model runs (reshape_to, expand_to, range_of, nonzero): the model imports
// once, into one graph, and runs for any values.
TEST(OnnxImportOps, SizesFromInputValuesImportOnce) {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {2, 3});
  b.input("s", TensorProto::INT64, {2});
  b.input("n", TensorProto::INT64, {});
  b.input("keep", TensorProto::BOOL, {3});
  b.input("e", TensorProto::INT64, {3});
  b.ints("zero", {0}, /*scalar=*/true);
  b.ints("one", {1}, /*scalar=*/true);
  add_int_attr(b.node("Reshape", {"x", "s"}, {"reshaped"}), "allowzero", 0);
  b.node("Expand", {"x", "e"}, {"expanded"});
  b.node("ConstantOfShape", {"s"}, {"filled"});
  b.node("Range", {"zero", "n", "one"}, {"counted"});
  b.node("Tile", {"x", "s"}, {"tiled"});
  add_int_attr(b.node("Compress", {"x", "keep"}, {"kept"}), "axis", 1);
  b.node("Trilu", {"x", "n"}, {"upper"});
  for (const char* out : {"reshaped", "expanded", "filled", "counted", "tiled", "kept", "upper"}) b.output(out);
  onnx::Model m = b.load();
  for (const char* op : {"reshape_to", "expand_to", "range_of", "nonzero"}) EXPECT_TRUE(has_op(m, op)) << op;

  const Tensor x = arange(0, 6, 1, f32).reshape({2, 3});
  using Values = std::tuple<std::vector<int64_t>, int64_t, std::vector<bool>, std::vector<int64_t>>;
  for (auto [shape, n, keep, e] : std::vector<Values>{{{3, 2}, 2, {true, false, true}, {4, 1, 1}},
                                                      {{1, 6}, 0, {false, false, false}, {1, 2, 3}},
                                                      {{6, 1}, 4, {true, true, true}, {2, 1, 3}}}) {
    const Tensor s = tensor(shape, Shape{2});
    const std::vector<Tensor> out =
        m.run({x, s, scalar_tensor<int64_t>(n), tensor(keep, Shape{3}), tensor(e, Shape{3})});
    EXPECT_ALL_CLOSE(out.at(0), reshape(x, Shape(shape)), 0, 0);
    EXPECT_ALL_CLOSE(out.at(1), expand(x, Shape{e[0], 2, 3}), 0, 0);
    EXPECT_ALL_CLOSE(out.at(2), zeros(Shape(shape)), 0, 0);
    EXPECT_ALL_CLOSE(out.at(3), arange(0, double(n), 1, i64), 0, 0);
    EXPECT_EQ(out.at(4).shape(), (Shape{2 * shape[0], 3 * shape[1]}));
    EXPECT_ALL_CLOSE(slice(slice(out.at(4), 0, 0, 2), 1, 0, 3), x, 0, 0);
    std::vector<int64_t> kept;
    for (int64_t i = 0; i < 3; ++i)
      if (keep[size_t(i)]) kept.push_back(i);
    EXPECT_ALL_CLOSE(out.at(5), index_select(x, 1, tensor(kept, Shape{int64_t(kept.size())})), 0, 0);
    EXPECT_ALL_CLOSE(out.at(6), triu(x, n), 0, 0);
  }
}

// Slice's axes and steps fed too: each run slices the dims its axes name, by its steps;
// repeated axes or a step of 0 are errors when it runs.
TEST(OnnxImportOps, SliceAxesAndStepsFromInputValues) {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {3, 4});
  b.ints("starts", {-1});
  b.ints("ends", {-100});
  b.input("axes", TensorProto::INT64, {1});
  b.input("steps", TensorProto::INT64, {1});
  b.node("Slice", {"x", "starts", "ends", "axes", "steps"}, {"y"});
  b.output("y");
  onnx::Model m = b.load();
  const Tensor x = arange(0, 12, 1, f32).reshape({3, 4});
  auto run = [&](int64_t axis, int64_t step) {
    return m.run({x, tensor(std::vector<int64_t>{axis}, Shape{1}), tensor(std::vector<int64_t>{step}, Shape{1})}).at(0);
  };
  EXPECT_ALL_CLOSE(run(0, -1), index_select(x, 0, tensor(std::vector<int64_t>{2, 1, 0}, Shape{3})), 0, 0);
  EXPECT_ALL_CLOSE(run(-1, -2), index_select(x, 1, tensor(std::vector<int64_t>{3, 1}, Shape{2})), 0, 0);
  EXPECT_EQ(run(1, 1).shape(), (Shape{3, 0}));  // from the last column up to -100: nothing
  EXPECT_TRUE(testing::throws_with<Error>([&] { run(1, 0); }, {"range_of"}));
  EXPECT_TRUE(testing::throws_with<Error>([&] { run(2, 1); }, {"range_of"}));
}

// Pad's pads and value fed: each mode pads (or crops, by negative pads) per run.
TEST(OnnxImportOps, PadsFromInputValues) {
  for (std::string mode : {"constant", "edge", "reflect"}) {
    ModelBuilder b(13);
    b.input("x", TensorProto::FLOAT, {2, 3});
    b.input("pads", TensorProto::INT64, {4});
    b.input("value", TensorProto::FLOAT, {});
    add_string_attr(b.node("Pad", {"x", "pads", "value"}, {"y"}), "mode", mode);
    b.output("y");
    onnx::Model m = b.load();
    const Tensor x = arange(0, 6, 1, f32).reshape({2, 3});
    for (std::vector<int64_t> p : {std::vector<int64_t>{1, 2, 0, 1}, {0, -1, 1, 0}}) {
      const Tensor y = m.run({x, tensor(p, Shape{4}), scalar_tensor<float>(9)}).at(0);
      EXPECT_EQ(y.shape(), (Shape{2 + p[0] + p[2], 3 + p[1] + p[3]})) << mode;
    }
    if (mode == "constant") {  // a row of 9 above, two columns before and one after; then a crop
      Tensor y = m.run({x, tensor(std::vector<int64_t>{1, 2, 0, 1}, Shape{4}), scalar_tensor<float>(9)}).at(0);
      EXPECT_ALL_CLOSE(y, pad(x, {2, 1, 1, 0}, 9.0), 0, 0);
      y = m.run({x, tensor(std::vector<int64_t>{0, -1, 1, 0}, Shape{4}), scalar_tensor<float>(9)}).at(0);
      EXPECT_EQ(y.contiguous().to_vector<float>(), (std::vector<float>{1, 2, 4, 5, 9, 9}));
    }
    if (mode == "constant") {  // the same pads as a constant: negative ones crop there too
      ModelBuilder known(13);
      known.input("x", TensorProto::FLOAT, {2, 3});
      known.ints("pads", {0, -1, 1, 0});
      known.node("Pad", {"x", "pads"}, {"y"});
      known.output("y");
      EXPECT_EQ(known.load().run({x}).at(0).contiguous().to_vector<float>(), (std::vector<float>{1, 2, 4, 5, 0, 0}));
    }
    if (mode == "edge") {  // row 0 repeated above, columns 0 and 2 repeated around
      const Tensor y = m.run({x, tensor(std::vector<int64_t>{1, 1, 0, 1}, Shape{4}), scalar_tensor<float>(0)}).at(0);
      EXPECT_EQ(y.contiguous().to_vector<float>(), (std::vector<float>{0, 0, 1, 2, 2, 0, 0, 1, 2, 2, 3, 3, 4, 5, 5}));
    }
    if (mode == "reflect") {
      const Tensor y = m.run({x, tensor(std::vector<int64_t>{0, 2, 0, 0}, Shape{4}), scalar_tensor<float>(0)}).at(0);
      EXPECT_EQ(y.contiguous().to_vector<float>(), (std::vector<float>{2, 1, 0, 1, 2, 5, 4, 3, 4, 5}));
      EXPECT_TRUE(testing::throws_with<Error>(
          [&] { m.run({x, tensor(std::vector<int64_t>{0, 3, 0, 0}, Shape{4}), scalar_tensor<float>(0)}); }, {"index_select"}));
    }
  }
}

// Split's sizes fed: each run splits by the sizes it is given; sizes that do not add up to
// the dim are an error when it runs.
TEST(OnnxImportOps, SplitSizesFromInputValues) {
  ModelBuilder b(13);
  b.input("x", TensorProto::FLOAT, {2, 5});
  b.input("sizes", TensorProto::INT64, {2});
  add_int_attr(b.node("Split", {"x", "sizes"}, {"a", "b"}), "axis", 1);
  b.output("a");
  b.output("b");
  onnx::Model m = b.load();
  const Tensor x = arange(0, 10, 1, f32).reshape({2, 5});
  for (int64_t first : {0, 2, 5}) {
    const std::vector<Tensor> out = m.run({x, tensor(std::vector<int64_t>{first, 5 - first}, Shape{2})});
    EXPECT_ALL_CLOSE(out.at(0), slice(x, 1, 0, first), 0, 0);
    EXPECT_ALL_CLOSE(out.at(1), slice(x, 1, first, 5), 0, 0);
  }
  EXPECT_TRUE(testing::throws_with<Error>([&] { m.run({x, tensor(std::vector<int64_t>{1, 2}, Shape{2})}); },
                                          {"index_select"}));
}

// Axes fed as inputs (ReduceSum, Squeeze, Unsqueeze, CumSum) are read when the model runs:
// one import serves every value, and an empty axes input needs no values at all.
TEST(OnnxImportOps, AxesFromInputValuesImportOnce) {
  ModelBuilder b(13);
  b.input("x", TensorProto::FLOAT, {2, 1, 3});
  b.input("axes", TensorProto::INT64, {1});
  b.input("axis", TensorProto::INT64, {});
  b.input("none", TensorProto::INT64, {0});
  b.node("ReduceSum", {"x", "axes"}, {"summed"});
  add_int_attr(b.node("ReduceSum", {"x", "axes"}, {"dropped"}), "keepdims", 0);
  b.node("ReduceSum", {"x", "none"}, {"total"});
  b.node("Unsqueeze", {"x", "axes"}, {"wider"});
  b.node("CumSum", {"x", "axis"}, {"running"});
  for (const char* out : {"summed", "dropped", "total", "wider", "running"}) b.output(out);
  onnx::Model m = b.load();
  for (const char* op : {"sum_over", "unsqueeze_at", "cumsum"}) EXPECT_TRUE(has_op(m, op)) << op;
  const Tensor x = arange(0, 6, 1, f32).reshape({2, 1, 3});
  for (int64_t a : {0, -1, 1}) {
    const Tensor axes = tensor(std::vector<int64_t>{a}, Shape{1});
    const std::vector<Tensor> out = m.run({x, axes, scalar_tensor<int64_t>(a), zeros({0}, i64)});
    EXPECT_ALL_CLOSE(out.at(0), sum(x, {a}, true), 0, 0);
    EXPECT_ALL_CLOSE(out.at(1), sum(x, {a}), 0, 0);
    EXPECT_ALL_CLOSE(out.at(2), sum(x, {}, true), 0, 0);
    EXPECT_ALL_CLOSE(out.at(3), unsqueeze(x, a < 0 ? a + 4 : a), 0, 0);
    EXPECT_ALL_CLOSE(out.at(4), cumsum(x, a), 0, 0);
  }
  ModelBuilder squeeze(13);
  squeeze.input("x", TensorProto::FLOAT, {2, 1, 3});
  squeeze.input("axes", TensorProto::INT64, {1});
  squeeze.node("Squeeze", {"x", "axes"}, {"y"});
  squeeze.output("y");
  onnx::Model sm = squeeze.load();
  EXPECT_TRUE(has_op(sm, "squeeze_at"));
  EXPECT_EQ(sm.run({x, tensor(std::vector<int64_t>{-2}, Shape{1})}).at(0).shape(), (Shape{2, 3}));
  EXPECT_TRUE(testing::throws_with<Error>([&] { sm.run({x, tensor(std::vector<int64_t>{0}, Shape{1})}); }, {"which is not 1"}));
}

// Slice's starts and ends from input values, its axes and steps constant: the positions
// are computed when the model runs, with ONNX's clamping and negative steps.
TEST(OnnxImportOps, SliceBoundsFromInputValues) {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {2, 5});
  b.input("starts", TensorProto::INT64, {1});
  b.input("ends", TensorProto::INT64, {1});
  b.ints("axes", {1});
  b.ints("up", {2});
  b.ints("down", {-1});
  b.node("Slice", {"x", "starts", "ends", "axes", "up"}, {"forward"});
  b.node("Slice", {"x", "starts", "ends", "axes", "down"}, {"backward"});
  b.output("forward");
  b.output("backward");
  onnx::Model m = b.load();
  EXPECT_TRUE(has_op(m, "range_of")) << m.graph().to_text();
  const Tensor x = arange(0, 10, 1, f32).reshape({2, 5});
  auto columns = [&](std::vector<int64_t> at) { return index_select(x, 1, tensor(at, Shape{int64_t(at.size())})); };
  struct Bounds {
    int64_t start, end;
    std::vector<int64_t> forward, backward;
  };
  for (const Bounds& t : std::vector<Bounds>{{0, 5, {0, 2, 4}, {}},
                                             {-1, -100, {}, {4, 3, 2, 1, 0}},
                                             {1, 1000, {1, 3}, {}},
                                             {3, 1, {}, {3, 2}},
                                             {-4, 4, {1, 3}, {}}}) {
    const std::vector<Tensor> out = m.run({x, tensor(std::vector<int64_t>{t.start}, Shape{1}),
                                           tensor(std::vector<int64_t>{t.end}, Shape{1})});
    EXPECT_ALL_CLOSE(out.at(0), columns(t.forward), 0, 0) << t.start << ":" << t.end;
    EXPECT_ALL_CLOSE(out.at(1), columns(t.backward), 0, 0) << t.start << ":" << t.end;
  }
}

// Dropout in inference mode passes x through whatever ratio a model input gives: the ratio
// is not needed while loading, so the model imports once.
TEST(OnnxImportOps, InferenceDropoutWithAFedRatio) {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {2, 3});
  b.input("ratio", TensorProto::FLOAT, {});
  b.node("Dropout", {"x", "ratio"}, {"y", "mask"});
  b.output("y");
  b.output("mask");
  onnx::Model m = b.load();
  EXPECT_FALSE(has_op(m, "dropout")) << m.graph().to_text();
  const Tensor x = arange(0, 6, 1, f32).reshape({2, 3});
  for (float ratio : {0.5f, 0.9f}) {
    const std::vector<Tensor> out = m.run({x, scalar_tensor<float>(ratio)});
    EXPECT_ALL_CLOSE(out.at(0), x, 0, 0);
    EXPECT_EQ(out.at(1).to_vector<bool>(), std::vector<bool>(6, true));
  }
}

TEST(OnnxImportOps, OneHot) {
  ModelBuilder b;
  b.input("i", TensorProto::INT64, {3});
  b.ints("depth", {3}, /*scalar=*/true);
  b.floats("values", {2}, {0, 5});
  add_int_attr(b.node("OneHot", {"i", "depth", "values"}, {"y"}), "axis", 0);
  b.node("OneHot", {"i", "depth", "values"}, {"z"});  // axis -1
  b.output("y");
  b.output("z");
  onnx::Model m = b.load();
  std::vector<Tensor> out = m.run({tensor<int64_t>({-1, 0, 2})});  // -1 is depth - 1
  EXPECT_EQ(out.at(0).shape(), (Shape{3, 3}));
  EXPECT_EQ(out.at(0).to_vector<float>(), (std::vector<float>{0, 5, 0, 0, 0, 0, 5, 0, 5}));
  EXPECT_EQ(out.at(1).to_vector<float>(), (std::vector<float>{0, 0, 5, 5, 0, 0, 0, 0, 5}));
}

// A depth fed as a model input is read when the model runs (range_of): one import.
TEST(OnnxImportOps, OneHotWithAFedDepth) {
  ModelBuilder b;
  b.input("i", TensorProto::INT64, {3});
  b.input("depth", TensorProto::INT64, {});
  b.floats("values", {2}, {0, 5});
  b.node("OneHot", {"i", "depth", "values"}, {"y"});
  b.output("y");
  onnx::Model m = b.load();
  EXPECT_TRUE(has_op(m, "range_of")) << m.graph().to_text();
  const Tensor i = tensor<int64_t>({-1, 0, 2});  // -1 is depth - 1
  Tensor y = m.run({i, scalar_tensor<int64_t>(3)}).at(0);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{0, 0, 5, 5, 0, 0, 0, 0, 5}));
  y = m.run({i, scalar_tensor<int64_t>(4)}).at(0);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{0, 0, 0, 5, 5, 0, 0, 0, 0, 0, 5, 0}));
}

TEST(OnnxImportOps, DepthToSpaceInBothModes) {
  const int64_t b = 2, C = 8, H = 2, W = 3, c_out = C / (b * b);
  for (const char* mode : {"DCR", "CRD"}) {
    ModelBuilder m;
    m.input("x", TensorProto::FLOAT, {1, C, H, W});
    auto* n = m.node("DepthToSpace", {"x"}, {"y"});
    add_int_attr(n, "blocksize", b);
    add_string_attr(n, "mode", mode);
    m.output("y");
    const Tensor x = arange(0, double(C * H * W), 1, f32).reshape({1, C, H, W});
    Tensor y = m.load().run({x}).at(0);
    ASSERT_EQ(y.shape(), (Shape{1, c_out, H * b, W * b})) << mode;
    const std::vector<float> got = y.to_vector<float>(), in = x.contiguous().to_vector<float>();
    for (int64_t c = 0; c < c_out; ++c)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < b; ++i)
          for (int64_t w = 0; w < W; ++w)
            for (int64_t j = 0; j < b; ++j) {
              const int64_t channel = std::string(mode) == "DCR" ? (i * b + j) * c_out + c : c * b * b + i * b + j;
              const int64_t at = (c * H * b + h * b + i) * W * b + w * b + j;
              EXPECT_EQ(got[size_t(at)], in[size_t((channel * H + h) * W + w)]) << mode << " c" << c;
            }
  }
}

// Mod on int64 is exact over the whole range (both sign conventions); x mod 0 is 0.
TEST(OnnxImportOps, ModOnInt64IsExact) {
  const int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  const std::vector<int64_t> a{7, -7, 7, -7, lo, hi, lo, hi, 123456789012345678, -(int64_t(1) << 60) - 3, lo};
  const std::vector<int64_t> bs{3, 3, -3, -3, 7, -1000003, -1, hi, 99991, 1 << 20, lo};
  for (int fmod : {0, 1}) {
    ModelBuilder m;
    m.input("a", TensorProto::INT64, {int64_t(a.size())});
    m.input("b", TensorProto::INT64, {int64_t(a.size())});
    add_int_attr(m.node("Mod", {"a", "b"}, {"y"}), "fmod", fmod);
    m.output("y");
    const Shape shape{int64_t(a.size())};
    const std::vector<int64_t> got = m.load().run({tensor(a, shape), tensor(bs, shape)}).at(0).to_vector<int64_t>();
    for (size_t i = 0; i < a.size(); ++i) {
      int64_t want = bs[i] == -1 ? 0 : a[i] % bs[i];
      if (!fmod && want != 0 && (want < 0) != (bs[i] < 0)) want += bs[i];
      EXPECT_EQ(got[i], want) << a[i] << " mod " << bs[i] << " fmod=" << fmod;
    }
    // An integer divisor of 0 is an error naming the op, not a made-up value.
    EXPECT_THROW(m.load().run({tensor(a, shape), full(shape, 0, DType::i64)}), ValueError);
  }
}

// x.reshape(x.shape[0], prod(x.shape[1:])) as exporters write it: Shape -> Slice ->
// ReduceProd -> Concat -> Reshape. The slice and the product of the dims are known at load
// (batch stays a symbol), so one symbolic graph serves every batch size.
ModelBuilder flatten_model(int64_t opset) {
  ModelBuilder b(opset);
  b.input("x", TensorProto::FLOAT, {-1, 3, 4}, "batch");
  b.node("Shape", {"x"}, {"s"});
  b.ints("one", {1});
  b.ints("zero", {0});
  b.ints("big", {std::numeric_limits<int64_t>::max()});
  b.node("Slice", {"s", "zero", "one"}, {"batch_dim"});
  b.node("Slice", {"s", "one", "big"}, {"rest"});
  add_int_attr(b.node("ReduceProd", {"rest"}, {"features"}), "keepdims", 1);
  add_int_attr(b.node("Concat", {"batch_dim", "features"}, {"target"}), "axis", 0);
  b.node("Reshape", {"x", "target"}, {"y"});
  b.output("y");
  return b;
}

TEST(OnnxImportOps, ShapeSlicesAndProductsStaySymbolic) {
  onnx::Model m = flatten_model(17).load();
  EXPECT_TRUE(has_op(m, "view") || has_op(m, "reshape")) << m.graph().to_text();
  EXPECT_NE(m.graph().to_text().find("batch"), std::string::npos) << m.graph().to_text();
  for (int64_t batch : {2, 5}) {
    Tensor x = randn({batch, 3, 4});
    Tensor y = m.run({x}).at(0);
    EXPECT_EQ(y.shape(), (Shape{batch, 12}));
    EXPECT_EQ(y.to_vector<float>(), x.contiguous().to_vector<float>());
  }
}

// A negative step: x.shape[-1:0:-1] = [4, 3], after the batch: [batch, 4, 3].
TEST(OnnxImportOps, ShapeSliceWithANegativeStep) {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {-1, 3, 4}, "batch");
  b.node("Shape", {"x"}, {"s"});
  b.ints("zero", {0});
  b.ints("one", {1});
  b.ints("start", {-1});
  b.ints("step", {-1});
  b.node("Slice", {"s", "zero", "one"}, {"batch_dim"});
  b.node("Slice", {"s", "start", "zero", "zero", "step"}, {"reversed"});
  add_int_attr(b.node("Concat", {"batch_dim", "reversed"}, {"target"}), "axis", 0);
  b.node("Reshape", {"x", "target"}, {"y"});
  b.output("y");
  onnx::Model m = b.load();
  for (int64_t batch : {1, 3}) EXPECT_EQ(m.run({randn({batch, 3, 4})}).at(0).shape(), (Shape{batch, 4, 3}));
}

}  // namespace
}  // namespace baton
