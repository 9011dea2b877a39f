// roi_align (ONNX RoiAlign, Mask R-CNN's RoIAlign): roi r = (x1, y1, x2, y2) of rois [R, 4],
// scaled by spatial_scale (and shifted by -0.5 with half_pixel), is cut into oh x ow bins;
// each bin is sampled on a regular grid of sampling_ratio^2 points (or ceil(bin size) per
// axis when sampling_ratio is 0), each point a bilinear interpolation of the image
// batch_indices[r] of x [N, C, H, W], and the bin's value is their average (or, with max,
// the largest weighted corner of any sample, as ONNX defines it). Points more than one pixel
// outside the image read zero; those less are clamped to the edge. Without half_pixel, rois
// are at least 1x1. Output [R, C, oh, ow].
//
// Gradient wrt x (both modes) through roi_align_backward, which scatters each bin's
// gradient back onto the corners its samples read; rois and batch_indices get none (the
// rois' coordinates are treated as constants, as in detection heads).
//
//   %3 = roi_align(%x, %rois, %batch_indices) {output_height=7, output_width=7, sampling_ratio=2,
//                                              spatial_scale=0.25, half_pixel=1, max=0}
#include <algorithm>
#include <cmath>
#include <vector>

#include "baton/ops.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/loops.h"
#include "ops/common.h"

