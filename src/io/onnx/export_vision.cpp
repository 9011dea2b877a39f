// baton's vision ops written as ONNX (opset 17): non_max_suppression (NonMaxSuppression),
// grid_sample (GridSample), resize (Resize), roi_align (RoiAlign), max_unpool (MaxUnpool), and adaptive
// average pooling to any output size (two MatMuls with averaging matrices, since ONNX
// pools have one window size).
#include "io/onnx/export_compose.h"

namespace baton::onnx::detail {
namespace {

// [out, in] rows that average each adaptive window [floor(o * in / out), ceil((o + 1) *
// in / out)) of an axis of `in` positions.
Tensor averaging_matrix(int64_t out, int64_t in, DType dtype) {
  std::vector<double> m(size_t(out * in), 0.0);
  for (int64_t o = 0; o < out; ++o) {
    const int64_t begin = o * in / out, end = ((o + 1) * in + out - 1) / out;
    for (int64_t i = begin; i < end; ++i) m[size_t(o * in + i)] = 1.0 / double(end - begin);
  }
  return cast(tensor(m, Shape{out, in}), dtype);
}

// NonMaxSuppression takes float boxes and scores: f64 ones are written cast to float (a
// selection that an IoU or score within f32's rounding of a threshold decides may then
// differ). Its limits are attributes, or inputs where the graph computes them. Its box
// count is a symbol only its output has: later dims that need it as a value read it from
// the output's shape.
void non_max_suppression_export(ExportContext& c) {
  const ops::Attrs& a = c.attrs();
  Names in;
  for (size_t i = 0; i < 2; ++i) {
    const DType t = c.input_type(i).dtype;
    in.push_back(t == DType::f32 ? c.input(i) : cast_to(c, c.input(i), t, DType::f32));
  }
  if (c.num_inputs() > 2) {  // the limits in tensors
    in.push_back(cast_to(c, c.input(2), c.input_type(2).dtype, DType::i64));
    for (size_t i = 3; i < c.num_inputs(); ++i) in.push_back(cast_to(c, c.input(i), c.input_type(i).dtype, DType::f32));
  } else {
    in.push_back(c.ints({a.i("max_boxes_per_class")}, "max_boxes"));
    in.push_back(scalar(c, a.f("iou_threshold"), DType::f32));
    if (a.has("score_threshold")) in.push_back(scalar(c, a.f("score_threshold"), DType::f32));
  }
  c.add("NonMaxSuppression", in, {c.output()}).attr("center_point_box", a.i("center_point_box"));
  c.writer().add_shape_source(c.output(), c.output_type().shape.raw());
}

void grid_sample_export(ExportContext& c) {
  c.add("GridSample", {c.input(0), c.input(1)}, {c.output()})
      .attr("mode", c.attrs().s("mode"))
      .attr("padding_mode", c.attrs().s("padding_mode"))
      .attr("align_corners", c.attrs().i("align_corners"));
}

// The boxes are scaled by spatial_scale in their own dtype (then spatial_scale is 1): as
// a float attribute it would be rounded to 32 bits.
void roi_align_export(ExportContext& c) {
  const ops::Attrs& a = c.attrs();
  const std::string scale = scalar(c, a.f("spatial_scale"), c.input_type(1).dtype);
  c.add("RoiAlign", {c.input(0), step(c, "Mul", {c.input(1), scale}).out, c.input(2)}, {c.output()})
      .attr("mode", std::string(a.i("max") != 0 ? "max" : "avg"))
      .attr("output_height", a.i("output_height"))
      .attr("output_width", a.i("output_width"))
      .attr("sampling_ratio", a.i("sampling_ratio"))
      .attr("spatial_scale", 1.0)
      .attr("coordinate_transformation_mode", std::string(a.i("half_pixel") != 0 ? "half_pixel" : "output_half_pixel"));
}

// resize is Resize: x, roi, then scales (floats: f64 ones are written cast to float) or
// sizes (int64), the absent ones "". Where its sizes are values, they name the output's
// symbols. Opset 10's "simple" nearest rounding has no opset-17 form unless the scales are
// a constant that all enlarge (floor) or all shrink (ceil).
std::string resize_nearest_mode(ExportContext& c) {
  const std::string& mode = c.attrs().s("nearest_mode");
  if (mode != "simple") return mode;
  const Tensor* scales = c.constant_input(1);
  if (!scales) c.fail("nearest_mode 'simple' (opset 10's Resize) with computed scales has no ONNX opset 17 form");
  const std::vector<double> v = cast(*scales, DType::f64).contiguous().to_vector<double>();
  if (std::all_of(v.begin(), v.end(), [](double s) { return s >= 1; })) return "floor";
  if (std::all_of(v.begin(), v.end(), [](double s) { return s <= 1; })) return "ceil";
  c.fail("nearest_mode 'simple' with scales that both enlarge and shrink has no ONNX opset 17 form");
}

void resize_export(ExportContext& c) {
  const ops::Attrs& a = c.attrs();
  const DType by = c.input_type(1).dtype;
  const bool scales = is_floating(by);
  const std::string roi = c.num_inputs() > 2 ? cast_to(c, c.input(2), c.input_type(2).dtype, DType::f32) : "";
  const std::string values = cast_to(c, c.input(1), by, scales ? DType::f32 : DType::i64);
  c.add("Resize", {c.input(0), roi, scales ? values : "", scales ? "" : values}, {c.output()})
      .attr("mode", a.s("mode"))
      .attr("coordinate_transformation_mode", a.s("coordinates"))
      .attr("nearest_mode", resize_nearest_mode(c))
      .attr("cubic_coeff_a", a.f("cubic_a"))
      .attr("exclude_outside", a.i("exclude_outside"))
      .attr("extrapolation_value", a.f("extrapolation"));
  if (c.node.op_name() == "resize_by_values") c.writer().add_shape_source(c.output(), c.output_type().shape.raw());
}

// MaxUnpool's indices address its output, whose size is (in - 1) * stride + kernel: with
// stride 1 a kernel of out - in + 1 gives baton's output size.
void max_unpool_export(ExportContext& c) {
  const std::vector<int64_t> in = c.static_dims(c.input_type(0).shape, "the input");
  const std::vector<int64_t> out = c.attrs().ints("output_shape");
  std::vector<int64_t> kernel;
  for (size_t d = 2; d < in.size(); ++d) {
    if (out.at(d) < in[d]) c.fail(str("its output ", Shape(out), " is smaller than its input ", Shape(in)));
    kernel.push_back(out[d] - in[d] + 1);
  }
  c.add("MaxUnpool", {c.input(0), c.input(1), c.ints(out, "output_shape")}, {c.output()})
      .attr("kernel_shape", kernel)
      .attr("strides", std::vector<int64_t>(kernel.size(), 1));
}

}  // namespace

// Y = A_h X A_w^T, per image and channel.
void export_adaptive_avg_pool(ExportContext& c) {
  const std::vector<int64_t> in = c.static_dims(c.input_type(0).shape, "the input");
  const std::vector<int64_t> out = c.attrs().ints("output_size");
  const DType t = c.input_type(0).dtype;
  const std::string rows = step(c, "MatMul", {c.constant(averaging_matrix(out[0], in[2], t), "rows"), c.input(0)}).out;
  c.add("MatMul", {rows, c.constant(averaging_matrix(out[1], in[3], t).t().contiguous(), "cols")}, {c.output()});
}

// The gradient of avg_pool2d (padding counted): each window spreads its gradient
// evenly, a depthwise ConvTranspose by kernels of 1 / (kh * kw).
BATON_ONNX_EXPORTER("avg_pool2d_backward", [](ExportContext& c) {
  const ops::Attrs& a = c.attrs();
  const std::vector<int64_t> in = a.ints("input_shape"), kernel = a.ints("kernel");
  const Tensor weight = full({in[1], 1, kernel[0], kernel[1]}, 1.0 / double(kernel[0] * kernel[1]), c.input_type(0).dtype);
  transposed_conv(c, {c.input(0), c.constant(weight, "weight")},
                  {.kernel = kernel, .stride = pool_strides(a), .padding = a.ints("padding"), .dilation = {1, 1}, .groups = in[1]}, in);
});
// The gradient of adaptive average pooling: A_h^T gY A_w.
BATON_ONNX_EXPORTER("adaptive_avg_pool2d_backward", [](ExportContext& c) {
  const std::vector<int64_t> in = c.attrs().ints("input_shape"), out = c.attrs().ints("output_size");
  const DType t = c.input_type(0).dtype;
  const std::string rows =
      step(c, "MatMul", {c.constant(averaging_matrix(out[0], in[2], t).t().contiguous(), "rows"), c.input(0)}).out;
  c.add("MatMul", {rows, c.constant(averaging_matrix(out[1], in[3], t), "cols")}, {c.output()});
});
BATON_ONNX_EXPORTER("non_max_suppression", non_max_suppression_export);
BATON_ONNX_EXPORTER("grid_sample", grid_sample_export);
BATON_ONNX_EXPORTER("resize", resize_export);
BATON_ONNX_EXPORTER("resize_by_values", resize_export);
BATON_ONNX_EXPORTER("roi_align", roi_align_export);
BATON_ONNX_EXPORTER("max_unpool", max_unpool_export);

}  // namespace baton::onnx::detail
