// resize (ONNX Resize and Upsample, PyTorch interpolate): resamples each axis of x on its
// own. For an axis of `in` positions resized to `out`, each output position has a source
// coordinate (the coordinate transformation mode, in doubles) and from it 1, 2 or 4 taps,
// input positions with weights (nearest, linear, cubic with Keys' coefficient a). The axes
// are resampled one after another (kernels/cpu/resample.h); tf_crop_and_resize then writes
// the extrapolation value where a source lies outside the input.
//
// The scales (floats: out = floor(in * scale)) or output sizes (integers) are a tensor, `by`,
// read when the op runs. Where the graph knows them (a constant), the node's `dims` are
// sizes or products of x's symbols (scale 2 of h: 2*h) and the op is `resize`; where only
// the values say, it is `resize_by_values`, whose dims are fresh symbols bound when it runs
// (OpDef::sized_by_values), as reshape_to's are:
//   %2 = resize(%x, %scales) {mode="linear", coordinates="half_pixel", ..., dims=[1, 3, 8, 8]}
//
// Gradient: resize_backward runs each axis's taps backwards, in reverse order (linear in x;
// none for the scales, sizes or roi, and no second derivative).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <optional>

#include "baton/ops.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/resample.h"
#include "ops/common.h"

namespace baton::ops {
namespace {

enum class Interp { Nearest, Linear, Cubic };

struct Resampling {
  Interp interp = Interp::Nearest;
  std::string coordinates, nearest_mode;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation = 0;
};

bool is_one_of(const std::string& s, std::initializer_list<const char*> names) {
  return std::any_of(names.begin(), names.end(), [&](const char* n) { return s == n; });
}

Resampling resampling_of(const CallContext& c) {
  Resampling r;
  const std::string& mode = c.attrs.s("mode");
  if (mode == "linear") r.interp = Interp::Linear;
  else if (mode == "cubic") r.interp = Interp::Cubic;
  else if (mode != "nearest") c.fail<ValueError>("mode must be nearest, linear or cubic, not '", mode, "'");
  r.coordinates = c.attrs.s("coordinates");
  if (!is_one_of(r.coordinates, {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                                 "tf_half_pixel_for_nn", "tf_crop_and_resize"}))
    c.fail<ValueError>("coordinate transformation '", r.coordinates, "' is not one ONNX defines");
  r.nearest_mode = c.attrs.s("nearest_mode");
  if (!is_one_of(r.nearest_mode, {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "simple"}))
    c.fail<ValueError>("nearest_mode '", r.nearest_mode, "' is not one ONNX defines (or 'simple')");
  r.cubic_a = c.attrs.f("cubic_a");
  r.exclude_outside = c.attrs.i("exclude_outside") != 0;
  r.extrapolation = c.attrs.f("extrapolation");
  if (r.interp != Interp::Nearest && !is_floating(c.input(0).dtype()))
    c.fail<DTypeError>(mode, " resizing needs a floating input, not ", c.input(0).dtype());
  return r;
}

// The values of a 1-D tensor of numbers, read without dispatching an op.
std::vector<double> numbers_of(const Tensor& t) {
  const Tensor d = kernels::dense(t);
  std::vector<double> v(size_t(d.numel()));
  for (size_t i = 0; i < v.size(); ++i) {
    switch (d.dtype()) {
      case DType::f32: v[i] = double(d.data<float>()[i]); break;
      case DType::f64: v[i] = d.data<double>()[i]; break;
      case DType::i32: v[i] = double(d.data<int32_t>()[i]); break;
      case DType::i64: v[i] = double(d.data<int64_t>()[i]); break;
      default: throw DTypeError("resize", str("reads f32, f64, i32 or i64 values, not ", d.dtype()), SourceLoc::current());
    }
  }
  return v;
}

// The longest axis: the taps take a few words per output position.
constexpr int64_t kMaxLength = int64_t(1) << 24;

// One axis: its lengths, the scale and resized length the coordinate formulas use (from a
// scale: in * scale before rounding down, as ONNX's reference does), and the region of
// interest (tf_crop_and_resize) as fractions of the input.
struct AxisPlan {
  int64_t in = 1, out = 1;
  double scale = 1.0, resized = 1.0;
  double roi_start = 0.0, roi_end = 1.0;
};

// The output length of an axis of `in` positions: floor(in * value) for a scale, the value
// itself for a size; none where that is no length (a scale not above 0, a negative size,
// past kMaxLength). Graphs (resize_dims_now) and runs (axis_plans) share this rule.
std::optional<int64_t> resized_length(int64_t in, double value, bool is_scale) {
  const double length = is_scale ? double(in) * value : value;
  if (!(is_scale ? value > 0 : value >= 0) || !(length <= double(kMaxLength))) return std::nullopt;
  return int64_t(std::floor(length));
}

void check_by_input(const CallContext& c, int64_t rank) {
  const Tensor& by = c.input(1);
  if (!(is_floating(by.dtype()) || by.dtype() == DType::i64 || by.dtype() == DType::i32))
    c.fail<DTypeError>("takes scales (floats) or sizes (i32 or i64), not ", by.dtype());
  if (by.dim() != 1 || by.shape()[0] != rank)
    c.fail("needs one scale or size per dim of x ", c.input(0).shape(), ", got ", by.shape());
}

// The plan of each axis of an input of `shape` from the values of `by` (and roi).
std::vector<AxisPlan> axis_plans(const CallContext& c, const Shape& shape) {
  const auto rank = int64_t(shape.size());
  check_by_input(c, rank);
  const Tensor& by = c.input(1);
  const std::vector<double> values = numbers_of(by);
  std::vector<AxisPlan> plans(static_cast<size_t>(rank));
  for (size_t d = 0; d < plans.size(); ++d) {
    AxisPlan& a = plans[d];
    a.in = shape[d];
    const bool is_scale = is_floating(by.dtype());
    const std::optional<int64_t> out = resized_length(a.in, values[d], is_scale);
    if (!out && is_scale)
      c.fail<ValueError>("scale ", values[d], " of dim ", d, " (", a.in, ") must be positive and give at most ",
                         kMaxLength, " positions");
    if (!out) c.fail<ValueError>("output size ", values[d], " of dim ", d, " is not in [0, ", kMaxLength, "]");
    a.out = *out;
    a.scale = is_scale ? values[d] : a.in > 0 ? double(a.out) / double(a.in) : 1.0;
    a.resized = is_scale ? double(a.in) * a.scale : double(a.out);
    if (a.in == 0 && a.out > 0) c.fail<ValueError>("cannot resize the empty dim ", d, " of ", shape, " to ", a.out);
  }
  if (c.inputs.size() > 2 && c.input(2).numel() > 0) {
    const std::vector<double> roi = numbers_of(c.input(2));
    if (roi.size() != 2 * plans.size())
      c.fail("roi has ", roi.size(), " values; tf_crop_and_resize needs ", 2 * plans.size(), " (starts, ends)");
    for (size_t d = 0; d < plans.size(); ++d) plans[d].roi_start = roi[d], plans[d].roi_end = roi[d + plans.size()];
  }
  return plans;
}

Shape out_shape(const std::vector<AxisPlan>& plans) {
  Shape s(plans.size());
  for (size_t d = 0; d < plans.size(); ++d) s[d] = plans[d].out;
  return s;
}

// The source coordinate of output position i (ONNX's coordinate_transformation_mode).
double source_coordinate(const Resampling& r, const AxisPlan& a, int64_t i) {
  const double x = double(i), in = double(a.in), out = a.resized;
  const std::string& m = r.coordinates;
  if (m == "half_pixel") return (x + 0.5) / a.scale - 0.5;
  if (m == "pytorch_half_pixel") return out > 1 ? (x + 0.5) / a.scale - 0.5 : 0.0;
  if (m == "align_corners") return out > 1 ? x * (in - 1) / (out - 1) : 0.0;
  if (m == "asymmetric") return x / a.scale;
  if (m == "tf_half_pixel_for_nn") return (x + 0.5) / a.scale;
  if (out == 1) return 0.5 * (a.roi_start + a.roi_end) * (in - 1);  // tf_crop_and_resize
  return a.roi_start * (in - 1) + x * (a.roi_end - a.roi_start) * (in - 1) / (out - 1);
}

// The nearest input position of source coordinate x (ONNX's nearest_mode), before
// clamping. "simple" is opset 10's Resize and Upsample: floor enlarging, ceil shrinking.
double nearest_coordinate(const std::string& mode, double x, double scale) {
  const bool half = x - std::floor(x) == 0.5;
  if (mode == "round_prefer_floor") return half ? std::floor(x) : std::round(x);
  if (mode == "round_prefer_ceil") return half ? std::ceil(x) : std::round(x);
  if (mode == "floor") return std::floor(x);
  if (mode == "ceil") return std::ceil(x);
  return scale >= 1.0 ? std::floor(x) : std::ceil(x);
}

// Cubic convolution weights (Keys, coefficient A) of the neighbours at distances 1 + t,
// t, 1 - t and 2 - t from the source coordinate.
std::array<double, 4> cubic_weights(double A, double t) {
  auto inner = [A](double d) { return ((A + 2) * d - (A + 3)) * d * d + 1; };        // |d| <= 1
  auto outer = [A](double d) { return ((A * d - 5 * A) * d + 8 * A) * d - 4 * A; };  // 1 < |d| < 2
  return {outer(1 + t), inner(t), inner(1 - t), outer(2 - t)};
}

// Clamps to the axis before converting: a coordinate far outside (a huge scale's) or NaN
// (a NaN roi's, whose weights are NaN too) stays a valid index.
int64_t clamp_index(double i, int64_t n) {
  if (!(i > 0)) return 0;
  return i < double(n - 1) ? int64_t(i) : n - 1;
}

// The taps of every output position of one axis: nearest takes one neighbour, linear
// floor(x) and floor(x) + 1, cubic floor(x) - 1 .. floor(x) + 2, all clamped to the edge;
// exclude_outside gives cubic neighbours outside the input no weight and renormalizes.
kernels::RowTaps axis_taps(const Resampling& r, const AxisPlan& a, std::vector<char>* outside) {
  kernels::RowTaps t;
  t.count = r.interp == Interp::Nearest ? 1 : r.interp == Interp::Linear ? 2 : 4;
  for (int64_t o = 0; o < a.out; ++o) {
    const double x = source_coordinate(r, a, o);
    if (outside) outside->push_back(x < 0 || x > double(a.in - 1));
    if (r.interp == Interp::Nearest) {
      t.index.push_back(clamp_index(nearest_coordinate(r.nearest_mode, x, a.scale), a.in));
      t.weight.push_back(1.0);
      continue;
    }
    const double base = std::floor(x), frac = x - base;
    std::array<double, 4> w{1 - frac, frac, 0, 0};
    if (r.interp == Interp::Cubic) w = cubic_weights(r.cubic_a, frac);
    const double first = r.interp == Interp::Cubic ? base - 1 : base;
    double total = 0;
    for (int k = 0; k < t.count; ++k) {
      if (r.exclude_outside && (first + k < 0 || first + k > double(a.in - 1))) w[size_t(k)] = 0;
      total += w[size_t(k)];
    }
    for (int k = 0; k < t.count; ++k) {
      t.index.push_back(clamp_index(first + k, a.in));
      t.weight.push_back(r.exclude_outside && total != 0 ? w[size_t(k)] / total : w[size_t(k)]);
    }
  }
  return t;
}

// Whether an axis maps every output position onto the same input position.
bool is_identity(const Resampling& r, const AxisPlan& a) {
  return a.in == a.out && a.scale == 1.0 &&
         is_one_of(r.coordinates, {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"});
}

kernels::AxisExtent extent_of(const Shape& s, size_t d) {
  kernels::AxisExtent e{1, s[d], 1};
  for (size_t i = 0; i < d; ++i) e.outer *= s[i];
  for (size_t i = d + 1; i < s.size(); ++i) e.inner *= s[i];
  return e;
}

// A contiguous tensor of t's shape and dtype holding t's values (no op dispatched).
Tensor fresh_copy(const Tensor& t) {
  Tensor copy = empty(t.shape(), t.dtype());
  kernels::copy_into(copy, t);
  return copy;
}

// Sets the rows of axis d of y (contiguous) where `rows` is true to `value`.
void fill_rows(const Tensor& y, size_t d, const std::vector<char>& rows, double value) {
  const kernels::AxisExtent e = extent_of(y.shape(), d);
  Tensor number = empty({}, DType::f64), row = empty({e.inner}, y.dtype());
  *number.data<double>() = value;
  kernels::copy_into(row, number);
  const size_t bytes = size_t(e.inner) * dtype_size(y.dtype());
  auto* base = static_cast<char*>(y.raw_data());
  for (int64_t b = 0; b < e.outer; ++b)
    for (int64_t o = 0; o < e.in; ++o)
      if (rows[size_t(o)]) std::memcpy(base + (b * e.in + o) * int64_t(bytes), row.raw_data(), bytes);
}

// The axes that move any position, in order.
std::vector<size_t> resized_axes(const Resampling& r, const std::vector<AxisPlan>& plans) {
  std::vector<size_t> axes;
  for (size_t d = 0; d < plans.size(); ++d)
    if (!is_identity(r, plans[d])) axes.push_back(d);
  return axes;
}

// x resampled axis by axis; the last pass writes into `out` where one is given.
Tensor resample(const CallContext& c, const std::vector<AxisPlan>& plans, Tensor out = {}) {
  const Resampling& r = c.params<Resampling>();
  const bool crop = r.coordinates == "tf_crop_and_resize";
  const std::vector<size_t> axes = resized_axes(r, plans);
  Tensor y = kernels::dense(c.input(0));
  if (axes.empty()) {
    if (!out.defined()) return fresh_copy(y);
    kernels::copy_into(out, y);
    return out;
  }
  std::vector<std::pair<size_t, std::vector<char>>> outside;
  for (size_t d : axes) {
    std::vector<char> rows;
    const kernels::RowTaps taps = axis_taps(r, plans[d], crop ? &rows : nullptr);
    Shape next = y.shape();
    next[d] = plans[d].out;
    Tensor resized = d == axes.back() && out.defined() ? out : empty(next, y.dtype());
    kernels::resample_rows(y, resized, extent_of(y.shape(), d), taps);
    y = resized;
    if (crop) outside.emplace_back(d, std::move(rows));
  }
  for (const auto& [d, rows] : outside) fill_rows(y, d, rows, r.extrapolation);
  return y;
}

// resize_backward's inputs are (grad_output, x, by[, roi]): the plans come from x's shape.
Tensor resample_backward(const CallContext& c) {
  const Tensor &g = c.input(0), &x = c.input(1);
  const Tensor in[] = {x, c.input(2), c.inputs.size() > 3 ? c.input(3) : Tensor()};
  const CallContext forward{c.op, std::span<const Tensor>(in, c.inputs.size() - 1), c.attrs, c.loc};
  const std::vector<AxisPlan> plans = axis_plans(forward, x.shape());
  if (g.shape() != out_shape(plans))
    c.fail("the output gradient ", g.shape(), " is not the resized shape ", out_shape(plans));
  const Resampling& r = c.params<Resampling>();
  Tensor grad = fresh_copy(g);
  const std::vector<size_t> axes = resized_axes(r, plans);
  if (r.coordinates == "tf_crop_and_resize")  // the extrapolated positions take nothing from x
    for (size_t d : axes) {
      std::vector<char> rows;
      axis_taps(r, plans[d], &rows);
      fill_rows(grad, d, rows, 0.0);
    }
  for (auto d = axes.rbegin(); d != axes.rend(); ++d) {
    Shape before = grad.shape();
    before[*d] = plans[*d].in;
    Tensor spread = empty(before, grad.dtype());
    kernels::AxisExtent e = extent_of(before, *d);
    kernels::resample_rows_adjoint(grad, spread, e, axis_taps(r, plans[*d], nullptr));
    grad = spread;
  }
  return grad;
}

// A graph node's output dims (sizes, or symbols resolved when a plan is specialized).
TensorMeta infer_resize(const InferContext& c) {
  resampling_of(c);
  check_by_input(c, c.input(0).dim());
  if (!c.attrs.has("dims"))
    c.fail<ValueError>("its output sizes are the values of its scales or sizes: a graph node of it needs `dims`");
  const Shape dims(c.attrs.ints("dims"));
  if (dims.size() != size_t(c.input(0).dim()))
    c.fail("dims ", dims, " must give one size per dim of x ", c.input(0).shape());
  for (int64_t d : dims)
    if (!sym::is_valid_dim(d)) c.fail<ValueError>("dims must be sizes or symbols, got ", dims);
  return {c.input(0).dtype(), dims};
}

// `resize` was told its output's dims when the graph was built: the values must agree.
void resize_kernel(const KernelContext& c) {
  const std::vector<AxisPlan> plans = axis_plans(c, c.input(0).shape());
  if (out_shape(plans) != c.output().shape())
    c.fail<ValueError>("its scales or sizes give ", out_shape(plans), ", but the graph was built for ",
                       c.output().shape());
  resample(c, plans, c.output());
}

Grads resize_grad(const GradContext& c) {
  std::vector<Tensor> in{c.grad_output(), c.input(0), c.input(1)};
  if (c.inputs.size() > 2) in.push_back(c.input(2));
  ops::Attrs attrs;
  for (const auto& [name, value] : c.attrs.items())
    if (name != "dims") attrs.set(name, value);
  Grads grads(c.inputs.size());  // none for the scales, sizes or roi
  grads[0] = call_many(*find_op("resize_backward"), in, attrs, c.loc)[0];
  return grads;
}

// Defines a resize op with the attributes of ResizeOptions, as graph text names them; its
// kernel's parameters are the Resampling they give.
OpDef& resampling_op(std::string name) {
  return define_op(std::move(name))
      .params(resampling_of)
      .string_attr("mode")
      .string_attr("coordinates")
      .string_attr("nearest_mode")
      .float_attr("cubic_a")
      .int_attr("exclude_outside")
      .float_attr("extrapolation");
}

Cost resize_cost(const CallContext& c, std::span<const TensorMeta> out) {
  const double n = double(out[0].shape.numel()) + double(c.input(0).numel());
  return {4 * n, n * double(dtype_size(c.input(0).dtype()))};
}

}  // namespace

static OpDef& resize_op = resampling_op("resize")
    .inputs(2, 3)
    .ints_attr("dims")
    .storage_dtypes()
    .infer(infer_resize)
    .cpu(resize_kernel)
    .grad(resize_grad)
    .cost(resize_cost)
    .onnx("Resize");

static OpDef& resize_by_values_op = resampling_op("resize_by_values")
    .inputs(2, 3)
    .ints_attr("dims", -1, OpDef::optional)
    .storage_dtypes()
    .value_sized([](const CallContext& c) { return std::vector<Tensor>{resample(c, axis_plans(c, c.input(0).shape()))}; })
    .infer(infer_resize)
    .grad(resize_grad)
    .cost(resize_cost)
    .onnx("Resize");

static OpDef& resize_backward_op = resampling_op("resize_backward")
    .inputs(3, 4)
    .infer([](const InferContext& c) {
      if (c.input(0).dim() != c.input(1).dim() || !is_floating(c.input(0).dtype()))
        c.fail<DTypeError>("the output gradient ", c.input(0).dtype(), c.input(0).shape(),
                           " must be floating and of x's rank ", c.input(1).shape());
      return TensorMeta{c.input(1).dtype(), c.input(1).shape()};
    })
    .cpu([](const KernelContext& c) { kernels::copy_into(c.output(), resample_backward(c)); })
    .cost(resize_cost);

}  // namespace baton::ops

namespace baton {
namespace {

// The output dims a graph can know now (-1: only the values will say): `by` must be a
// constant; a symbolic dim of x is known under a whole scale (2 of h: 2*h) or its own size.
std::vector<int64_t> resize_dims_now(const Tensor& x, const Tensor& by) {
  std::vector<int64_t> known(size_t(x.dim()), -1);
  if (by.is_symbolic() || by.dim() != 1 || by.numel() != x.dim() ||
      !(by.dtype() == DType::f32 || by.dtype() == DType::f64 || by.dtype() == DType::i32 || by.dtype() == DType::i64))
    return known;
  const std::vector<double> values = ops::numbers_of(by);
  const bool is_scale = is_floating(by.dtype());
  for (size_t d = 0; d < known.size(); ++d) {
    const int64_t in = x.shape()[d];
    const double v = values[d];
    if (!is_scale || !sym::is_symbol(in)) {  // a size's length does not depend on in
      if (const std::optional<int64_t> n = ops::resized_length(in, v, is_scale)) known[d] = *n;
    } else if (v >= 1 && v == std::floor(v) && v <= double(ops::kMaxLength)) {
      known[d] = sym::mul(int64_t(v), in);
    }
  }
  return known;
}

}  // namespace

Tensor resize(const Tensor& x, const Tensor& scales_or_sizes, const ResizeOptions& o, const Tensor& roi,
              SourceLoc loc) {
  std::vector<Tensor> inputs{x, scales_or_sizes};
  if (roi.defined()) inputs.push_back(roi);
  ops::Attrs attrs{{"mode", o.mode},
                   {"coordinates", o.coordinates},
                   {"nearest_mode", o.nearest_mode},
                   {"cubic_a", o.cubic_a},
                   {"exclude_outside", int64_t(o.exclude_outside)},
                   {"extrapolation", o.extrapolation}};
  std::vector<int64_t> known = resize_dims_now(x, scales_or_sizes);
  if (o.known_dims.size() == known.size())
    for (size_t d = 0; d < known.size(); ++d)
      if (!sym::is_valid_dim(known[d]) && sym::is_valid_dim(o.known_dims[d])) known[d] = o.known_dims[d];
  const bool all_known = std::all_of(known.begin(), known.end(), [](int64_t d) { return sym::is_valid_dim(d); });
  ops::Attrs by_values = ops::with_dim_symbols(attrs, inputs, "resize", known);
  if (all_known || !by_values.has("dims")) {  // an eager call: an invalid value fails as it runs
    for (int64_t& d : known)
      if (!sym::is_valid_dim(d)) d = 0;
    attrs.set("dims", known);
    return ops::call_many(ops::resize_op, inputs, attrs, loc)[0];
  }
  return ops::call_many(ops::resize_by_values_op, inputs, by_values, loc)[0];
}

}  // namespace baton
