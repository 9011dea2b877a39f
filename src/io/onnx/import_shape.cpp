// ONNX ops that move, select or create data without arithmetic: Reshape, Transpose,
// Squeeze/Unsqueeze, Flatten, Concat, Split, Slice, Gather, Expand, Tile, Pad, Shape,
// Size, Constant, ConstantOfShape, Range.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "baton/ops.h"
#include "io/onnx/importer.h"

namespace baton::onnx::detail {
namespace {

// Axes from the attribute (before `input_since`) or from input `input` (from then on).
std::vector<int64_t> axes_of(const NodeContext& c, int64_t input_since, size_t input) {
  if (c.opset >= input_since) return c.has_input(input) ? c.ints_input(input) : std::vector<int64_t>{};
  return c.attr_ints("axes");
}

// Every axis normalized against rank, sorted and distinct.
std::vector<int64_t> normalized_axes(const NodeContext& c, std::vector<int64_t> axes, int64_t rank) {
  for (int64_t& a : axes) a = normalize_axis(c, a, rank);
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) c.fail("lists an axis twice");
  return axes;
}

// A tensor of the sizes of shape[start, end): a constant when they are all known now; else
// computed when the model runs, its sizes (symbols included) remembered as known dims.
Tensor shape_tensor(const NodeContext& c, const Tensor& x, int64_t start, int64_t end) {
  const Shape& shape = x.shape();
  std::vector<int64_t> dims(shape.begin() + start, shape.begin() + std::max(start, end));
  if (std::none_of(dims.begin(), dims.end(), sym::is_symbol)) return tensor(dims, Shape{int64_t(dims.size())});
  std::vector<Tensor> sizes;
  for (int64_t d = start; d < end; ++d) sizes.push_back(element_count(x, {d}, DType::i64));
  Tensor out = stack(sizes, 0);
  c.importer.note_known_dims(out, dims);
  return out;
}

// numpy's two-way broadcast of two shapes (Expand): a dim of 1 takes the other's size.
Shape broadcast_to(const NodeContext& c, const Shape& a, const Shape& b) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i + a.size() >= rank ? a[i + a.size() - rank] : 1;
    int64_t db = i + b.size() >= rank ? b[i + b.size() - rank] : 1;
    if (da != db && da != 1 && db != 1) c.fail(str("cannot broadcast ", a, " to ", b));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace

// Shapes, repeats and bounds computed from the model inputs' values are read when the
// model runs (reshape_to, expand_to, range_of: their sizes are symbols a plan binds as it
// runs), so such a model is imported once for all its input values.

BATON_ONNX_IMPORTER("Reshape", [](NodeContext& c) -> Outputs {
  const Tensor& x = c.input(0);
  const bool allow_zero = c.attr_int("allowzero", 0) != 0;
  if (c.opset >= 5 && c.computed_from_input_values(1)) return {reshape_to(x, c.input(1), !allow_zero)};
  std::vector<int64_t> target = c.opset < 5 ? c.attr_ints("shape") : c.ints_input(1);
  for (size_t i = 0; i < target.size(); ++i)
    if (target[i] == 0 && !allow_zero) {
      if (int64_t(i) >= x.dim()) c.fail(str("copies dim ", i, " of a rank-", x.dim(), " input"));
      target[i] = x.shape()[i];
    }
  return {reshape(x, Shape(target))};
});

BATON_ONNX_IMPORTER("Flatten", [](NodeContext& c) -> Outputs {
  const Tensor& x = c.input(0);
  const int64_t axis = c.attr_int("axis", 1) < 0 ? c.attr_int("axis", 1) + x.dim() : c.attr_int("axis", 1);
  if (axis < 0 || axis > x.dim()) c.fail(str("axis ", c.attr_int("axis", 1), " is out of range for rank ", x.dim()));
  return {reshape(x, flattened_at(x.shape(), axis))};
});

BATON_ONNX_IMPORTER("Transpose", [](NodeContext& c) -> Outputs {
  const Tensor& x = c.input(0);
  std::vector<int64_t> perm = c.attr_ints("perm");
  if (perm.empty()) {
    perm.resize(size_t(x.dim()));
    std::iota(perm.rbegin(), perm.rend(), 0);
  }
  return {permute(x, Shape(perm))};
});

BATON_ONNX_IMPORTER("Squeeze", [](NodeContext& c) -> Outputs {
  Tensor x = c.input(0);
  if (c.opset >= 13 && c.list_computed_from_input_values(1)) return {squeeze_at(x, c.input(1))};
  std::vector<int64_t> axes = axes_of(c, 13, 1);
  if (axes.empty())
    for (int64_t d = 0; d < x.dim(); ++d)
      if (x.shape()[size_t(d)] == 1) axes.push_back(d);
  axes = normalized_axes(c, axes, x.dim());
  for (auto a = axes.rbegin(); a != axes.rend(); ++a) {
    if (x.shape()[size_t(*a)] != 1) c.fail(str("squeezes dim ", *a, " of ", x.shape(), ", which is not 1"));
    x = squeeze(x, *a);
  }
  return {x};
});

BATON_ONNX_IMPORTER("Unsqueeze", [](NodeContext& c) -> Outputs {
  Tensor x = c.input(0);
  if (c.opset >= 13 && c.list_computed_from_input_values(1)) return {unsqueeze_at(x, c.input(1))};
  std::vector<int64_t> axes = normalized_axes(c, axes_of(c, 13, 1), x.dim() + int64_t(axes_of(c, 13, 1).size()));
  for (int64_t a : axes) x = unsqueeze(x, a);
  return {x};
});

BATON_ONNX_IMPORTER("Concat", [](NodeContext& c) -> Outputs {
  if (c.num_inputs() == 0) c.fail("needs at least one input");
  return {cat(c.inputs(), axis_attr(c, "axis", 1, c.input(0).dim()))};
});

// Element i of a 1-D tensor, as a 0-d one.
static Tensor entry(const Tensor& t, int64_t i) { return reshape(slice(t, 0, i, i + 1), Shape{}); }

// Split by sizes read when the model runs: part i takes the positions from the sum of the
// sizes before it, gathered. Sizes that do not add up to the dim point every position at
// the dim's end, which index_select refuses when it runs.
static Outputs split_by_values(const NodeContext& c, const Tensor& x, int64_t axis) {
  const Tensor sizes = cast(c.input(1), DType::i64);
  if (sizes.dim() != 1 || sym::is_symbol(sizes.shape()[0]) || sizes.shape()[0] != int64_t(c.num_outputs()))
    c.fail(str("needs one size per output (", c.num_outputs(), "), got a tensor of shape ", sizes.shape()));
  const Tensor n = element_count(x, {axis}, DType::i64);
  const Tensor starts = cumsum(sizes, 0, /*exclusive=*/true), adds_up = eq(sum(sizes), n);
  Outputs out;
  for (int64_t i = 0; i < sizes.shape()[0]; ++i) {
    const Tensor positions = range_of(entry(starts, i), entry(starts, i) + entry(sizes, i), scalar_tensor<int64_t>(1));
    out.push_back(index_select(x, axis, where(adds_up, positions, n)));
  }
  return out;
}

BATON_ONNX_IMPORTER("Split", [](NodeContext& c) -> Outputs {
  const Tensor& x = c.input(0);
  const int64_t axis = axis_attr(c, "axis", 0, x.dim());
  if (c.opset >= 13 && c.computed_from_input_values(1)) return split_by_values(c, x, axis);
  const int64_t n = x.shape()[size_t(axis)];
  std::vector<int64_t> sizes = c.opset >= 13 ? (c.has_input(1) ? c.ints_input(1) : std::vector<int64_t>{})
                                             : c.attr_ints("split");
  if (sizes.empty()) {
    const int64_t parts = c.attr_int("num_outputs", int64_t(c.num_outputs()));
    if (sym::is_symbol(n)) c.fail(str("splits a symbolic dim (", x.shape(), ")"));
    const int64_t chunk = (n + parts - 1) / std::max<int64_t>(parts, 1);
    for (int64_t start = 0; start < n || int64_t(sizes.size()) < parts; start += chunk)
      sizes.push_back(std::clamp<int64_t>(n - start, 0, chunk));
  }
  Outputs out;
  int64_t start = 0;
  for (int64_t s : sizes) {
    if (s < 0) c.fail(str("split sizes must not be negative, got ", s));
    out.push_back(slice(x, axis, start, start + s));
    start += s;
  }
  if (!sym::is_symbol(n) && start != n) c.fail(str("split sizes add up to ", start, ", not ", n));
  return out;
});

// The positions a slice with a negative step visits along a dim of n (ONNX clamps start
// to [0, n-1] and end to [-1, n-1] then).
static Tensor reverse_positions(int64_t n, int64_t start, int64_t end, int64_t step) {
  auto bound = [n](int64_t v, int64_t lo) { return std::clamp(v < 0 ? v + n : v, lo, n - 1); };
  const int64_t from = bound(start, 0), to = bound(end, -1);
  std::vector<int64_t> at;
  for (int64_t i = from; i > to; i += step) at.push_back(i);
  return tensor(at, Shape{int64_t(at.size())});
}

// The positions start, start + step, ... short of end along a dim of n elements (0-d f64
// tensors, computed in the graph), with ONNX's clamping: a negative bound counts from the
// end, then lies inside [0, n] ([-1, n - 1] stepping down). A step of 0 gives a count of
// NaN, which range_of refuses when it runs.
static Tensor slice_positions(const Tensor& n, const Tensor& start, const Tensor& end, const Tensor& step) {
  const Tensor zero = scalar_tensor<double>(0), down = lt(step, 0.0);
  auto inside = [&](const Tensor& v, const Tensor& low) {
    return minimum(maximum(where(lt(v, 0.0), v + n, v), low), where(down, n - 1.0, n));
  };
  const Tensor first = inside(start, zero), last = inside(end, where(down, scalar_tensor<double>(-1), zero));
  const Tensor count = where(eq(step, 0.0), scalar_tensor<double>(std::nan("")), maximum(ceil((last - first) / step), 0.0));
  return cast(first + range_of(zero, count, scalar_tensor<double>(1)) * step, DType::i64);
}

// Slice by starts and ends read when the model runs (its axes and steps known): along each
// axis the positions are computed in the graph and gathered. Sizes and bounds are small
// integers, exact in f64.
static Tensor slice_by_values(const NodeContext& c, Tensor x, const std::vector<int64_t>& axes,
                              const std::vector<int64_t>& steps) {
  const Tensor starts = cast(c.input(1), DType::f64), ends = cast(c.input(2), DType::f64);
  if (starts.dim() != 1 || ends.dim() != 1 || starts.shape()[0] != int64_t(axes.size()) ||
      ends.shape()[0] != int64_t(axes.size()))
    c.fail(str("starts ", starts.shape(), " and ends ", ends.shape(), " must list one value per axis (", axes.size(), ")"));
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t axis = normalize_axis(c, axes[i], x.dim());
    const Tensor n = cast(element_count(x, {axis}, DType::i64), DType::f64);
    const Tensor at = slice_positions(n, entry(starts, int64_t(i)), entry(ends, int64_t(i)),
                                      scalar_tensor<double>(double(steps[i])));
    x = index_select(x, axis, at);
  }
  return x;
}

