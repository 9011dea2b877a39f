// Neural-network ops. Images are NCHW.
#pragma once
#include <array>
#include <string>
#include <utility>
#include <vector>

#include "baton/tensor.h"

namespace baton {

// y = x @ weight^T + bias; weight is [out_features, in_features], bias optional.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
              SourceLoc loc = SourceLoc::current());

struct Conv2dOptions {
  std::array<int64_t, 2> stride{1, 1};
  std::array<int64_t, 2> padding{0, 0};
  std::array<int64_t, 2> dilation{1, 1};
  int64_t groups = 1;
};
// weight: [out_channels, in_channels / groups, kh, kw]; bias optional.
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
              const Conv2dOptions& options = {}, SourceLoc loc = SourceLoc::current());

struct Pool2dOptions {
  std::array<int64_t, 2> kernel{2, 2};
  std::array<int64_t, 2> stride{0, 0};  // {0, 0}: the kernel size
  std::array<int64_t, 2> padding{0, 0};
};
Tensor max_pool2d(const Tensor& x, const Pool2dOptions& options, SourceLoc loc = SourceLoc::current());
Tensor avg_pool2d(const Tensor& x, const Pool2dOptions& options, SourceLoc loc = SourceLoc::current());
Tensor adaptive_avg_pool2d(const Tensor& x, std::array<int64_t, 2> output_size,
                           SourceLoc loc = SourceLoc::current());

// In training mode normalizes with the batch statistics and updates running_mean/var in
// place (momentum as in PyTorch); in inference mode uses the running statistics.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum = 0.1,
                  double eps = 1e-5, SourceLoc loc = SourceLoc::current());
// Normalizes over the last normalized_shape.size() dims.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5, SourceLoc loc = SourceLoc::current());
// Zeroes elements with probability p and scales the rest by 1/(1-p) when training.
Tensor dropout(const Tensor& x, double p, bool training, SourceLoc loc = SourceLoc::current());
// Rows of weight picked by integer indices: out.shape = indices.shape + [dim].
Tensor embedding(const Tensor& weight, const Tensor& indices, SourceLoc loc = SourceLoc::current());

// ---- vision and detection ops (ONNX NonMaxSuppression, GridSample, RoiAlign, MaxUnpool) ----

// Non-maximum suppression per (batch, class). How many boxes it selects depends on the
// values: in a graph that count is a fresh symbol (`nms_1`), bound when a run selects.
// boxes [B, N, 4] as (y1, x1, y2, x2) corner pairs, or (x_center, y_center, width, height)
// with center_point_box; scores [B, C, N]. Returns int64 [K, 3] rows (batch, class, box),
// per (batch, class) in order of decreasing score (ties: lower box index first).
struct NmsOptions {
  int64_t max_boxes_per_class = 0;  // at most this many per (batch, class); 0 selects none
  double iou_threshold = 0;         // a box whose IoU with a selected one is above it is dropped
  bool has_score_threshold = false;  // without it every box is a candidate
  double score_threshold = 0;       // candidates have a score strictly above it
  bool center_point_box = false;
};
Tensor non_max_suppression(const Tensor& boxes, const Tensor& scores, const NmsOptions& options = {},
                           SourceLoc loc = SourceLoc::current());
// The same with the limits in tensors of one value each, read when it runs (a graph's
// inputs: ONNX's NonMaxSuppression takes them so): no score threshold where it is undefined.
struct NmsLimits {
  Tensor max_boxes_per_class;  // an integer
  Tensor iou_threshold;        // a float
  Tensor score_threshold;      // a float, or undefined
};
Tensor non_max_suppression(const Tensor& boxes, const Tensor& scores, const NmsLimits& limits,
                           bool center_point_box = false, SourceLoc loc = SourceLoc::current());

// Samples x [N, C, H, W] at the points of grid [N, Ho, Wo, 2] (x then y, normalized to
// [-1, 1] over the image): [N, C, Ho, Wo] (ONNX GridSample, PyTorch grid_sample).
struct GridSampleOptions {
  std::string mode = "bilinear";       // "bilinear", "nearest" or "bicubic"
  std::string padding_mode = "zeros";  // outside the image: "zeros", "border" or "reflection"
  bool align_corners = false;          // -1 and 1 are the centres of the edge pixels (else their outer edges)
};
Tensor grid_sample(const Tensor& x, const Tensor& grid, const GridSampleOptions& options = {},
                   SourceLoc loc = SourceLoc::current());

// Resamples every dim of x (ONNX Resize, PyTorch interpolate): `scales_or_sizes` is 1-D,
// one value per dim: floats are scales (out = floor(in * scale)), integers output sizes.
// Each output position maps to a source coordinate (`coordinates`, ONNX's
// coordinate_transformation_mode) and reads 1, 2 or 4 neighbours, edge-clamped. Where the
// values are computed in a graph, the output dims are fresh symbols bound when it runs.
struct ResizeOptions {
  std::string mode = "nearest";                  // "nearest", "linear" or "cubic"
  std::string coordinates = "half_pixel";        // also pytorch_half_pixel, align_corners, asymmetric,
                                                 // tf_half_pixel_for_nn, tf_crop_and_resize
  std::string nearest_mode = "round_prefer_floor";  // also round_prefer_ceil, floor, ceil, and
                                                    // "simple" (opset 10: floor enlarging, ceil shrinking)
  double cubic_a = -0.75;       // Keys' coefficient
  bool exclude_outside = false; // cubic neighbours outside x get no weight (the rest renormalized)
  double extrapolation = 0.0;   // tf_crop_and_resize: the value where a source is outside x
  // The output dims a graph already knows the values give (sizes, or symbols such as the
  // h of another input whose shape the sizes were computed from), checked when it runs;
  // empty: only what the values of a constant say.
  std::vector<int64_t> known_dims;
};
// `roi` (tf_crop_and_resize only): [starts..., ends...] per dim, as fractions of x.
Tensor resize(const Tensor& x, const Tensor& scales_or_sizes, const ResizeOptions& options = {},
              const Tensor& roi = {}, SourceLoc loc = SourceLoc::current());

// Region-of-interest align (ONNX RoiAlign): each roi (x1, y1, x2, y2) of rois [R, 4] on the
// image batch_indices[r] of x [N, C, H, W], divided into output_height x output_width bins,
// each the average (or max) of bilinear samples on a regular grid: [R, C, oh, ow].
struct RoiAlignOptions {
  int64_t output_height = 1, output_width = 1;
  int64_t sampling_ratio = 0;  // samples per bin along each axis; 0: ceil(bin size)
  double spatial_scale = 1;    // roi coordinates times this are pixel coordinates
  bool half_pixel = true;      // shift the scaled roi by -0.5 (ONNX's "half_pixel")
  bool max = false;            // max of the samples instead of their average
};
Tensor roi_align(const Tensor& x, const Tensor& rois, const Tensor& batch_indices, const RoiAlignOptions& options = {},
                 SourceLoc loc = SourceLoc::current());

// The inverse of max pooling with indices (ONNX MaxUnpool): a tensor of `output_shape`,
// zero but for y.flat[indices.flat[i]] = x.flat[i] (indices int64, of x's shape, into the
// whole flattened output).
Tensor max_unpool(const Tensor& x, const Tensor& indices, const Shape& output_shape,
                  SourceLoc loc = SourceLoc::current());

// max_pool2d's values and, for each, the flat position h * W + w of its window's first
// maximum within its [H, W] plane (int64).
std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, const Pool2dOptions& options,
                                                  SourceLoc loc = SourceLoc::current());

}  // namespace baton