namespace baton::ops {
namespace {

struct Options {
  int64_t oh, ow, sampling_ratio;
  double spatial_scale;
  bool half_pixel, max;
};

Options options_of(const CallContext& c) {
  Options o{c.attrs.i("output_height"), c.attrs.i("output_width"), c.attrs.i("sampling_ratio"),
            c.attrs.f("spatial_scale"), c.attrs.i("half_pixel") != 0, c.attrs.i("max") != 0};
  if (o.oh < 1 || o.ow < 1) c.fail<ValueError>("output size must be positive, got ", o.oh, "x", o.ow);
  if (o.sampling_ratio < 0) c.fail<ValueError>("sampling_ratio must not be negative, got ", o.sampling_ratio);
  return o;
}

// One bilinear sample: four flat positions in the plane and their weights.
struct Sample {
  int64_t at[4] = {0, 0, 0, 0};
  double weight[4] = {0, 0, 0, 0};
};

// The samples of one roi, bin by bin (oh * ow bins of `per_bin` samples each).
struct RoiSamples {
  int64_t batch = 0, per_bin = 0;
  std::vector<Sample> samples;
};

// The interpolation of the plane [h, w] at (y, x).
Sample bilinear(double y, double x, int64_t h, int64_t w) {
  Sample s;
  if (!(y >= -1.0 && y <= double(h) && x >= -1.0 && x <= double(w))) return s;  // outside (or NaN): zero
  y = std::max(y, 0.0), x = std::max(x, 0.0);
  auto low_high = [](double& v, int64_t size, int64_t& low, int64_t& high) {
    low = int64_t(v);
    if (low >= size - 1) low = high = size - 1, v = double(low);
    else high = low + 1;
  };
  int64_t y0, y1, x0, x1;
  low_high(y, h, y0, y1);
  low_high(x, w, x0, x1);
  const double ly = y - double(y0), lx = x - double(x0), hy = 1 - ly, hx = 1 - lx;
  s.at[0] = y0 * w + x0, s.at[1] = y0 * w + x1, s.at[2] = y1 * w + x0, s.at[3] = y1 * w + x1;
  s.weight[0] = hy * hx, s.weight[1] = hy * lx, s.weight[2] = ly * hx, s.weight[3] = ly * lx;
  return s;
}

// At most this many samples per roi (a roi of a few million pixels): a malformed roi
// becomes an error rather than an allocation of its size.
constexpr int64_t kMaxSamplesPerRoi = int64_t(1) << 24;

template <class T>
RoiSamples roi_samples(const CallContext& c, const Options& o, const T* roi, int64_t batch, int64_t h, int64_t w) {
  const double offset = o.half_pixel ? 0.5 : 0.0;
  const double x1 = double(roi[0]) * o.spatial_scale - offset, y1 = double(roi[1]) * o.spatial_scale - offset;
  const double x2 = double(roi[2]) * o.spatial_scale - offset, y2 = double(roi[3]) * o.spatial_scale - offset;
  if (!std::isfinite(x1) || !std::isfinite(y1) || !std::isfinite(x2) || !std::isfinite(y2))
    c.fail<ValueError>("roi (", roi[0], ", ", roi[1], ", ", roi[2], ", ", roi[3], ") is not finite");
  double roi_w = x2 - x1, roi_h = y2 - y1;
  if (!o.half_pixel) roi_w = std::max(roi_w, 1.0), roi_h = std::max(roi_h, 1.0);
  const double bin_h = roi_h / double(o.oh), bin_w = roi_w / double(o.ow);
  const double grid_h = o.sampling_ratio > 0 ? double(o.sampling_ratio) : std::max(0.0, std::ceil(bin_h));
  const double grid_w = o.sampling_ratio > 0 ? double(o.sampling_ratio) : std::max(0.0, std::ceil(bin_w));
  if (grid_h * grid_w * double(o.oh * o.ow) > double(kMaxSamplesPerRoi))
    c.fail<ValueError>("roi (", roi[0], ", ", roi[1], ", ", roi[2], ", ", roi[3], ") needs ", grid_h, "x", grid_w,
                       " samples per bin, more than baton allows");
  RoiSamples r;
  r.batch = batch;
  const auto gh = int64_t(grid_h), gw = int64_t(grid_w);
  r.per_bin = gh * gw;
  r.samples.reserve(size_t(o.oh * o.ow * r.per_bin));
  for (int64_t ph = 0; ph < o.oh; ++ph)
    for (int64_t pw = 0; pw < o.ow; ++pw)
      for (int64_t iy = 0; iy < gh; ++iy) {
        const double y = y1 + double(ph) * bin_h + (double(iy) + 0.5) * bin_h / grid_h;
        for (int64_t ix = 0; ix < gw; ++ix) {
          const double x = x1 + double(pw) * bin_w + (double(ix) + 0.5) * bin_w / grid_w;
          r.samples.push_back(bilinear(y, x, h, w));
        }
      }
  return r;
}

struct Geometry {
  int64_t n, c, h, w, rois;
};

Geometry geometry_of(const CallContext& c, const Tensor& x, const Tensor& rois, const Tensor& batch_indices) {
  const Shape &xs = x.shape(), &rs = rois.shape(), &bs = batch_indices.shape();
  if (xs.size() != 4) c.fail("x must be [N, C, H, W], got ", xs);
  if (rs.size() != 2 || rs[1] != 4) c.fail("rois must be [R, 4], got ", rs);
  if (bs.size() != 1 || bs[0] != rs[0]) c.fail("batch_indices must be [R] = [", rs[0], "], got ", bs);
  if (!is_floating(x.dtype()) || rois.dtype() != x.dtype())
    c.fail<DTypeError>("x and rois must be floating-point tensors of one dtype");
  if (batch_indices.dtype() != i64 && batch_indices.dtype() != i32)
    c.fail<DTypeError>("batch_indices must be integers, got ", batch_indices.dtype());
  return {xs[0], xs[1], xs[2], xs[3], rs[0]};
}

// Every roi's samples, its batch index checked.
template <class T>
std::vector<RoiSamples> all_roi_samples(const CallContext& c, const Options& o, const Geometry& g, const Tensor& rois,
                                        const Tensor& batch_indices) {
  const Tensor indices = kernels::dense(batch_indices);
  const T* r = rois.data<T>();
  std::vector<RoiSamples> out(size_t(g.rois));
  for (int64_t i = 0; i < g.rois; ++i) {
    const int64_t batch = indices.dtype() == i64 ? indices.data<int64_t>()[i] : indices.data<int32_t>()[i];
    if (batch < 0 || batch >= g.n)
      c.fail<IndexError>("batch index ", batch, " of roi ", i, " is outside [0, ", g.n, ")");
    out[size_t(i)] = roi_samples(c, o, r + i * 4, batch, g.h, g.w);
  }
  return out;
}

// One bin's value on one plane.
template <class T>
double bin_value(const T* plane, const Sample* s, int64_t count, bool max) {
  if (max) {
    double best = 0;
    for (int64_t k = 0; k < count; ++k)
      for (int j = 0; j < 4; ++j) {
        const double v = s[k].weight[j] * double(plane[s[k].at[j]]);
        if ((k == 0 && j == 0) || v > best) best = v;
      }
    return best;
  }
  double sum = 0;
  for (int64_t k = 0; k < count; ++k)
    for (int j = 0; j < 4; ++j) sum += s[k].weight[j] * double(plane[s[k].at[j]]);
  return sum / double(std::max<int64_t>(count, 1));
}

template <class T>
void pool_rois(const Options& o, const Geometry& g, const std::vector<RoiSamples>& rois, const T* x, T* y) {
  const int64_t bins = o.oh * o.ow, plane = g.h * g.w;
  kernels::parallel_range(
      g.rois * g.c,
      [&](int64_t begin, int64_t end) {
        for (int64_t item = begin; item < end; ++item) {
          const RoiSamples& r = rois[size_t(item / g.c)];
          const T* img = x + (r.batch * g.c + item % g.c) * plane;
          for (int64_t b = 0; b < bins; ++b)
            y[item * bins + b] = T(bin_value(img, r.samples.data() + b * r.per_bin, r.per_bin, o.max));
        }
      },
      kernels::grain_for(bins * 16));
}

// gx[batch, c] += each bin's gradient on the corners its value came from: all, weighted
// and averaged (avg), or the one largest weighted corner (max). Items are channels, so
// no two write the same place.
template <class T>
void scatter_rois(const Options& o, const Geometry& g, const std::vector<RoiSamples>& rois, const T* x, const T* gy,
              T* gx) {
  const int64_t bins = o.oh * o.ow, plane = g.h * g.w;
  std::fill(gx, gx + g.n * g.c * plane, T(0));
  kernels::parallel_range(g.c, [&](int64_t begin, int64_t end) {
    for (int64_t ch = begin; ch < end; ++ch)
      for (int64_t i = 0; i < g.rois; ++i) {
        const RoiSamples& r = rois[size_t(i)];
        const T* img = x + (r.batch * g.c + ch) * plane;
        T* out = gx + (r.batch * g.c + ch) * plane;
        for (int64_t b = 0; b < bins; ++b) {
          const double up = double(gy[(i * g.c + ch) * bins + b]);
          const Sample* s = r.samples.data() + b * r.per_bin;
          if (!o.max) {
            const double share = up / double(std::max<int64_t>(r.per_bin, 1));
            for (int64_t k = 0; k < r.per_bin; ++k)
              for (int j = 0; j < 4; ++j) out[s[k].at[j]] += T(share * s[k].weight[j]);
            continue;
          }
          int64_t best_k = -1;
          int best_j = 0;
          double best = 0;
          for (int64_t k = 0; k < r.per_bin; ++k)
            for (int j = 0; j < 4; ++j) {
              const double v = s[k].weight[j] * double(img[s[k].at[j]]);
              if (best_k < 0 || v > best) best = v, best_k = k, best_j = j;
            }
          if (best_k >= 0) out[s[best_k].at[best_j]] += T(up * s[best_k].weight[best_j]);
        }
      }
  }, 1);
}

TensorMeta infer(const InferContext& c) {
  const Options o = options_of(c);
  const Geometry g = geometry_of(c, c.input(0), c.input(1), c.input(2));
  return {c.input(0).dtype(), Shape{g.rois, g.c, o.oh, o.ow}};
}

void kernel(const KernelContext& c) {
  const Tensor x = kernels::dense(c.input(0)), rois = kernels::dense(c.input(1));
  const Options& o = c.params<Options>();
  const Geometry g = geometry_of(c, x, rois, c.input(2));
  kernels::visit_float(x.dtype(), "roi_align", [&](auto tag) {
    using T = typename decltype(tag)::type;
    pool_rois<T>(o, g, all_roi_samples<T>(c, o, g, rois, c.input(2)), x.data<T>(), c.output().data<T>());
  });
}

// Inputs (grad_output, x, rois, batch_indices): grad_x.
TensorMeta infer_backward(const InferContext& c) {
  const Options o = options_of(c);
  const Geometry g = geometry_of(c, c.input(1), c.input(2), c.input(3));
  if (c.input(0).dtype() != c.input(1).dtype() || !(c.input(0).shape() == Shape{g.rois, g.c, o.oh, o.ow}))
    c.fail("the output gradient must be ", c.input(1).dtype(), "[", g.rois, ", ", g.c, ", ", o.oh, ", ", o.ow, "]");
  return {c.input(1).dtype(), c.input(1).shape()};
}

void kernel_backward(const KernelContext& c) {
  const Tensor gy = kernels::dense(c.input(0)), x = kernels::dense(c.input(1)), rois = kernels::dense(c.input(2));
  const Options& o = c.params<Options>();
  const Geometry g = geometry_of(c, x, rois, c.input(3));
  kernels::visit_float(x.dtype(), "roi_align_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    scatter_rois<T>(o, g, all_roi_samples<T>(c, o, g, rois, c.input(3)), x.data<T>(), gy.data<T>(),
                c.output().data<T>());
  });
}