// Slice with its axes or steps read when the model runs too: every dim of x is sliced,
// by the values the axes give it (a dim no axis names keeps [0, n) by 1). Axes out of
// range or repeated make every step 0, which slice_positions turns into an error.
static Tensor slice_every_dim_by_values(const NodeContext& c, Tensor x) {
  const Tensor starts = cast(c.input(1), DType::f64), ends = cast(c.input(2), DType::f64);
  const int64_t count = c.static_dim(starts, 0, "the count of starts"), rank = x.dim();
  const Tensor axes = c.has_input(3) ? cast(c.input(3), DType::i64) : arange(0, double(count), 1, DType::i64);
  const Tensor steps = c.has_input(4) ? cast(c.input(4), DType::f64) : ones({count}, DType::f64);
  if (starts.dim() != 1 || ends.shape() != starts.shape() || axes.shape() != starts.shape() || steps.shape() != starts.shape())
    c.fail(str("starts ", starts.shape(), ", ends ", ends.shape(), ", axes ", axes.shape(), " and steps ", steps.shape(),
               " must be 1-D of one length"));
  const Tensor named = where(lt(axes, int64_t(0)), axes + rank, axes);
  std::vector<Tensor> picks;  // per dim: which entry names it
  Tensor named_once = scalar_tensor<int64_t>(0);
  for (int64_t d = 0; d < rank; ++d) {
    picks.push_back(eq(named, d));
    named_once = named_once + sum(cast(picks.back(), DType::i64));
  }
  const Tensor valid = eq(named_once, count);
  for (int64_t d = 0; d < rank; ++d) {
    const Tensor pick = picks[size_t(d)], given = gt(sum(cast(pick, DType::i64)), int64_t(0));
    const Tensor n = cast(element_count(x, {d}, DType::i64), DType::f64);
    auto chosen = [&](const Tensor& values, const Tensor& otherwise) {
      return where(given, sum(where(pick, values, zeros_like(values))), otherwise);
    };
    const Tensor step = where(valid, chosen(steps, scalar_tensor<double>(1)), scalar_tensor<double>(0));
    x = index_select(x, d, slice_positions(n, chosen(starts, scalar_tensor<double>(0)), chosen(ends, n), step));
  }
  return x;
}

