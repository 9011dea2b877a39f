// ONNX's quantization ops on baton's storage dtypes (u8 and i8 values, held in i32 while a
// model imports: storage_types.cpp): QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear,
// ConvInteger, MatMulInteger, QLinearConv and QLinearMatMul. Integer products run as f64
// convolutions and matmuls of the zero-point-shifted values: exact while each sum stays
// below 2^53 (a 255 * 255 product summed 10^11 times). Requantizing follows ONNX Runtime:
// the f32 multiplier x_scale * w_scale / y_scale, rounded half to even, saturated.
#include "baton/ops.h"
#include "io/onnx/importer.h"

namespace baton::onnx::detail {
namespace {

// The values a quantized type holds.
std::pair<double, double> range_of(const NodeContext& c, DType t) {
  switch (t) {
    case DType::u8: return {0, 255};
    case DType::i8: return {-128, 127};
    case DType::u16: return {0, 65535};
    case DType::i16: return {-32768, 32767};
    case DType::i32: return {-2147483648.0, 2147483647.0};
    default: c.fail(str("quantizes to ", t, ", not an integer type"));
  }
}

// A scale or zero point: one value, or one per index of x's dim `axis` (opset 13; negative
// counts from the end, and it matters only then).
Tensor along(const NodeContext& c, const Tensor& v, int64_t rank, int64_t axis, const char* what) {
  if (v.numel() == 1) return reshape(v, Shape{});
  if (v.dim() != 1) c.fail(str(what, " must be a scalar or a vector, not of shape ", v.shape()));
  axis = normalize_axis(c, axis, rank);
  Shape s(size_t(rank), 1);
  s[size_t(axis)] = v.shape()[0];
  return reshape(v, s);
}

// The zero point of input i (absent: 0 of `fallback`), as f64, and its storage dtype.
std::pair<Tensor, DType> zero_point(const NodeContext& c, size_t i, DType fallback) {
  if (!c.has_input(i)) return {scalar_tensor<double>(0.0), fallback};
  return {cast(c.input(i), f64), c.onnx_dtype(i)};
}

// round(v) + zero point, saturated to t and stored as t.
Tensor saturate(const NodeContext& c, const Tensor& rounded, DType t) {
  const auto [lo, hi] = range_of(c, t);
  return cast(clamp(rounded, lo, hi), t);
}

// An input of a quantized product shifted by its zero point: x - zp as exact f64 values.
// `zp_axis` places a per-row or per-channel zero point (-1: it must be a scalar).
Tensor shifted(const NodeContext& c, size_t x, size_t zp, int64_t zp_axis) {
  const Tensor v = cast(c.input(x), f64);
  if (!c.has_input(zp)) return v;
  const Tensor z = cast(c.input(zp), f64);
  if (z.numel() == 1) return v - reshape(z, Shape{});
  if (zp_axis < 0) c.fail(str("input ", zp, " (a zero point) must be a scalar, not of shape ", z.shape()));
  return v - along(c, z, v.dim(), zp_axis, "the zero point");
}

// The node's Conv attributes applied to f64 operands, through Conv's own importer.
Tensor conv_of(const NodeContext& c, const Tensor& x, const Tensor& w) {
  NodeContext conv(c.node, c.opset, {x, w}, c.importer);
  return (*find_importer("Conv"))(conv).at(0);
}

// matmul of f64 operands; ONNX's Integer and QLinear matmuls take 2-D and batched operands.
Tensor requantize(const NodeContext& c, const Tensor& acc, size_t x_scale, size_t w_scale, size_t y_scale,
                  size_t y_zp, int64_t w_scale_axis, int64_t rank) {
  const Tensor ws = c.input(w_scale).numel() == 1 ? reshape(c.input(w_scale), Shape{})
                                                   : along(c, c.input(w_scale), rank, w_scale_axis, "w_scale");
  const Tensor multiplier = cast(reshape(c.input(x_scale), Shape{}), f32) * cast(ws, f32) /
                            cast(reshape(c.input(y_scale), Shape{}), f32);
  const auto [zp, t] = zero_point(c, y_zp, DType::u8);
  return saturate(c, round(cast(acc, f32) * multiplier) + cast(zp, f32), t);
}

Outputs quantize_linear(NodeContext& c) {
  const Tensor& x = c.input(0);
  const int64_t axis = c.attr_int("axis", 1);
  const Tensor scale = along(c, cast(c.input(1), f32), x.dim(), axis, "y_scale");
  const auto [zp, t] = zero_point(c, 2, DType::u8);
  return {saturate(c, round(cast(x, f32) / scale) + along(c, cast(zp, f32), x.dim(), axis, "y_zero_point"), t)};
}

Outputs dequantize_linear(NodeContext& c) {
  const Tensor& x = c.input(0);
  const int64_t axis = c.attr_int("axis", 1);
  const Tensor scale = along(c, cast(c.input(1), f32), x.dim(), axis, "x_scale");
  const Tensor zp = c.has_input(2) ? along(c, cast(c.input(2), f32), x.dim(), axis, "x_zero_point")
                                   : scalar_tensor<float>(0.f);
  return {(cast(x, f32) - zp) * scale};
}

// y_scale = (max(x, 0) - min(x, 0)) / 255, y_zero_point = round(-min / scale), both u8.
Outputs dynamic_quantize_linear(NodeContext& c) {
  const Tensor x = cast(c.input(0), f32);
  const Tensor lo = minimum(min(x), scalar_tensor<float>(0.f)), hi = maximum(max(x), scalar_tensor<float>(0.f));
  const Tensor scale = (hi - lo) / 255.f;
  const Tensor zp = clamp(round((0.f - lo) / scale), 0, 255);
  return {saturate(c, round(x / scale) + zp, DType::u8), scale, cast(zp, DType::u8)};
}

// ConvInteger(x, w, x_zero_point, w_zero_point): an i32 convolution of the shifted values;
// w's zero point may be one per output channel.
Outputs conv_integer(NodeContext& c) {
  return {cast(conv_of(c, shifted(c, 0, 2, -1), shifted(c, 1, 3, 0)), i32)};
}

// MatMulInteger(a, b, a_zero_point, b_zero_point): a's zero point may be one per row, b's one
// per column.
Outputs matmul_integer(NodeContext& c) {
  const Tensor a = shifted(c, 0, 2, c.input(0).dim() - 2), b = shifted(c, 1, 3, c.input(1).dim() - 1);
  return {cast(matmul(a, b), i32)};
}

// QLinearConv(x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, bias): w's scale and zero
// point may be one per output channel; the i32 bias adds to the accumulator.
Outputs qlinear_conv(NodeContext& c) {
  Tensor acc = conv_of(c, shifted(c, 0, 2, -1), shifted(c, 3, 5, 0));
  if (c.has_input(8)) acc = acc + per_channel(cast(c.input(8), f64), acc.dim());
  return {requantize(c, acc, 1, 4, 6, 7, 1, acc.dim())};
}

// QLinearMatMul(a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp).
Outputs qlinear_matmul(NodeContext& c) {
  const Tensor a = shifted(c, 0, 2, c.input(0).dim() - 2), b = shifted(c, 3, 5, c.input(3).dim() - 1);
  const Tensor acc = matmul(a, b);
  return {requantize(c, acc, 1, 4, 6, 7, acc.dim() - 1, acc.dim())};
}

}  // namespace

BATON_ONNX_IMPORTER("QuantizeLinear", quantize_linear);
BATON_ONNX_IMPORTER("DequantizeLinear", dequantize_linear);
BATON_ONNX_IMPORTER("DynamicQuantizeLinear", dynamic_quantize_linear);
BATON_ONNX_IMPORTER("ConvInteger", conv_integer);
BATON_ONNX_IMPORTER("MatMulInteger", matmul_integer);
BATON_ONNX_IMPORTER("QLinearConv", qlinear_conv);
BATON_ONNX_IMPORTER("QLinearMatMul", qlinear_matmul);

}  // namespace baton::onnx::detail
