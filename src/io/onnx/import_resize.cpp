// ONNX Resize (opsets 10, 11, 13) and Upsample (7, 9) onto baton's resize op. The scales,
// sizes and roi stay tensors, read when the model runs: a model that computes them from its
// inputs imports once. Sizes computed from shapes (Shape of a tensor with symbolic dims, as
// an exporter writes interpolate(x, size=y.shape[2:])) give the output those symbols.
#include <algorithm>

#include "baton/ops.h"
#include "io/onnx/importer.h"

namespace baton::onnx::detail {
namespace {

ResizeOptions options_from_attrs(const NodeContext& c) {
  ResizeOptions o;
  o.mode = c.attr_string("mode", "nearest");
  o.coordinates = c.attr_string("coordinate_transformation_mode", "half_pixel");
  o.nearest_mode = c.attr_string("nearest_mode", "round_prefer_floor");
  o.cubic_a = c.attr_float("cubic_coeff_a", -0.75);
  o.exclude_outside = c.attr_int("exclude_outside", 0) != 0;
  o.extrapolation = c.attr_float("extrapolation_value", 0.0);
  return o;
}

// Opset 10 Resize and Upsample: asymmetric coordinates; nearest rounds down enlarging and
// up shrinking: "floor" or "ceil" where constant scales all enlarge or all shrink ("simple"
// otherwise, which has no opset-17 form to export).
ResizeOptions legacy_options(const NodeContext& c, const Tensor& scales) {
  ResizeOptions o;
  o.mode = c.attr_string("mode", "nearest");
  if (o.mode == "bilinear") o.mode = "linear";
  if (o.mode != "nearest" && o.mode != "linear") c.fail(str("mode '", o.mode, "' is not nearest or linear"));
  o.coordinates = "asymmetric";
  o.nearest_mode = "simple";
  if (scales.is_symbolic()) return o;
  const std::vector<double> values = cast(scales, DType::f64).contiguous().to_vector<double>();
  if (std::all_of(values.begin(), values.end(), [](double v) { return v >= 1; })) o.nearest_mode = "floor";
  if (std::all_of(values.begin(), values.end(), [](double v) { return v <= 1; })) o.nearest_mode = "ceil";
  return o;
}

// Whether optional input i is given and holds values (opset 11 passes an empty scales).
bool has_values(const NodeContext& c, size_t i) { return c.has_input(i) && c.input(i).numel() != 0; }

// The scales or sizes: a tensor read when the model runs. Inside a branch or loop body the
// output sizes must be known while loading (NodeContext::in_subgraph): known sizes, or
// values read then (per value of the model inputs they come from).
Tensor scales_or_sizes(const NodeContext& c, size_t i, const ResizeOptions& o) {
  const Tensor& by = c.input(i);
  const bool sizes_known = std::all_of(o.known_dims.begin(), o.known_dims.end(), sym::is_valid_dim) &&
                           int64_t(o.known_dims.size()) == c.input(0).dim();
  if (c.importer.in_subgraph() && by.is_symbolic() && !sizes_known) return c.known_input(i);
  return by;
}

}  // namespace

BATON_ONNX_IMPORTER("Resize", [](NodeContext& c) -> Outputs {
  if (c.opset < 11) {
    const Tensor scales = scales_or_sizes(c, 1, {});
    return {resize(c.input(0), scales, legacy_options(c, scales))};
  }
  ResizeOptions o = options_from_attrs(c);
  if (has_values(c, 2) && has_values(c, 3)) c.fail("gives both scales and sizes; ONNX allows one");
  if (!has_values(c, 2) && !has_values(c, 3)) c.fail("needs scales or sizes");
  const size_t by = has_values(c, 2) ? 2 : 3;
  if (by == 3)
    if (const std::vector<int64_t>* dims = c.importer.known_dims(c.input(3))) o.known_dims = *dims;
  Tensor roi;
  if (o.coordinates == "tf_crop_and_resize") {
    if (!has_values(c, 1)) c.fail("tf_crop_and_resize needs a roi");
    roi = c.input(1);
  }
  return {resize(c.input(0), scales_or_sizes(c, by, o), o, roi)};
});

// Upsample only enlarges: a scale below 1 in a constant is refused while loading.
BATON_ONNX_IMPORTER("Upsample", [](NodeContext& c) -> Outputs {
  Tensor scales;
  if (c.opset < 9) {
    const std::vector<double> values = c.attr_floats("scales");
    scales = tensor(values, Shape{int64_t(values.size())});
  } else {
    scales = scales_or_sizes(c, 1, {});
  }
  if (!scales.is_symbolic())
    for (double v : cast(scales, DType::f64).contiguous().to_vector<double>())
      if (v < 1) c.fail(str("scale ", v, " is below 1; Upsample only enlarges (use Resize)"));
  return {resize(c.input(0), scales, legacy_options(c, scales))};
});

}  // namespace baton::onnx::detail