// Slice: attributes before opset 10, inputs (starts, ends, axes, steps) after.
BATON_ONNX_IMPORTER("Slice", [](NodeContext& c) -> Outputs {
  Tensor x = c.input(0);
  if (c.opset >= 10 && (c.computed_from_input_values(3) || c.computed_from_input_values(4)))
    return {slice_every_dim_by_values(c, x)};
  std::vector<int64_t> starts, ends, axes, steps;
  const bool bounds_at_run_time = c.opset >= 10 && (c.computed_from_input_values(1) || c.computed_from_input_values(2));
  if (c.opset < 10) {
    starts = c.attr_ints("starts"), ends = c.attr_ints("ends"), axes = c.attr_ints("axes");
  } else {
    if (!bounds_at_run_time) starts = c.ints_input(1), ends = c.ints_input(2);
    else starts.resize(size_t(c.static_dim(c.input(1), 0, "the count of starts")), 0), ends = starts;
    if (c.has_input(3)) axes = c.ints_input(3);
    if (c.has_input(4)) steps = c.ints_input(4);
  }
  if (axes.empty()) {
    axes.resize(starts.size());
    std::iota(axes.begin(), axes.end(), 0);
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    c.fail("starts, ends, axes and steps must have the same length");
  if (std::count(steps.begin(), steps.end(), 0)) c.fail("a step of 0");
  if (bounds_at_run_time) return {slice_by_values(c, x, axes, steps)};
  for (size_t i = 0; i < starts.size(); ++i) {
    if (steps[i] == 0) c.fail("a step of 0");
    const int64_t axis = normalize_axis(c, axes[i], x.dim());
    if (steps[i] < 0) {
      const int64_t n = x.shape()[size_t(axis)];
      if (sym::is_symbol(n)) c.fail(str("a negative step needs a static size along the axis, got ", x.shape()));
      x = index_select(x, axis, reverse_positions(n, starts[i], ends[i], steps[i]));
      continue;
    }
    // baton's slice clamps like ONNX's for positive steps; keep huge ends inside int64.
    const int64_t big = std::numeric_limits<int32_t>::max();
    auto bound = [&](int64_t v) { return sym::is_symbol(v) ? v : std::clamp(v, -big, big); };
    x = slice(x, axis, bound(starts[i]), bound(ends[i]), steps[i]);
  }
  return {x};
});

BATON_ONNX_IMPORTER("Gather", [](NodeContext& c) -> Outputs {
  const Tensor& x = c.input(0);
  Tensor index = cast(c.input(1), DType::i64);
  const int64_t axis = axis_attr(c, "axis", 0, x.dim());
  const int64_t n = x.shape()[size_t(axis)];
  if (!sym::is_symbol(n)) index = where(index < int64_t(0), index + n, index);  // negative: from the end
  Tensor picked = index_select(x, axis, reshape(index, Shape{-1}));
  Shape shape;
  for (int64_t d = 0; d < axis; ++d) shape.push_back(x.shape()[size_t(d)]);
  for (int64_t d : index.shape()) shape.push_back(d);
  for (int64_t d = axis + 1; d < x.dim(); ++d) shape.push_back(x.shape()[size_t(d)]);
  return {reshape(picked, shape)};
});

BATON_ONNX_IMPORTER("GatherElements", [](NodeContext& c) -> Outputs {
  const Tensor& x = c.input(0);
  Tensor index = cast(c.input(1), DType::i64);
  const int64_t axis = axis_attr(c, "axis", 0, x.dim());
  const int64_t n = x.shape()[size_t(axis)];
  if (!sym::is_symbol(n)) index = where(index < int64_t(0), index + n, index);
  return {gather(x, axis, index)};
});

// Whether a symbol of `a` meets another size in `b` (or b's symbol a size of a): it may be
// 1 or not, which only a run knows.
static bool symbol_meets_size(const Shape& a, const Shape& b) {
  const size_t rank = std::max(a.size(), b.size());
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i + a.size() >= rank ? a[i + a.size() - rank] : 1;
    const int64_t db = i + b.size() >= rank ? b[i + b.size() - rank] : 1;
    if (da != db && da != 1 && db != 1 && (sym::is_symbol(da) || sym::is_symbol(db))) return true;
  }
  return false;
}

