// non_max_suppression (ONNX NonMaxSuppression): for each (batch, class), the boxes whose
// score is above the threshold, visited in order of decreasing score (ties: lower index
// first), are kept unless their intersection over union with a box already kept for that
// class is above iou_threshold, up to max_boxes_per_class. Boxes are corner pairs in any
// order, or centre and size; the IoU is computed in the boxes' dtype. Boxes of zero or
// negative area never suppress nor are suppressed. A NaN score is never selected.
//
// How many boxes survive depends on the values (OpDef::sized_by_values): in a graph the
// node holds a fresh symbol for it, bound when a plan's run has selected the boxes
// (runtime/plan.h, "Stages"). Integer output: no gradient.
//
//   %2 = non_max_suppression(%boxes, %scores) {max_boxes_per_class=3, iou_threshold=0.5,
//        center_point_box=0, count=nms_1}      -> i64[nms_1, 3]
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "baton/ops.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/loops.h"
#include "ops/common.h"

namespace baton::ops {
namespace {

// A box as its extent along two axes (the ONNX formats name them y/x or x/y; IoU does not
// care which is which).
template <class T>
struct Extent {
  T lo0, hi0, lo1, hi1;
  T area() const { return (hi0 - lo0) * (hi1 - lo1); }
};

template <class T>
Extent<T> extent_of(const T* b, bool center_point_box) {
  if (center_point_box) {
    const T half0 = b[2] / T(2), half1 = b[3] / T(2);
    return {b[0] - half0, b[0] + half0, b[1] - half1, b[1] + half1};
  }
  return {std::min(b[0], b[2]), std::max(b[0], b[2]), std::min(b[1], b[3]), std::max(b[1], b[3])};
}

template <class T>
bool overlaps_too_much(const Extent<T>& a, const Extent<T>& b, double iou_threshold) {
  const T lo0 = std::max(a.lo0, b.lo0), hi0 = std::min(a.hi0, b.hi0);
  const T lo1 = std::max(a.lo1, b.lo1), hi1 = std::min(a.hi1, b.hi1);
  if (!(hi0 > lo0) || !(hi1 > lo1)) return false;
  const T intersection = (hi0 - lo0) * (hi1 - lo1);
  const T area_a = a.area(), area_b = b.area(), union_area = area_a + area_b - intersection;
  if (!(intersection > 0) || !(area_a > 0) || !(area_b > 0) || !(union_area > 0)) return false;
  return double(intersection / union_area) > iou_threshold;
}

// The selected box indices of one (batch, class): `extents` of the batch's boxes,
// `scores` of the class.
template <class T, class S>
std::vector<int64_t> select_boxes(const std::vector<Extent<T>>& extents, const S* scores, const NmsOptions& o) {
  const auto n = int64_t(extents.size());
  std::vector<int64_t> candidates;
  for (int64_t i = 0; i < n; ++i) {
    const double s = double(scores[i]);
    if (!std::isnan(s) && (!o.has_score_threshold || s > o.score_threshold)) candidates.push_back(i);
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [&](int64_t a, int64_t b) { return scores[a] > scores[b]; });
  std::vector<int64_t> kept;
  for (int64_t i : candidates) {
    if (int64_t(kept.size()) >= o.max_boxes_per_class) break;
    const bool suppressed = std::any_of(kept.begin(), kept.end(), [&](int64_t k) {
      return overlaps_too_much(extents[size_t(i)], extents[size_t(k)], o.iou_threshold);
    });
    if (!suppressed) kept.push_back(i);
  }
  return kept;
}

void check_inputs(const CallContext& c) {
  const Tensor &boxes = c.input(0), &scores = c.input(1);
  const Shape &b = boxes.shape(), &s = scores.shape();
  if (b.size() != 3 || b[2] != 4) c.fail("boxes must be [batches, boxes, 4], got ", b);
  if (s.size() != 3 || s[0] != b[0] || s[2] != b[1])
    c.fail("scores must be [batches, classes, boxes] = [", sym::to_string(b[0]), ", classes, ", sym::to_string(b[1]),
           "], got ", s);
  if (!is_floating(boxes.dtype()) || !is_floating(scores.dtype()))
    c.fail<DTypeError>("boxes and scores must be floating-point");
}

// The limits given as tensors (inputs 2, 3 and 4: the box limit, the IoU and score
// thresholds) hold one value each, read when the op runs.
void check_limit_inputs(const CallContext& c) {
  for (size_t i = 2; i < c.inputs.size(); ++i) {
    const Tensor& t = c.input(i);
    const bool count = i == 2;
    if (t.numel() != 1 || (count ? !is_integral(t.dtype()) : !is_floating(t.dtype())))
      c.fail<DTypeError>(count ? "max_boxes_per_class" : i == 3 ? "iou_threshold" : "score_threshold",
                         " must hold one ", count ? "integer" : "float", ", got ", t.dtype(), t.shape());
  }
}

double value_of(const Tensor& t) { return cast(t, DType::f64).contiguous().to_vector<double>()[0]; }

NmsOptions options_of(const CallContext& c) {
  const Attrs& a = c.attrs;
  NmsOptions o;
  // A limit past any box count is no limit (and stays inside int64 through the double).
  o.max_boxes_per_class = c.inputs.size() > 2 ? int64_t(std::clamp(value_of(c.input(2)), 0.0, 1e18))
                                              : a.has("max_boxes_per_class") ? a.i("max_boxes_per_class") : 0;
  o.iou_threshold = c.inputs.size() > 3 ? value_of(c.input(3)) : a.has("iou_threshold") ? a.f("iou_threshold") : 0.0;
  o.has_score_threshold = c.inputs.size() > 4 || a.has("score_threshold");
  o.score_threshold = c.inputs.size() > 4 ? value_of(c.input(4)) : o.has_score_threshold ? a.f("score_threshold") : 0.0;
  o.center_point_box = a.i("center_point_box") != 0;
  return o;
}

// In a graph: [count, 3] with the node's count symbol.
TensorMeta infer(const InferContext& c) {
  check_inputs(c);
  check_limit_inputs(c);
  return {DType::i64, Shape{count_attr(c), 3}};
}

// The selection on concrete boxes and scores, each (batch, class) on its own thread.
std::vector<Tensor> select(const CallContext& c) {
  check_inputs(c);
  check_limit_inputs(c);
  const NmsOptions options = options_of(c);
  const Tensor boxes = kernels::dense(c.input(0)), scores = kernels::dense(c.input(1));
  const int64_t batches = boxes.size(0), n = boxes.size(1), classes = scores.size(1);
  std::vector<std::vector<int64_t>> kept(size_t(batches * classes));
  kernels::visit_float(boxes.dtype(), "non_max_suppression", [&](auto box_tag) {
    using T = typename decltype(box_tag)::type;
    kernels::visit_float(scores.dtype(), "non_max_suppression", [&](auto score_tag) {
      using S = typename decltype(score_tag)::type;
      kernels::parallel_range(
          batches * classes,
          [&](int64_t begin, int64_t end) {
            std::vector<Extent<T>> extents(static_cast<size_t>(n));
            int64_t extents_of = -1;  // the batch `extents` holds
            for (int64_t item = begin; item < end; ++item) {
              const int64_t b = item / classes;
              if (b != extents_of) {
                for (int64_t i = 0; i < n; ++i)
                  extents[size_t(i)] = extent_of(boxes.data<T>() + (b * n + i) * 4, options.center_point_box);
                extents_of = b;
              }
              kept[size_t(item)] = select_boxes(extents, scores.data<S>() + item * n, options);
            }
          },
          kernels::grain_for(n * 8));
    });
  });
  std::vector<int64_t> rows;
  for (int64_t item = 0; item < batches * classes; ++item)
    for (int64_t box : kept[size_t(item)]) rows.insert(rows.end(), {item / classes, item % classes, box});
  return {tensor(rows, Shape{int64_t(rows.size() / 3), 3})};
}

}  // namespace

// Inputs boxes, scores, then optionally the limits as tensors (NmsLimits), which replace
// the attributes of the same names.
BATON_OP(nms_op, "non_max_suppression")
    .inputs(2, 5)
    .int_attr("max_boxes_per_class", OpDef::optional)
    .float_attr("iou_threshold", OpDef::optional)
    .float_attr("score_threshold", OpDef::optional)
    .int_attr("center_point_box")
    .int_attr("count", OpDef::optional)
    .value_sized(select)
    .infer(infer);

}  // namespace baton::ops

namespace baton {

Tensor non_max_suppression(const Tensor& boxes, const Tensor& scores, const NmsOptions& options, SourceLoc loc) {
  ops::Attrs attrs{{"max_boxes_per_class", options.max_boxes_per_class},
                   {"iou_threshold", options.iou_threshold},
                   {"center_point_box", int64_t(options.center_point_box)}};
  if (options.has_score_threshold) attrs.set("score_threshold", options.score_threshold);
  const Tensor inputs[] = {boxes, scores};
  return ops::call(ops::nms_op, {boxes, scores}, ops::with_count_symbol(std::move(attrs), inputs, "nms"), loc);
}

Tensor non_max_suppression(const Tensor& boxes, const Tensor& scores, const NmsLimits& limits, bool center_point_box,
                           SourceLoc loc) {
  std::vector<Tensor> inputs{boxes, scores, limits.max_boxes_per_class, limits.iou_threshold};
  if (limits.score_threshold.defined()) inputs.push_back(limits.score_threshold);
  const ops::Attrs attrs{{"center_point_box", int64_t(center_point_box)}};
  return ops::call_many(ops::nms_op, inputs, ops::with_count_symbol(attrs, inputs, "nms"), loc)[0];
}

}  // namespace baton
