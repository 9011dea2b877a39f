// Helpers for exporters that write a baton op as several ONNX nodes (export_math.cpp,
// export_nn.cpp, export_vision.cpp, export_pool.cpp, export_index.cpp, export_signal.cpp,
// export_text.cpp): a node whose output is a fresh intermediate, scalar constants, casts,
// zeros, scatter-adds. Also the exporters that export_ops.cpp hands its harder cases to.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "baton/ops.h"
#include "io/onnx/exporter.h"

namespace baton::onnx::detail {

// Appends `op_type` writing a fresh intermediate; returns the node (for attributes) and
// that value's name.
struct Step {
  OnnxNode node;
  std::string out;
};
inline Step step(ExportContext& c, const std::string& op_type, const Names& inputs) {
  std::string out = c.fresh(op_type);
  return {c.add(op_type, inputs, {out}), out};
}

// A scalar constant of `dtype`.
inline std::string scalar(ExportContext& c, double value, DType dtype) {
  return c.constant(cast(scalar_tensor<double>(value), dtype), "s");
}

inline int64_t onnx_type(DType dtype) { return int64_t(to_onnx_type(dtype)); }

// x as `dtype` (x itself when it already is).
inline std::string cast_to(ExportContext& c, const std::string& x, DType from, DType to) {
  if (from == to) return x;
  Step s = step(c, "Cast", {x});
  s.node.attr("to", onnx_type(to));
  return s.out;
}

// Zeros of a shape that may hold symbols, made when the model runs (no initializer of that
// size).
inline std::string zeros_of(ExportContext& c, const std::vector<int64_t>& shape, DType dtype) {
  Step s = step(c, "ConstantOfShape", {c.dims(shape, "shape")});
  s.node.attr("value", zeros(Shape{1}, dtype));
  return s.out;
}

// dim counted from the end when negative.
inline int64_t normalized_dim(int64_t dim, size_t rank) { return dim < 0 ? dim + int64_t(rank) : dim; }

// A pool's strides: {0, 0} means the kernel's.
inline std::vector<int64_t> pool_strides(const ops::Attrs& a) {
  const std::vector<int64_t> stride = a.ints("stride");
  return stride == std::vector<int64_t>{0, 0} ? a.ints("kernel") : stride;
}

// out = base with `updates` added at `index` along `axis` (ScatterElements, reduction add).
inline void scatter_add_to(ExportContext& c, const Names& base_index_updates, const std::string& out, int64_t axis) {
  c.add("ScatterElements", base_index_updates, {out}).attr("axis", axis).attr("reduction", std::string("add"));
}

// A 2-D convolution's geometry, as ONNX attributes.
struct ConvGeometry {
  std::vector<int64_t> kernel, stride, padding, dilation;
  int64_t groups = 1;
};
// ConvTranspose of inputs (gy, w) into c's output, the size `input_shape` (export_nn.cpp);
// gy's dims are c's input 0's unless given.
void transposed_conv(ExportContext& c, const Names& inputs, const ConvGeometry& g,
                     const std::vector<int64_t>& input_shape,
                     std::optional<std::vector<int64_t>> gradient_shape = std::nullopt);

// Cases of export_ops.cpp's exporters that take more than one ONNX node.
void export_batch_norm_training(ExportContext& c);  // export_nn.cpp
void export_layer_norm_stats(ExportContext& c);     // export_nn.cpp
void export_adaptive_avg_pool(ExportContext& c);    // export_vision.cpp: any output size
// baton's indices (output 1) from the flat Indices output of ONNX's MaxPool (export_pool.cpp).
void export_pool_indices(ExportContext& c, const std::string& flat);
// A max pooling's input gradient (shape input_shape) into `out`, from its output gradient
// gy (output_shape), window offsets and maxima ("" for none): windows that neither overlap
// nor pad (export_pool.cpp).
struct WindowGradient {
  std::string gy, offsets, maxima;
  std::vector<int64_t> kernel, stride, input_shape, output_shape;
};
void export_window_gradient(ExportContext& c, const WindowGradient& g, const std::string& out);

}  // namespace baton::onnx::detail