// A static target that a symbol of x meets is expanded to when the model runs (expand_to
// checks the symbol's size then).
BATON_ONNX_IMPORTER("Expand", [](NodeContext& c) -> Outputs {
  const Tensor& x = c.input(0);
  if (c.computed_from_input_values(1)) return {expand_to(x, cast(c.input(1), DType::i64))};
  const Shape target(c.ints_input(1));
  if (sym::is_static(target) && symbol_meets_size(x.shape(), target))
    return {expand_to(x, tensor(target.vec(), Shape{int64_t(target.size())}))};
  return {expand(x, broadcast_to(c, x.shape(), target))};
});

// Tile by repeats read when the model runs: each dim d becomes (repeats[d], d), then the
// pairs merge, as below, with the sizes computed in the graph.
static Tensor tile_by_values(const NodeContext& c, const Tensor& x, const Tensor& repeats) {
  if (repeats.dim() != 1 || repeats.shape()[0] != x.dim())
    c.fail(str("needs ", x.dim(), " repeats, got a tensor of shape ", repeats.shape()));
  Shape paired;
  for (int64_t size : x.shape()) paired.push_back(1), paired.push_back(size);
  const Tensor sizes = shape_tensor(c, x, 0, x.dim()), counts = cast(repeats, DType::i64);
  const Tensor expanded = expand_to(reshape(x, paired), reshape(stack({counts, sizes}, 1), Shape{2 * x.dim()}));
  return reshape_to(expanded, counts * sizes);
}

