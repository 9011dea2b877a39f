// ONNX Resize (opsets 10, 11, 13) and Upsample (7, 9): separable resampling composed from
// public ops. For each resized axis the source coordinate of every output position is
// computed here, in doubles, from the coordinate transformation mode; the axis is then
// resampled by "taps": each tap is an index_select of one neighbour per output position,
// weighted by a tensor shaped to broadcast along that axis (nearest: one tap of weight 1,
// linear: two, cubic: four), and the taps are summed. tf_crop_and_resize puts the
// extrapolation value, with where, at positions whose source lies outside the input.
// Spatial sizes must be static and scales/sizes known when the model loads.
#include <algorithm>
#include <array>
#include <cmath>

#include "baton/ops.h"
#include "io/onnx/importer.h"

namespace baton::onnx::detail {
namespace {

struct ResizeSpec {
  std::string mode = "nearest";              // nearest | linear | cubic
  std::string coordinates = "half_pixel";    // coordinate_transformation_mode
  std::string nearest_mode = "round_prefer_floor";  // or "simple" (opset 10, Upsample)
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation = 0.0;
};

// One axis: its input and output lengths, the scale and resized length the coordinate
// formulas use (from scales, in * scale before rounding down, as ONNX's reference does),
// and the region of interest (tf_crop_and_resize), as fractions of the input.
struct AxisPlan {
  int64_t in = 1, out = 1;
  double scale = 1.0, resized = 1.0;
  double roi_start = 0.0, roi_end = 1.0;
};

// For every output position of one axis, one neighbour and its weight.
struct Tap {
  std::vector<int64_t> index;
  std::vector<double> weight;
};

// The values of a floating input (scales, roi), needed while the model loads.
std::vector<double> known_floats(const NodeContext& c, size_t i, const std::string& what) {
  const Tensor& t = c.known_input(i);
  if (!is_floating(t.dtype())) c.fail(str(what, " must hold floats, not ", t.dtype()));
  return cast(t, DType::f64).contiguous().to_vector<double>();
}

// The source coordinate of output position i (ONNX's coordinate_transformation_mode).
double source_coordinate(const NodeContext& c, const std::string& mode, const AxisPlan& a, int64_t i) {
  const double x = double(i), in = double(a.in), out = a.resized;
  if (mode == "half_pixel") return (x + 0.5) / a.scale - 0.5;
  if (mode == "pytorch_half_pixel") return out > 1 ? (x + 0.5) / a.scale - 0.5 : 0.0;
  if (mode == "align_corners") return out > 1 ? x * (in - 1) / (out - 1) : 0.0;
  if (mode == "asymmetric") return x / a.scale;
  if (mode == "tf_half_pixel_for_nn") return (x + 0.5) / a.scale;
  if (mode == "tf_crop_and_resize") {
    if (out == 1) return 0.5 * (a.roi_start + a.roi_end) * (in - 1);
    return a.roi_start * (in - 1) + x * (a.roi_end - a.roi_start) * (in - 1) / (out - 1);
  }
  c.fail(str("coordinate_transformation_mode '", mode, "' is not supported"));
}

std::vector<double> source_coordinates(const NodeContext& c, const ResizeSpec& s, const AxisPlan& a) {
  std::vector<double> xs(size_t(a.out));
  for (int64_t i = 0; i < a.out; ++i) xs[size_t(i)] = source_coordinate(c, s.coordinates, a, i);
  return xs;
}

int64_t clamp_index(int64_t i, int64_t n) { return std::min(std::max(i, int64_t(0)), n - 1); }

// The nearest input index of source coordinate x (ONNX's nearest_mode), before clamping.
// "simple" is opset 10 Resize and Upsample: floor when enlarging, ceil when shrinking.
double nearest_coordinate(const NodeContext& c, const std::string& mode, double x, double scale) {
  const bool half = x - std::floor(x) == 0.5;
  if (mode == "round_prefer_floor") return half ? std::floor(x) : std::round(x);
  if (mode == "round_prefer_ceil") return half ? std::ceil(x) : std::round(x);
  if (mode == "floor") return std::floor(x);
  if (mode == "ceil") return std::ceil(x);
  if (mode == "simple") return scale >= 1.0 ? std::floor(x) : std::ceil(x);
  c.fail(str("nearest_mode '", mode, "' is not supported"));
}

std::vector<Tap> nearest_taps(const NodeContext& c, const ResizeSpec& s, const AxisPlan& a,
                              const std::vector<double>& xs) {
  Tap t;
  for (double x : xs) {
    t.index.push_back(clamp_index(int64_t(nearest_coordinate(c, s.nearest_mode, x, a.scale)), a.in));
    t.weight.push_back(1.0);
  }
  return {t};
}

// Neighbours floor(x) and floor(x) + 1, edge-clamped, weighted by distance.
std::vector<Tap> linear_taps(const AxisPlan& a, const std::vector<double>& xs) {
  std::vector<Tap> taps(2);
  for (double x : xs) {
    const double base = std::floor(x), t = x - base;
    for (int k = 0; k < 2; ++k) taps[size_t(k)].index.push_back(clamp_index(int64_t(base) + k, a.in));
    taps[0].weight.push_back(1.0 - t);
    taps[1].weight.push_back(t);
  }
  return taps;
}

// Cubic convolution weights (Keys, coefficient A) of the neighbours at distances 1 + t,
// t, 1 - t and 2 - t from the source coordinate.
std::array<double, 4> cubic_weights(double A, double t) {
  auto inner = [A](double d) { return ((A + 2) * d - (A + 3)) * d * d + 1; };  // |d| <= 1
  auto outer = [A](double d) { return ((A * d - 5 * A) * d + 8 * A) * d - 4 * A; };  // 1 < |d| < 2
  return {outer(1 + t), inner(t), inner(1 - t), outer(2 - t)};
}

// Neighbours floor(x) - 1 .. floor(x) + 2, edge-clamped; exclude_outside gives those
// outside the input no weight and renormalizes the rest.
std::vector<Tap> cubic_taps(const ResizeSpec& s, const AxisPlan& a, const std::vector<double>& xs) {
  std::vector<Tap> taps(4);
  for (double x : xs) {
    const double base = std::floor(x);
    std::array<double, 4> w = cubic_weights(s.cubic_a, x - base);
    double total = 0;
    for (int k = 0; k < 4; ++k) {
      const int64_t i = int64_t(base) - 1 + k;
      if (s.exclude_outside && (i < 0 || i >= a.in)) w[size_t(k)] = 0;
      total += w[size_t(k)];
    }
    for (int k = 0; k < 4; ++k) {
      taps[size_t(k)].index.push_back(clamp_index(int64_t(base) - 1 + k, a.in));
      taps[size_t(k)].weight.push_back(s.exclude_outside && total != 0 ? w[size_t(k)] / total : w[size_t(k)]);
    }
  }
  return taps;
}

std::vector<Tap> taps_for(const NodeContext& c, const ResizeSpec& s, const AxisPlan& a,
                          const std::vector<double>& xs) {
  if (s.mode == "nearest") return nearest_taps(c, s, a, xs);
  if (s.mode == "linear") return linear_taps(a, xs);
  if (s.mode == "cubic") return cubic_taps(s, a, xs);
  c.fail(str("mode '", s.mode, "' is not nearest, linear or cubic"));
}

// A tensor of per-position values along `axis`, shaped to broadcast against a rank-`rank` tensor.
Shape along(int64_t axis, int64_t rank, int64_t n) {
  Shape shape(size_t(rank), 1);
  shape[size_t(axis)] = n;
  return shape;
}

// Resamples x along axis: the sum of each tap's neighbours times its weights.
Tensor apply_taps(const Tensor& x, int64_t axis, const std::vector<Tap>& taps) {
  Tensor y;
  for (const Tap& t : taps) {
    const bool none = std::all_of(t.weight.begin(), t.weight.end(), [](double w) { return w == 0.0; });
    if (none && taps.size() > 1) continue;
    const auto n = int64_t(t.index.size());
    Tensor term = index_select(x, axis, tensor(t.index, Shape{n}));
    if (!std::all_of(t.weight.begin(), t.weight.end(), [](double w) { return w == 1.0; }))
      term = term * cast(tensor(t.weight, along(axis, x.dim(), n)), x.dtype());
    y = y.defined() ? y + term : term;
  }
  return y;
}

// Positions whose source lies outside the input take `value` (tf_crop_and_resize).
Tensor extrapolate(const Tensor& y, int64_t axis, const AxisPlan& a, const std::vector<double>& xs, double value) {
  std::vector<int64_t> outside;
  for (double x : xs) outside.push_back(x < 0 || x > double(a.in - 1) ? 1 : 0);
  if (std::none_of(outside.begin(), outside.end(), [](int64_t o) { return o != 0; })) return y;
  const Tensor mask = tensor(outside, along(axis, y.dim(), a.out)) > int64_t(0);
  return where(mask, full_like(y, value, y.dtype()), y);
}

// Whether an axis maps every output position onto the same input position.
bool is_identity(const ResizeSpec& s, const AxisPlan& a) {
  if (a.in != a.out || a.scale != 1.0) return false;
  const std::string& m = s.coordinates;
  return m == "half_pixel" || m == "pytorch_half_pixel" || m == "align_corners" || m == "asymmetric";
}

Tensor resize(const NodeContext& c, const Tensor& x, const ResizeSpec& s, const std::vector<AxisPlan>& axes) {
  if (s.mode != "nearest" && !is_floating(x.dtype()))
    c.fail(str(s.mode, " resizing needs a floating input, not ", x.dtype()));
  Tensor y = x;
  std::vector<std::pair<int64_t, std::vector<double>>> crops;
  for (int64_t d = 0; d < x.dim(); ++d) {
    const AxisPlan& a = axes[size_t(d)];
    if (is_identity(s, a)) continue;
    if (sym::is_symbol(a.in)) c.fail(str("resizes dim ", d, " of ", x.shape(), ", which must be static"));
    const std::vector<double> xs = source_coordinates(c, s, a);
    y = apply_taps(y, d, taps_for(c, s, a, xs));
    if (s.coordinates == "tf_crop_and_resize") crops.emplace_back(d, xs);
  }
  for (const auto& [d, xs] : crops) y = extrapolate(y, d, axes[size_t(d)], xs, s.extrapolation);
  return y;
}

// Input length of dim d, which must be static unless the axis keeps it (scale 1).
int64_t static_length(const NodeContext& c, const Tensor& x, int64_t d) {
  const int64_t n = x.shape()[size_t(d)];
  if (sym::is_symbol(n)) c.fail(str("resizes dim ", d, " of ", x.shape(), ", which must be static"));
  if (n < 1) c.fail(str("cannot resize dim ", d, " of ", x.shape(), " (empty)"));
  return n;
}

// The longest resized axis: the taps are computed while loading, one entry per position.
constexpr int64_t kMaxLength = int64_t(1) << 24;

// Plans from scales: out = floor(in * scale); a symbolic dim must keep scale 1.
std::vector<AxisPlan> plans_from_scales(const NodeContext& c, const Tensor& x, const std::vector<double>& scales) {
  if (int64_t(scales.size()) != x.dim())
    c.fail(str("has ", scales.size(), " scales for an input of rank ", x.dim()));
  std::vector<AxisPlan> plans(scales.size());
  for (int64_t d = 0; d < x.dim(); ++d) {
    AxisPlan& a = plans[size_t(d)];
    a.scale = scales[size_t(d)];
    if (!(a.scale > 0)) c.fail(str("scale ", a.scale, " of dim ", d, " must be positive"));
    if (a.scale == 1.0 && sym::is_symbol(x.shape()[size_t(d)])) {
      a.in = a.out = x.shape()[size_t(d)];
      continue;
    }
    a.in = static_length(c, x, d);
    a.resized = double(a.in) * a.scale;
    if (!(a.resized <= double(kMaxLength))) c.fail(str("scale ", a.scale, " makes dim ", d, " longer than ", kMaxLength));
    a.out = int64_t(std::floor(a.resized));
    if (a.out < 1) c.fail(str("scale ", a.scale, " shrinks dim ", d, " (", a.in, ") to nothing"));
  }
  return plans;
}

// Plans from output sizes: scale = out / in.
std::vector<AxisPlan> plans_from_sizes(const NodeContext& c, const Tensor& x, const std::vector<int64_t>& sizes) {
  if (int64_t(sizes.size()) != x.dim()) c.fail(str("has ", sizes.size(), " sizes for an input of rank ", x.dim()));
  std::vector<AxisPlan> plans(sizes.size());
  for (int64_t d = 0; d < x.dim(); ++d) {
    AxisPlan& a = plans[size_t(d)];
    a.in = static_length(c, x, d);
    a.out = sizes[size_t(d)];
    if (a.out < 1 || a.out > kMaxLength) c.fail(str("output size ", a.out, " of dim ", d, " is not in [1, ", kMaxLength, "]"));
    a.scale = double(a.out) / double(a.in);
    a.resized = double(a.out);
  }
  return plans;
}

// roi [starts..., ends...] onto the plans (tf_crop_and_resize only).
void apply_roi(const NodeContext& c, std::vector<AxisPlan>& plans, const std::vector<double>& roi) {
  if (roi.size() != 2 * plans.size())
    c.fail(str("roi has ", roi.size(), " values; tf_crop_and_resize needs ", 2 * plans.size(), " (starts, ends)"));
  for (size_t d = 0; d < plans.size(); ++d) {
    plans[d].roi_start = roi[d];
    plans[d].roi_end = roi[d + plans.size()];
    if (sym::is_symbol(plans[d].in)) c.fail(str("tf_crop_and_resize needs static dims (dim ", d, ")"));
  }
}

// Whether optional input i is given and holds values (opset 11 passes an empty scales).
bool has_values(const NodeContext& c, size_t i) { return c.has_input(i) && c.input(i).numel() != 0; }

ResizeSpec spec_from_attrs(const NodeContext& c) {
  ResizeSpec s;
  s.mode = c.attr_string("mode", "nearest");
  s.coordinates = c.attr_string("coordinate_transformation_mode", "half_pixel");
  s.nearest_mode = c.attr_string("nearest_mode", "round_prefer_floor");
  s.cubic_a = c.attr_float("cubic_coeff_a", -0.75);
  s.exclude_outside = c.attr_int("exclude_outside", 0) != 0;
  s.extrapolation = c.attr_float("extrapolation_value", 0.0);
  return s;
}

// Opset 10 Resize and Upsample: asymmetric coordinates, "simple" nearest.
ResizeSpec legacy_spec(const NodeContext& c) {
  ResizeSpec s;
  s.mode = c.attr_string("mode", "nearest");
  if (s.mode == "bilinear") s.mode = "linear";
  if (s.mode != "nearest" && s.mode != "linear") c.fail(str("mode '", s.mode, "' is not nearest or linear"));
  s.coordinates = "asymmetric";
  s.nearest_mode = "simple";
  return s;
}

}  // namespace

BATON_ONNX_IMPORTER("Resize", [](NodeContext& c) -> Outputs {
  const Tensor& x = c.input(0);
  if (c.opset < 11) {
    const ResizeSpec s = legacy_spec(c);
    return {resize(c, x, s, plans_from_scales(c, x, known_floats(c, 1, "scales")))};
  }
  const ResizeSpec s = spec_from_attrs(c);
  std::vector<AxisPlan> plans;
  if (has_values(c, 2) && has_values(c, 3)) c.fail("gives both scales and sizes; ONNX allows one");
  if (has_values(c, 2)) plans = plans_from_scales(c, x, known_floats(c, 2, "scales"));
  else if (has_values(c, 3)) plans = plans_from_sizes(c, x, c.ints_input(3));
  else c.fail("needs scales or sizes");
  if (s.coordinates == "tf_crop_and_resize") {
    if (!has_values(c, 1)) c.fail("tf_crop_and_resize needs a roi");
    apply_roi(c, plans, known_floats(c, 1, "roi"));
  }
  return {resize(c, x, s, plans)};
});

BATON_ONNX_IMPORTER("Upsample", [](NodeContext& c) -> Outputs {
  const Tensor& x = c.input(0);
  const std::vector<double> scales = c.opset < 9 ? c.attr_floats("scales") : known_floats(c, 1, "scales");
  for (double v : scales)
    if (v < 1) c.fail(str("scale ", v, " is below 1; Upsample only enlarges (use Resize)"));
  return {resize(c, x, legacy_spec(c), plans_from_scales(c, x, scales))};
});

}  // namespace baton::onnx::detail
