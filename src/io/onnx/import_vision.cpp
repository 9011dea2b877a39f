// ONNX vision and detection ops: NonMaxSuppression (its count of boxes a symbol bound
// while running, as are its limits where the model computes them), GridSample,
// RoiAlign and MaxUnpool, each onto the baton op of the same name (include/baton/ops/nn.h).
#include <optional>
#include <string>

#include "baton/ops.h"
#include "io/onnx/importer.h"

namespace baton::onnx::detail {
namespace {

// An optional scalar input of NonMaxSuppression: absent or empty means the default.
std::optional<double> optional_scalar(const NodeContext& c, size_t i) {
  if (!c.has_input(i) || c.known_input(i).numel() == 0) return std::nullopt;
  return c.scalar_input(i);
}

// An optional input of NonMaxSuppression as a tensor: absent or empty gives `fallback`.
Tensor limit_input(const NodeContext& c, size_t i, const Tensor& fallback) {
  return c.has_input(i) && c.input(i).numel() != 0 ? c.input(i) : fallback;
}

Outputs non_max_suppression_import(NodeContext& c) {
  const Tensor &boxes = c.input(0), &scores = c.input(1);
  NmsOptions o;
  const int64_t center = c.attr_int("center_point_box", 0);
  if (center != 0 && center != 1) c.fail(str("center_point_box must be 0 or 1, not ", center));
  o.center_point_box = center == 1;
  // Limits computed from the model's inputs are read when the model runs.
  if (c.computed_from_input_values(2) || c.computed_from_input_values(3) || c.computed_from_input_values(4)) {
    const NmsLimits limits{limit_input(c, 2, scalar_tensor<int64_t>(0)), limit_input(c, 3, scalar_tensor<float>(0)),
                           limit_input(c, 4, Tensor())};
    return {non_max_suppression(boxes, scores, limits, o.center_point_box, c.importer.loc())};
  }
  if (c.has_input(2) && c.known_input(2).numel() != 0) {
    const Tensor& m = c.known_input(2);
    if (m.numel() != 1 || is_floating(m.dtype())) c.fail(str("max_output_boxes_per_class must be one integer, not ", m.dtype(), m.shape()));
    o.max_boxes_per_class = std::max<int64_t>(0, cast(m, DType::i64).contiguous().to_vector<int64_t>()[0]);
  }
  o.iou_threshold = optional_scalar(c, 3).value_or(0.0);
  if (const std::optional<double> s = optional_scalar(c, 4)) {
    o.has_score_threshold = true;
    o.score_threshold = *s;
  }
  return {non_max_suppression(boxes, scores, o, c.importer.loc())};
}

Outputs grid_sample_import(NodeContext& c) {
  GridSampleOptions o;
  o.mode = c.attr_string("mode", c.opset >= 20 ? "linear" : "bilinear");
  o.padding_mode = c.attr_string("padding_mode", "zeros");
  o.align_corners = c.attr_int("align_corners", 0) != 0;
  if (c.input(0).dim() != 4) c.fail(str("supports 4-D inputs [N, C, H, W] only, got ", c.input(0).shape()));
  return {grid_sample(c.input(0), c.input(1), o, c.importer.loc())};
}

Outputs roi_align_import(NodeContext& c) {
  RoiAlignOptions o;
  o.output_height = c.attr_int("output_height", 1);
  o.output_width = c.attr_int("output_width", 1);
  o.sampling_ratio = c.attr_int("sampling_ratio", 0);
  o.spatial_scale = c.attr_float("spatial_scale", 1.0);
  // Opset 10 has no attribute and behaves as output_half_pixel; 16 defaults to half_pixel.
  const std::string coordinates =
      c.attr_string("coordinate_transformation_mode", c.opset >= 16 ? "half_pixel" : "output_half_pixel");
  if (coordinates != "half_pixel" && coordinates != "output_half_pixel")
    c.fail(str("coordinate_transformation_mode must be half_pixel or output_half_pixel, not '", coordinates, "'"));
  o.half_pixel = coordinates == "half_pixel";
  const std::string mode = c.attr_string("mode", "avg");
  if (mode != "avg" && mode != "max") c.fail(str("mode must be avg or max, not '", mode, "'"));
  o.max = mode == "max";
  return {roi_align(c.input(0), c.input(1), c.input(2), o, c.importer.loc())};
}

// MaxUnpool scatters into the size max pooling came from, (in - 1) * stride - pads +
// kernel per spatial dim; a larger output_shape pads that with zeros at the end (where the
// ONNX reference puts it: the indices count in the computed size).
Outputs max_unpool_import(NodeContext& c) {
  const Tensor& x = c.input(0);
  const std::vector<int64_t> kernel = c.attr_ints("kernel_shape");
  const size_t n = kernel.size();
  if (n == 0 || x.dim() != int64_t(n) + 2)
    c.fail(str("kernel_shape has ", n, " values for the input ", x.shape(), " (N, C and one per spatial dim)"));
  const std::vector<int64_t> strides = c.attr_ints("strides", std::vector<int64_t>(n, 1));
  const std::vector<int64_t> pads = c.attr_ints("pads", std::vector<int64_t>(2 * n, 0));
  if (strides.size() != n || pads.size() != 2 * n)
    c.fail(str("strides and pads need ", n, " and ", 2 * n, " values"));
  Shape size{x.shape()[0], x.shape()[1]};
  for (size_t d = 0; d < n; ++d) {
    const int64_t in = c.static_dim(x, int64_t(d + 2), "the unpooled size");
    if (kernel[d] < 1 || strides[d] < 1 || pads[d] < 0 || pads[d + n] < 0)
      c.fail("kernel_shape and strides must be positive and pads not negative");
    size.push_back((in - 1) * strides[d] - pads[d] - pads[d + n] + kernel[d]);
    if (size.back() < 0) c.fail(str("the unpooled size of spatial dim ", d, " is negative"));
  }
  Tensor y = max_unpool(x, c.input(1), size, c.importer.loc());
  if (!c.has_input(2)) return {y};
  const std::vector<int64_t> wanted = c.ints_input(2);
  if (wanted.size() != size.size()) c.fail(str("output_shape has ", wanted.size(), " values for rank ", size.size()));
  std::vector<int64_t> pairs;  // pad()'s (before, after) pairs, last dim first
  for (size_t d = wanted.size(); d-- > 0;) {
    const bool fixed = d < 2;  // N and C come from the input
    if (fixed ? wanted[d] != size[d] && !sym::is_symbol(size[d]) : wanted[d] < size[d])
      c.fail(str("output_shape ", Shape(wanted), " is smaller than the unpooled size ", size));
    if (!fixed) pairs.insert(pairs.end(), {0, wanted[d] - size[d]});
  }
  return {pad(y, pairs)};
}

}  // namespace

BATON_ONNX_IMPORTER("NonMaxSuppression", non_max_suppression_import);
BATON_ONNX_IMPORTER("GridSample", grid_sample_import);
BATON_ONNX_IMPORTER("RoiAlign", roi_align_import);
BATON_ONNX_IMPORTER("MaxUnpool", max_unpool_import);

}  // namespace baton::onnx::detail