BATON_ONNX_IMPORTER("Tile", [](NodeContext& c) -> Outputs {
  const Tensor& x = c.input(0);
  if (c.computed_from_input_values(1)) return {tile_by_values(c, x, c.input(1))};
  std::vector<int64_t> repeats = c.ints_input(1);
  if (int64_t(repeats.size()) != x.dim()) c.fail(str("needs ", x.dim(), " repeats, got ", repeats.size()));
  // Each dim d becomes (repeats, d) broadcast, then merges: out[i] = x[i mod d].
  Shape paired, expanded, merged;
  for (int64_t d = 0; d < x.dim(); ++d) {
    const int64_t size = x.shape()[size_t(d)];
    if (repeats[size_t(d)] < 0) c.fail("repeats must not be negative");
    paired.push_back(1), paired.push_back(size);
    expanded.push_back(repeats[size_t(d)]), expanded.push_back(size);
    merged.push_back(sym::mul(repeats[size_t(d)], size));
  }
  return {reshape(expand(reshape(x, paired), expanded), merged)};
});

// Pad along one axis by copies of the edge ("edge") or a mirror that skips the edge
// ("reflect"): positions gathered with index_select.
static Tensor pad_axis(const NodeContext& c, const Tensor& x, int64_t axis, int64_t before, int64_t after, bool reflect) {
  const int64_t n = x.shape()[size_t(axis)];
  if (sym::is_symbol(n)) c.fail(str("edge and reflect padding need static sizes, got ", x.shape()));
  if (reflect && (before >= n || after >= n)) c.fail(str("reflect padding of ", std::max(before, after), " needs more than ", n, " elements"));
  if (n == 0 && (before || after)) c.fail("cannot pad an empty dim by its edge");
  std::vector<int64_t> at;
  for (int64_t i = -before; i < n + after; ++i) {
    int64_t j = i;
    if (reflect) j = i < 0 ? -i : (i >= n ? 2 * (n - 1) - i : i);
    else j = std::clamp<int64_t>(i, 0, n - 1);
    at.push_back(j);
  }
  return index_select(x, axis, tensor(at, Shape{int64_t(at.size())}));
}

