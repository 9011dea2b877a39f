// baton's index ops written as ONNX (opset 17): nonzero (NonZero, transposed), unique,
// reverse_sequence (ReverseSequence, with transposes when its time and batch dims are not
// the first two), and the accumulating scatters as ScatterElements with reduction "add":
// scatter_add directly, index_add and slice_backward with their 1-D positions spread over
// the updates' shape.
#include "io/onnx/export_compose.h"

namespace baton::onnx::detail {
namespace {

// ReverseSequence wants time and batch as dims 0 and 1: others are moved there and back.
void reverse_sequence_export(ExportContext& c) {
  const size_t rank = c.input_type(0).shape.rank();
  const int64_t batch = normalized_dim(c.attrs().i("batch_dim"), rank), time = normalized_dim(c.attrs().i("time_dim"), rank);
  if (batch <= 1 && time <= 1) {
    c.add("ReverseSequence", {c.input(0), c.input(1)}, {c.output()}).attr("batch_axis", batch).attr("time_axis", time);
    return;
  }
  std::vector<int64_t> perm{time, batch}, inverse(rank);
  for (int64_t d = 0; d < int64_t(rank); ++d)
    if (d != time && d != batch) perm.push_back(d);
  for (size_t i = 0; i < rank; ++i) inverse[size_t(perm[i])] = int64_t(i);
  Step moved = step(c, "Transpose", {c.input(0)});
  moved.node.attr("perm", perm);
  Step reversed = step(c, "ReverseSequence", {moved.out, c.input(1)});
  reversed.node.attr("batch_axis", int64_t(1)).attr("time_axis", int64_t(0));
  c.add("Transpose", {reversed.out}, {c.output()}).attr("perm", inverse);
}

// nonzero's [count, rank] is NonZero's [rank, count] transposed. Its count is a symbol only
// this output has: later dims that need it as a value read it from the output's shape.
void nonzero_export(ExportContext& c) {
  Step coordinates = step(c, "NonZero", {c.input(0)});
  c.add("Transpose", {coordinates.out}, {c.output()}).attr("perm", std::vector<int64_t>{1, 0});
  c.writer().add_shape_source(c.output(), c.output_type().shape.raw());
}

// unique is Unique with its dim as the axis; its count, like nonzero's, is read from an
// output's shape where a later dim needs it.
void unique_export(ExportContext& c) {
  OnnxNode n = c.add("Unique", {c.input(0)}, {c.output(0), c.output(1), c.output(2), c.output(3)});
  n.attr("sorted", c.attrs().i("sorted"));
  if (c.attrs().has("dim")) n.attr("axis", c.attrs().i("dim"));
  c.writer().add_shape_source(c.output(1), c.output_type(1).shape.raw());
}

// The 1-D positions `index` along `dim`, repeated over the rest of `updates`' shape.
std::string spread_index(ExportContext& c, const std::string& index, int64_t dim, size_t rank, const std::string& updates) {
  std::vector<int64_t> column(rank, 1);
  column[size_t(dim)] = -1;
  const std::string reshaped = step(c, "Reshape", {index, c.ints(column, "shape")}).out;
  return step(c, "Expand", {reshaped, step(c, "Shape", {updates}).out}).out;
}

// index_add(base, index, src) {dim}: base[.., index[j], ..] += src[.., j, ..].
void index_add_export(ExportContext& c) {
  const size_t rank = c.input_type(0).shape.rank();
  const int64_t dim = normalized_dim(c.attrs().i("dim"), rank);
  scatter_add_to(c, {c.input(0), spread_index(c, c.input(1), dim, rank, c.input(2)), c.input(2)}, c.output(), dim);
}

// slice_backward(g) {dim, start, end, step, shape}: zeros of `shape` (its symbols computed
// from the graph inputs) holding g at the sliced positions start, start + step, ... The
// positions are listed, so their count and start must be sizes; otherwise an optimized save
// writes the op in the ai.baton domain, and a plain one fails.
void slice_backward_export(ExportContext& c) {
  const ops::Attrs& a = c.attrs();
  const std::vector<int64_t> shape = a.ints("shape");
  const int64_t dim = normalized_dim(a.i("dim"), shape.size());
  const graph::Dim& count = c.input_type(0).shape[size_t(dim)];
  if (!count.is_static() || sym::is_symbol(a.i("start")) || (a.i("start") < 0 && sym::is_symbol(shape[size_t(dim)]))) {
    if (export_in_baton_domain(c)) return;
    c.fail("slices a symbolic number of positions or from a symbolic start, which standard ONNX cannot list here "
           "(an optimized save writes it in the ai.baton domain)");
  }
  const int64_t start = a.i("start") < 0 ? a.i("start") + shape[size_t(dim)] : a.i("start");
  std::vector<int64_t> positions;
  for (int64_t j = 0; j < count.value(); ++j) positions.push_back(start + j * a.i("step"));
  const std::string zeros_of_shape = zeros_of(c, shape, c.input_type(0).dtype);
  const std::string index = spread_index(c, c.ints(positions, "positions"), dim, shape.size(), c.input(0));
  scatter_add_to(c, {zeros_of_shape, index, c.input(0)}, c.output(), dim);
}

}  // namespace

BATON_ONNX_EXPORTER("nonzero", nonzero_export);
BATON_ONNX_EXPORTER("unique", unique_export);
BATON_ONNX_EXPORTER("reverse_sequence", reverse_sequence_export);
BATON_ONNX_EXPORTER("scatter_add", [](ExportContext& c) {
  scatter_add_to(c, {c.input(0), c.input(1), c.input(2)}, c.output(), normalized_dim(c.attrs().i("dim"), c.input_type(0).shape.rank()));
});
BATON_ONNX_EXPORTER("index_add", index_add_export);
BATON_ONNX_EXPORTER("slice_backward", slice_backward_export);

}  // namespace baton::onnx::detail
