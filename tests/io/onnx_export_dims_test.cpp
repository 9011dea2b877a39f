// ONNX export of symbolic dims: slices, reshapes and expands by amounts that depend on a
// `batch` dim (or on nonzero's count) are written as shape arithmetic (Shape -> Mul ->
// Concat), pass ONNX's checker, read back as one symbolic graph and run at several batch
// sizes; in optimized saves, ai.baton ops keep symbolic attributes as their text.
#include <gtest/gtest.h>

#include "harness/op_harness.h"
#include "io/export_round_trip.h"

namespace baton {
namespace {

TEST(OnnxExportDims, SliceWithSymbolicBounds) {
  Graph g;
  Tensor x = g.placeholder(f32, {"batch", 3}, "x");
  const int64_t batch = x.shape()[0];
  Tensor both = cat({x, x * 2.0f}, 0);                     // [2*batch, 3]
  Tensor second = slice(both, 0, batch, sym::mul(batch, 2));  // the doubled half
  Tensor first = slice(both, 0, 0, batch);
  expect_round_trip(g, {x}, {second, first}, {{randn({2, 3})}, {randn({5, 3})}}, "Slice", "slice");
}

// The sizes are computed inside the branch, from the main graph's input.
TEST(OnnxExportDims, SymbolicSliceInsideABranch) {
  Graph g;
  Tensor x = g.placeholder(f32, {"batch", 3}, "x");
  const int64_t batch = x.shape()[0];
  Tensor both = cat({x, x * 2.0f}, 0);
  Tensor y = cond(gt(x.sum(), 0), [&] { return slice(both, 0, batch, sym::mul(batch, 2)); },
                  [&] { return slice(both, 0, 0, batch).view({batch, 3}); });
  expect_round_trip(g, {x}, {y}, {{ones({2, 3})}, {-ones({3, 3})}}, "If", "if");
}

// [batch, n, 6] -> [n, 6*batch]: neither symbol copies the input's dim at its place.
TEST(OnnxExportDims, ReshapeToSymbolicProducts) {
  Graph g;
  Tensor x = g.placeholder(f32, {"batch", "n", 6}, "x");
  const int64_t batch = x.shape()[0], n = x.shape()[1];
  Tensor y = x.reshape({n, sym::mul(batch, 6)}) * 2.0f;
  expect_round_trip(g, {x}, {y}, {{randn({2, 3, 6})}, {randn({4, 1, 6})}}, "Reshape", "view");
}

// A row expanded to `batch` rows, batch taken from another input.
TEST(OnnxExportDims, ExpandToADimOfAnotherInput) {
  Graph g;
  Tensor x = g.placeholder(f32, {"batch", 3}, "x");
  Tensor row = g.placeholder(f32, {1, 3}, "row");
  Tensor y = row.expand({x.shape()[0], 3}) - x;
  expect_round_trip(g, {x, row}, {y}, {{randn({2, 3}), randn({1, 3})}, {randn({6, 3}), randn({1, 3})}}, "Expand",
                    "expand");
}

// The gradient of a slice from a symbolic start (slice_backward, whose standard form lists
// the positions) holds the symbolic shape and start; an optimized save keeps them as text.
TEST(OnnxExportDims, BatonDomainOpsKeepSymbolicAttributes) {
  Graph g;
  Tensor x = g.placeholder(f32, {"batch", 4}, "x");
  const int64_t batch = x.shape()[0];
  Tensor both = cat({x, x * 2.0f}, 0);
  Tensor half = slice(both, 0, batch, sym::mul(batch, 2));
  Tensor dx = grad(sum(half * half), {x}).at(0);
  g.set_outputs({dx});
  EXPECT_THROWS_WITH(GraphError, onnx::save_bytes(g), "slice_backward", "symbolic start", "ai.baton");
  const std::string bytes = onnx::save_bytes(g, {.optimized = true});
  ::onnx::ModelProto proto;
  ASSERT_TRUE(proto.ParseFromString(bytes));
  bool symbolic_attribute = false;
  for (const ::onnx::NodeProto& n : proto.graph().node())
    for (const ::onnx::AttributeProto& a : n.attribute())
      symbolic_attribute = symbolic_attribute || (n.domain() == "ai.baton" && a.strings_size() > 0);
  EXPECT_TRUE(symbolic_attribute) << proto.DebugString();
  onnx::Model m = onnx::load_bytes(bytes, "grad.onnx");
  Session session(g);
  auto expect_same = [&](onnx::Model& model, int64_t batch) {
    const Tensor input = randn({batch, 4});
    onnx::Comparison c = onnx::compare(model.run({input}).at(0), session.run({dx}, {{x, input}}).at(0));
    EXPECT_TRUE(c.ok()) << c.problem;
  };
  for (int64_t batch : {2, 5}) expect_same(m, batch);
  // Loaded with the batch fixed, the attribute's `batch` is that size.
  onnx::Model fixed = onnx::load_bytes(bytes, "grad.onnx", {.input_shapes = {{"x", {3, 4}}}});
  expect_same(fixed, 3);
}

// `batch` where the only input has 2*batch rows: divided out of that dim (Div), the export
// reads back as one graph for every size.
TEST(OnnxExportDims, ASymbolDividedOutOfAMultiple) {
  Graph g;
  const int64_t batch = sym::named("batch");
  Tensor x = g.placeholder(f32, {sym::mul(batch, 2), 3}, "x");
  Tensor y = x.reshape({batch, 6}) * 2.0f;
  Tensor z = x.sum().reshape({1}).expand({batch, 1});
  expect_round_trip(g, {x}, {y, z}, {{randn({4, 3})}, {randn({10, 3})}}, "Div", "view");
}

// nonzero's count is a symbol no input has: it exports as NonZero (transposed), a later
// size that needs it is read from that output's shape, and the model reads back as one
// graph that runs for any count.
TEST(OnnxExportDims, ACountSizedByTheValues) {
  Graph g;
  Tensor x = g.placeholder(f32, {"n", 2}, "x");
  Tensor at = nonzero(x);  // [count, 2]
  Tensor ones_per_hit = x.sum().reshape({1}).expand({at.shape()[0], 1});
  Tensor y = cat({cast(at, f32), ones_per_hit}, 1);
  Tensor m1 = tensor(std::vector<float>{0, 1, 2, 0, 0, 0}, Shape{3, 2});
  Tensor m2 = tensor(std::vector<float>{3, 1, 2, 5}, Shape{2, 2});
  expect_round_trip(g, {x}, {y}, {{m1}, {m2}, {zeros({4, 2})}}, "NonZero", "nonzero");
}

// reshape_to's dims are symbols only its output has (its shape input is fed): a later
// size that needs one is read from that output's shape.
TEST(OnnxExportDims, DimsFromAFedShape) {
  Graph g;
  Tensor x = g.placeholder(f32, {"n", 4}, "x");
  Tensor s = g.placeholder(i64, {2}, "s");
  Tensor rows = reshape_to(x, s);  // [reshape_to_1, reshape_to_2]
  Tensor y = rows + x.sum().reshape({1, 1}).expand({rows.shape()[0], 1});
  auto shape = [](std::vector<int64_t> v) { return tensor(v, Shape{2}); };
  expect_round_trip(g, {x, s}, {y}, {{randn({3, 4}), shape({6, 2})}, {randn({2, 4}), shape({1, -1})}}, "Reshape",
                    "reshape_to");
}

// non_max_suppression's limits fed as graph inputs export as NonMaxSuppression's inputs.
TEST(OnnxExportDims, NonMaxSuppressionLimitsFed) {
  Graph g;
  Tensor boxes = g.placeholder(f32, {1, 3, 4}, "boxes"), scores = g.placeholder(f32, {1, 1, 3}, "scores");
  Tensor max_boxes = g.placeholder(i64, {}, "max_boxes"), iou = g.placeholder(f32, {}, "iou");
  Tensor y = non_max_suppression(boxes, scores, NmsLimits{max_boxes, iou, Tensor()});
  const Tensor b = tensor<float>({{{0, 0, 1, 1}, {0, 0.1f, 1, 1.1f}, {0, 5, 1, 6}}});
  const Tensor s = tensor<float>({{{0.9f, 0.8f, 0.7f}}});
  expect_round_trip(g, {boxes, scores, max_boxes, iou}, {y},
                    {{b, s, scalar_tensor<int64_t>(3), scalar_tensor<float>(0.5f)},
                     {b, s, scalar_tensor<int64_t>(1), scalar_tensor<float>(0.95f)}},
                    "NonMaxSuppression", "non_max_suppression");
}

// A dim no graph input has cannot be computed: the error names the node and the dim.
TEST(OnnxExportDims, ASymbolNoInputHasIsAnError) {
  Graph g;
  Tensor x = g.placeholder(f32, {"batch", 3}, "x");
  const int line = __LINE__ + 1;
  Tensor y = x.sum().reshape({1}).expand({sym::named("other"), 3});
  g.set_outputs({y});
  EXPECT_THROWS_WITH(GraphError, onnx::save_bytes(g), str("(onnx_export_dims_test.cpp:", line, ")"),
                     "other is no dim of a graph input, nor a factor of one");
}

}  // namespace
}  // namespace baton