// Pad by pads (and a constant value) read when the model runs: along each dim the source
// positions -before .. n + after are computed in the graph and mapped inside (edge: the
// nearest, reflect: mirrored without the edge, constant: the nearest, then the value where
// the position is outside). A mirror reaching past the other edge, or an empty dim padded
// by its edge, reads outside x: index_select fails when it runs.
static Tensor pad_by_values(const NodeContext& c, Tensor x, const std::string& mode) {
  const Tensor pads = cast(c.input(1), DType::i64);
  const int64_t rank = x.dim();
  if (pads.dim() != 1 || pads.shape()[0] != 2 * rank) c.fail(str("needs ", 2 * rank, " pads, got ", pads.shape()));
  const Tensor value = c.has_input(2) ? cast(reshape(c.input(2), Shape{}), x.dtype()) : zeros({}, x.dtype());
  for (int64_t d = 0; d < rank; ++d) {
    const Tensor n = element_count(x, {d}, DType::i64), last = n - int64_t(1);
    const Tensor at = range_of(-entry(pads, d), n + entry(pads, d + rank), scalar_tensor<int64_t>(1));
    const Tensor nearest = minimum(maximum(at, scalar_tensor<int64_t>(0)), last);
    const Tensor mirrored = where(lt(at, int64_t(0)), -at, where(gt(at, last), last * int64_t(2) - at, at));
    x = index_select(x, d, mode == "reflect" ? mirrored : nearest);
    if (mode != "constant") continue;
    Shape along(size_t(rank), 1);
    along[size_t(d)] = at.shape()[0];
    x = where(reshape(ne(at, nearest), along), value, x);
  }
  return x;
}

// Pad: pads are an attribute before opset 11, inputs after; modes constant, edge, reflect.
BATON_ONNX_IMPORTER("Pad", [](NodeContext& c) -> Outputs {
  const Tensor& x = c.input(0);
  const std::string mode = c.attr_string("mode", "constant");
  if (mode != "constant" && mode != "edge" && mode != "reflect")
    c.fail(str("mode '", mode, "' is not one of constant, edge, reflect"));
  if (c.opset >= 11 && c.opset < 18 && (c.computed_from_input_values(1) || c.computed_from_input_values(2)))
    return {pad_by_values(c, x, mode)};
  std::vector<int64_t> pads = c.opset < 11 ? c.attr_ints(c.opset < 2 ? "paddings" : "pads") : c.ints_input(1);
  double value = c.opset < 11 ? c.attr_float("value", 0.0) : (c.has_input(2) ? c.scalar_input(2) : 0.0);
  std::vector<int64_t> axes(size_t(x.dim()));
  std::iota(axes.begin(), axes.end(), 0);
  if (c.opset >= 18 && c.has_input(3)) axes = c.ints_input(3);
  if (pads.size() != 2 * axes.size()) c.fail(str("needs ", 2 * axes.size(), " pads, got ", pads.size()));
  if (mode != "constant") {
    Tensor y = x;
    for (size_t i = 0; i < axes.size(); ++i)
      if (pads[i] || pads[i + axes.size()])
        y = pad_axis(c, y, normalize_axis(c, axes[i], x.dim()), pads[i], pads[i + axes.size()], mode == "reflect");
    return {y};
  }
  // ONNX lists all begins then all ends; baton's pad pairs (low, high) from the last dim.
  // Negative pads crop: those are sliced off first.
  Tensor y = x;
  std::vector<int64_t> pairs(size_t(2 * x.dim()), 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t axis = normalize_axis(c, axes[i], x.dim()), from_end = x.dim() - 1 - axis;
    const int64_t before = pads[i], after = pads[i + axes.size()];
    if (before < 0 || after < 0)
      y = slice(y, axis, std::max<int64_t>(-before, 0), after < 0 ? after : std::numeric_limits<int32_t>::max());
    pairs[size_t(2 * from_end)] = std::max<int64_t>(before, 0);
    pairs[size_t(2 * from_end + 1)] = std::max<int64_t>(after, 0);
  }
  return {pad(y, pairs, value)};
});