Cost roi_cost(const CallContext& c, std::span<const TensorMeta> out) {
  const double n = double(out[0].shape.numel());
  return {16 * n, (n + double(c.input(0).numel())) * double(dtype_size(out[0].dtype))};
}

}  // namespace

BATON_OP(roi_align_op, "roi_align")
    .inputs(3)
    .int_attr("output_height")
    .int_attr("output_width")
    .int_attr("sampling_ratio")
    .float_attr("spatial_scale")
    .int_attr("half_pixel")
    .int_attr("max")
    .infer(infer)
    .params(options_of)
    .cpu(kernel)
    .grad([](const GradContext& c) {
      return Grads{call(*find_op("roi_align_backward"), {c.grad_output(), c.input(0), c.input(1), c.input(2)},
                        c.attrs, c.loc),
                   Tensor(), Tensor()};
    })
    .cost(roi_cost)
    .onnx("RoiAlign");

BATON_OP(roi_align_backward_op, "roi_align_backward")
    .inputs(4)
    .int_attr("output_height")
    .int_attr("output_width")
    .int_attr("sampling_ratio")
    .float_attr("spatial_scale")
    .int_attr("half_pixel")
    .int_attr("max")
    .infer(infer_backward)
    .params(options_of)
    .cpu(kernel_backward)
    .cost(roi_cost);

}  // namespace baton::ops

namespace baton {

Tensor roi_align(const Tensor& x, const Tensor& rois, const Tensor& batch_indices, const RoiAlignOptions& o,
                 SourceLoc loc) {
  return ops::call(ops::roi_align_op, {x, rois, batch_indices},
                   {{"output_height", o.output_height},
                    {"output_width", o.output_width},
                    {"sampling_ratio", o.sampling_ratio},
                    {"spatial_scale", o.spatial_scale},
                    {"half_pixel", int64_t(o.half_pixel)},
                    {"max", int64_t(o.max)}},
                   loc);
}

}  // namespace baton
