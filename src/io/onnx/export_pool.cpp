// Max pooling's indices and their gradients written as ONNX (opset 17). ONNX's MaxPool
// numbers each maximum by its place in the whole input (n, c, h, w); baton's max_pool2d by
// its place h * W + w in its image plane, and max_pool2d_window (a plan's form) by its
// place ky * kw + kx in its window. The gradients scatter-add the output gradient at
// those places of a zero image (ScatterElements with reduction "add").
#include "io/onnx/export_compose.h"

namespace baton::onnx::detail {
namespace {

struct PoolShape {
  std::vector<int64_t> kernel, stride, padding;
  int64_t height = 0, width = 0;           // of the input
  int64_t out_height = 0, out_width = 0;   // of the output
};

PoolShape pool_shape(ExportContext& c, const std::vector<int64_t>& input, const std::vector<int64_t>& output) {
  const ops::Attrs& a = c.attrs();
  return {a.ints("kernel"), pool_strides(a), a.ints("padding"), input.at(2), input.at(3), output.at(2), output.at(3)};
}

// Where each output's window starts: rows [out_height, 1] and columns [out_width], i64.
std::pair<std::string, std::string> window_origins(ExportContext& c, const PoolShape& p) {
  std::vector<int64_t> rows, cols;
  for (int64_t o = 0; o < p.out_height; ++o) rows.push_back(o * p.stride[0] - p.padding[0]);
  for (int64_t o = 0; o < p.out_width; ++o) cols.push_back(o * p.stride[1] - p.padding[1]);
  return {c.constant(tensor(rows, Shape{p.out_height, 1}), "rows"), c.constant(tensor(cols, Shape{p.out_width}), "cols")};
}

std::string i64_scalar(ExportContext& c, int64_t v) { return c.constant(scalar_tensor<int64_t>(v), "n"); }

// offset = ky * kw + kx  <->  place = (row0 + ky) * W + col0 + kx.
std::string window_offsets(ExportContext& c, const std::string& plane, const PoolShape& p) {
  const auto [rows, cols] = window_origins(c, p);
  const std::string w = i64_scalar(c, p.width);
  const std::string ky = step(c, "Sub", {step(c, "Div", {plane, w}).out, rows}).out;
  const std::string kx = step(c, "Sub", {step(c, "Mod", {plane, w}).out, cols}).out;
  return step(c, "Add", {step(c, "Mul", {ky, i64_scalar(c, p.kernel[1])}).out, kx}).out;
}

std::string places_of_offsets(ExportContext& c, const std::string& offsets, const PoolShape& p) {
  const auto [rows, cols] = window_origins(c, p);
  const std::string offset = cast_to(c, offsets, DType::i32, DType::i64), kw = i64_scalar(c, p.kernel[1]);
  const std::string row = step(c, "Add", {rows, step(c, "Div", {offset, kw}).out}).out;
  const std::string col = step(c, "Add", {cols, step(c, "Mod", {offset, kw}).out}).out;
  return step(c, "Add", {step(c, "Mul", {row, i64_scalar(c, p.width)}).out, col}).out;
}

// The gradient for an input of shape `in` into `out`: `gy` added at `places` (h * W + w)
// of each plane.
void scatter_gradient(ExportContext& c, const std::vector<int64_t>& in, const std::string& places,
                      const std::string& gy, const std::string& out) {
  const std::string planes = c.ints({in[0], in[1], -1}, "planes");
  const std::string zero = zeros_of(c, {in[0], in[1], in[2] * in[3]}, c.input_type(0).dtype);
  const std::string scattered = c.fresh("scattered");
  scatter_add_to(c, {zero, step(c, "Reshape", {places, planes}).out, step(c, "Reshape", {gy, planes}).out},
                 scattered, 2);
  c.add("Reshape", {scattered, c.ints(in, "shape")}, {out});
}

// gy where the window maxima are > 0 (a relu's backward fused in, see
// src/passes/fuse_epilogue.cpp), else 0.
std::string counted(ExportContext& c, const std::string& gy, const std::string& maxima) {
  const std::string zero = zeros_of(c, {1}, c.input_type(0).dtype);
  return step(c, "Where", {step(c, "Greater", {maxima, zero}).out, gy, zero}).out;
}

// With a third input (the window maxima), only gradients whose window's maximum is > 0 land.
void pool_backward_export(ExportContext& c, bool window) {
  const std::vector<int64_t> gy = c.static_dims(c.input_type(0).shape, "the gradient");
  const std::vector<int64_t> in = c.attrs().ints("input_shape");
  const PoolShape p = pool_shape(c, in, gy);
  const std::string gradient = c.node.num_inputs() == 3 ? counted(c, c.input(0), c.input(2)) : c.input(0);
  scatter_gradient(c, in, window ? places_of_offsets(c, c.input(1), p) : c.input(1), gradient, c.output());
}

}  // namespace

void export_window_gradient(ExportContext& c, const WindowGradient& g, const std::string& out) {
  const PoolShape p{g.kernel,         g.stride,           {0, 0}, g.input_shape[2],
                    g.input_shape[3], g.output_shape[2], g.output_shape[3]};
  const std::string gradient = g.maxima.empty() ? g.gy : counted(c, g.gy, g.maxima);
  scatter_gradient(c, g.input_shape, places_of_offsets(c, g.offsets, p), gradient, out);
}

void export_pool_indices(ExportContext& c, const std::string& flat) {
  const std::vector<int64_t> in = c.static_dims(c.input_type(0).shape, "the input");
  const PoolShape p = pool_shape(c, in, c.static_dims(c.output_type(0).shape, "the output"));
  const std::string plane_size = i64_scalar(c, p.height * p.width);
  if (c.node.op_name() != "max_pool2d_window") return void(c.add("Mod", {flat, plane_size}, {c.output(1)}));
  const std::string plane = step(c, "Mod", {flat, plane_size}).out;
  c.add("Cast", {window_offsets(c, plane, p)}, {c.output(1)}).attr("to", onnx_type(DType::i32));
}

BATON_ONNX_EXPORTER("max_pool2d_backward", [](ExportContext& c) { pool_backward_export(c, false); });
BATON_ONNX_EXPORTER("max_pool2d_window_backward", [](ExportContext& c) { pool_backward_export(c, true); });

}  // namespace baton::onnx::detail