BATON_ONNX_IMPORTER("Shape", [](NodeContext& c) -> Outputs {
  const Tensor& x = c.input(0);
  const int64_t rank = x.dim();
  auto bound = [&](int64_t v) { return std::clamp(v < 0 ? v + rank : v, int64_t(0), rank); };
  return {shape_tensor(c, x, bound(c.attr_int("start", 0)), bound(c.attr_int("end", rank)))};
});

BATON_ONNX_IMPORTER("Size", [](NodeContext& c) -> Outputs {
  const Tensor& x = c.input(0);
  if (!sym::is_static(x.shape())) c.fail(str("takes the size of a tensor with symbolic dims (", x.shape(), ")"));
  return {scalar_tensor<int64_t>(x.numel())};
});

BATON_ONNX_IMPORTER("Constant", [](NodeContext& c) -> Outputs {
  if (c.has_attr("value")) return {c.attr_tensor("value")};
  if (c.has_attr("value_float")) return {scalar_tensor<float>(float(c.attr_float("value_float", 0)))};
  if (c.has_attr("value_int")) return {scalar_tensor<int64_t>(c.attr_int("value_int"))};
  if (c.has_attr("value_ints")) {
    std::vector<int64_t> v = c.attr_ints("value_ints");
    return {tensor(v, Shape{int64_t(v.size())})};
  }
  if (c.has_attr("value_floats")) {
    std::vector<double> v = c.attr_floats("value_floats");
    return {cast(tensor(v, Shape{int64_t(v.size())}), DType::f32)};
  }
  c.fail("holds a kind of constant baton does not read (sparse tensors, strings)");
});

BATON_ONNX_IMPORTER("ConstantOfShape", [](NodeContext& c) -> Outputs {
  Tensor value = c.has_attr("value") ? c.attr_tensor("value") : scalar_tensor<float>(0.f);
  if (value.numel() != 1) c.fail("value must hold one element");
  if (c.computed_from_input_values(0)) return {expand_to(reshape(value, Shape{}), cast(c.input(0), DType::i64))};
  std::vector<int64_t> shape = c.ints_input(0);
  for (int64_t d : shape)
    if (d < 0) c.fail(str("shape ", Shape(shape), " has a negative dim"));
  return {expand(reshape(value, Shape(shape.size(), 1)), Shape(shape)).contiguous()};
});

BATON_ONNX_IMPORTER("Range", [](NodeContext& c) -> Outputs {
  const Tensor& start = c.input(0);
  if (c.computed_from_input_values(0) || c.computed_from_input_values(1) || c.computed_from_input_values(2))
    return {range_of(start, c.input(1), c.input(2))};
  const double from = c.scalar_input(0), to = c.scalar_input(1), step = c.scalar_input(2);
  if (step == 0) c.fail("delta must not be 0");
  return {arange(from, to, step, start.dtype())};
});

}  // namespace baton::onnx::detail
