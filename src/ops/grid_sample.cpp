// grid_sample (ONNX GridSample, PyTorch grid_sample): out[n, c, i, j] samples the image
// x[n, c] at the point grid[n, i, j] = (gx, gy), normalized so that -1 and 1 are the edges
// of the image (or, with align_corners, the centres of the edge pixels). Each axis is
// handled alone: its coordinate is denormalized, rounded (nearest), brought back inside the
// image for border and reflection padding, then gives 1, 2 or 4 taps (nearest, bilinear,
// bicubic with Keys' a = -0.75), each an index and a weight; a tap outside the image reads
// zero (zeros), the edge pixel (border) or its mirror image (reflection). A 2-D sample is
// the sum over pairs of taps of wy * wx * pixel. A non-finite coordinate samples zero.
//
// Gradients: x and grid for every mode (nearest's grid gradient is zero, its true value
// almost everywhere), through grid_sample_backward, which runs the same taps backwards. The
// backward op itself has no gradient (no second derivatives).
//
//   %2 = grid_sample(%x, %grid) {mode="bilinear", padding_mode="zeros", align_corners=0}
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

enum class Interp { Nearest, Linear, Cubic };
enum class Padding { Zeros, Border, Reflection };
struct Sampling {
  Interp interp;
  Padding padding;
  bool align_corners;
};

Sampling sampling_of(const CallContext& c) {
  const std::string &mode = c.attrs.s("mode"), &padding = c.attrs.s("padding_mode");
  Sampling s{Interp::Linear, Padding::Zeros, c.attrs.i("align_corners") != 0};
  if (mode == "nearest") s.interp = Interp::Nearest;
  else if (mode == "bicubic" || mode == "cubic") s.interp = Interp::Cubic;
  else if (mode != "bilinear" && mode != "linear")
    c.fail<ValueError>("mode must be bilinear, nearest or bicubic, not '", mode, "'");
  if (padding == "border") s.padding = Padding::Border;
  else if (padding == "reflection") s.padding = Padding::Reflection;
  else if (padding != "zeros")
    c.fail<ValueError>("padding_mode must be zeros, border or reflection, not '", padding, "'");
  return s;
}

// x mirrored at lo and hi until it lies in [lo, hi], and d(result)/dx (+1 or -1).
std::pair<double, double> reflect(double x, double lo, double hi) {
  const double range = hi - lo;
  if (range <= 0) return {lo, 0};
  const bool below = x < lo;
  const double over = below ? lo - x : x - hi;
  const double folds = std::floor(over / range), rest = over - folds * range;
  const bool even = std::fmod(folds, 2.0) == 0;
  const double r = below == even ? lo + rest : hi - rest;
  return {std::clamp(r, lo, hi), even ? -1.0 : 1.0};
}

// Keys' cubic convolution weights for the taps at offsets -1, 0, 1, 2 from floor(x), t =
// x - floor(x), and their derivatives in t.
constexpr double kCubicA = -0.75;
double cubic_near(double u) { return ((kCubicA + 2) * u - (kCubicA + 3)) * u * u + 1; }
double cubic_far(double u) { return ((kCubicA * u - 5 * kCubicA) * u + 8 * kCubicA) * u - 4 * kCubicA; }
double cubic_near_slope(double u) { return 3 * (kCubicA + 2) * u * u - 2 * (kCubicA + 3) * u; }
double cubic_far_slope(double u) { return 3 * kCubicA * u * u - 10 * kCubicA * u + 8 * kCubicA; }

// The taps of one axis: pixel indices (-1: outside, reads zero), weights and d weight / d
// normalized coordinate.
struct AxisTaps {
  int count = 0;
  int64_t index[4];
  double weight[4], slope[4];
  void add(int64_t i, double w, double dw) {
    index[count] = i, weight[count] = w, slope[count] = dw;
    ++count;
  }
};

// Where a tap at integer position i reads, or -1 for zero.
int64_t tap_index(int64_t i, int64_t size, double lo, double hi, Padding p) {
  if (i >= 0 && i < size) return i;
  if (p == Padding::Zeros) return -1;
  if (p == Padding::Border) return std::clamp<int64_t>(i, 0, size - 1);
  return std::clamp<int64_t>(int64_t(reflect(double(i), lo, hi).first), 0, size - 1);
}

AxisTaps axis_taps(double normalized, int64_t size, const Sampling& s) {
  AxisTaps taps;
  const double scale = s.align_corners ? double(size - 1) / 2 : double(size) / 2;
  double x = s.align_corners ? (normalized + 1) * scale : ((normalized + 1) * double(size) - 1) / 2;
  double dx = scale;  // dx / d normalized
  if (!std::isfinite(x) || size == 0) return taps;
  if (s.interp == Interp::Nearest) x = std::nearbyint(x), dx = 0;
  const double lo = s.align_corners ? 0 : -0.5, hi = s.align_corners ? double(size - 1) : double(size) - 0.5;
  if (x < lo || x > hi) {
    if (s.padding == Padding::Border) {
      x = std::clamp(x, 0.0, double(size - 1)), dx = 0;
    } else if (s.padding == Padding::Reflection) {
      const auto [r, sign] = reflect(x, lo, hi);
      x = r, dx *= sign;
    } else if (x < -3 || x > double(size) + 2) {
      return taps;  // every tap is outside: zero
    }
  }
  auto at = [&](int64_t i) { return tap_index(i, size, lo, hi, s.padding); };
  if (s.interp == Interp::Nearest) {
    taps.add(at(int64_t(x)), 1, 0);
    return taps;
  }
  const double floor_x = std::floor(x), t = x - floor_x;
  const auto x0 = int64_t(floor_x);
  if (s.interp == Interp::Linear) {
    taps.add(at(x0), 1 - t, -dx);
    taps.add(at(x0 + 1), t, dx);
    return taps;
  }
  taps.add(at(x0 - 1), cubic_far(t + 1), cubic_far_slope(t + 1) * dx);
  taps.add(at(x0), cubic_near(t), cubic_near_slope(t) * dx);
  taps.add(at(x0 + 1), cubic_near(1 - t), -cubic_near_slope(1 - t) * dx);
  taps.add(at(x0 + 2), cubic_far(2 - t), -cubic_far_slope(2 - t) * dx);
  return taps;
}

// Sizes of one call: x [n, c, h, w], grid [n, points..., 2] with `points` output positions.
struct Geometry {
  int64_t n, c, h, w, points;
};

Geometry geometry_of(const CallContext& c, const Tensor& x, const Tensor& grid) {
  const Shape &xs = x.shape(), &gs = grid.shape();
  if (xs.size() != 4) c.fail("x must be [N, C, H, W], got ", xs);
  if (gs.size() != 4 || gs[0] != xs[0] || gs[3] != 2)
    c.fail("grid must be [N, H_out, W_out, 2] with the N of x ", xs, ", got ", gs);
  return {xs[0], xs[1], xs[2], xs[3], gs[1] * gs[2]};
}

void check_float_inputs(const CallContext& c) {
  require_float(c, 0);
  require_same_dtype(c);
}

struct PointTaps {
  AxisTaps y, x;
};
template <class T>
PointTaps taps_at(const T* point, const Geometry& g, const Sampling& s) {
  return {axis_taps(double(point[1]), g.h, s), axis_taps(double(point[0]), g.w, s)};
}

// The sample of one plane at the taps.
template <class T>
double sample(const T* plane, const PointTaps& t, int64_t w) {
  double acc = 0;
  for (int i = 0; i < t.y.count; ++i) {
    if (t.y.index[i] < 0) continue;
    const T* row = plane + t.y.index[i] * w;
    double across = 0;
    for (int j = 0; j < t.x.count; ++j)
      if (t.x.index[j] >= 0) across += t.x.weight[j] * double(row[t.x.index[j]]);
    acc += t.y.weight[i] * across;
  }
  return acc;
}

// Runs body(item, n, p, taps) for every output point (item = n * points + p), the points
// split over threads.
template <class T, class Body>
void for_each_point(const Geometry& g, const Sampling& s, const T* grid, Body body) {
  kernels::parallel_range(
      g.n * g.points,
      [&](int64_t begin, int64_t end) {
        for (int64_t item = begin; item < end; ++item)
          body(item, item / g.points, item % g.points, taps_at(grid + item * 2, g, s));
      },
      kernels::grain_for(g.c * 16));
}

// f(offset in the plane, i, j) for each pair of taps (y tap i, x tap j) inside the image.
template <class F>
void for_each_tap(const PointTaps& t, int64_t w, F f) {
  for (int i = 0; i < t.y.count; ++i)
    for (int j = 0; j < t.x.count; ++j)
      if (t.y.index[i] >= 0 && t.x.index[j] >= 0) f(t.y.index[i] * w + t.x.index[j], i, j);
}

template <class T>
void sample_all(const Geometry& g, const Sampling& s, const T* x, const T* grid, T* out) {
  const int64_t plane = g.h * g.w;
  for_each_point(g, s, grid, [&](int64_t, int64_t n, int64_t p, const PointTaps& taps) {
    for (int64_t ch = 0; ch < g.c; ++ch)
      out[(n * g.c + ch) * g.points + p] = T(sample(x + (n * g.c + ch) * plane, taps, g.w));
  });
}

// grad_x: each item scatters into its own block of planes (n, channels [c0, c0 + kBlock)).
template <class T>
void backward_x(const Geometry& g, const Sampling& s, const T* grid, const T* gy, T* gx) {
  constexpr int64_t kBlock = 16;
  const int64_t blocks = (g.c + kBlock - 1) / kBlock, plane = g.h * g.w;
  std::fill(gx, gx + g.n * g.c * plane, T(0));
  kernels::parallel_range(
      g.n * blocks,
      [&](int64_t begin, int64_t end) {
        for (int64_t item = begin; item < end; ++item) {
          const int64_t n = item / blocks, c0 = (item % blocks) * kBlock, c1 = std::min(g.c, c0 + kBlock);
          for (int64_t p = 0; p < g.points; ++p) {
            const PointTaps t = taps_at(grid + (n * g.points + p) * 2, g, s);
            for_each_tap(t, g.w, [&](int64_t at, int i, int j) {
              const double w = t.y.weight[i] * t.x.weight[j];
              for (int64_t ch = c0; ch < c1; ++ch)
                gx[(n * g.c + ch) * plane + at] += T(w * double(gy[(n * g.c + ch) * g.points + p]));
            });
          }
        }
      },
      kernels::grain_for(g.points * kBlock * 16));
}

// grad_grid: per point, the sum over channels of gy times the sample's slope in gx and gy.
template <class T>
void backward_grid(const Geometry& g, const Sampling& s, const T* x, const T* grid, const T* gy, T* ggrid) {
  const int64_t plane = g.h * g.w;
  for_each_point(g, s, grid, [&](int64_t item, int64_t n, int64_t p, const PointTaps& t) {
    double along_x = 0, along_y = 0;
    for (int64_t ch = 0; ch < g.c; ++ch) {
      const T* img = x + (n * g.c + ch) * plane;
      const double up = double(gy[(n * g.c + ch) * g.points + p]);
      for_each_tap(t, g.w, [&](int64_t at, int i, int j) {
        const double v = up * double(img[at]);
        along_x += v * t.y.weight[i] * t.x.slope[j];
        along_y += v * t.y.slope[i] * t.x.weight[j];
      });
    }
    ggrid[item * 2] = T(along_x), ggrid[item * 2 + 1] = T(along_y);
  });
}

TensorMeta infer(const InferContext& c) {
  check_float_inputs(c);
  sampling_of(c);
  const Geometry g = geometry_of(c, c.input(0), c.input(1));
  return {c.input(0).dtype(), Shape{g.n, g.c, c.input(1).shape()[1], c.input(1).shape()[2]}};
}

void kernel(const KernelContext& c) {
  const Tensor x = kernels::dense(c.input(0)), grid = kernels::dense(c.input(1));
  const Geometry g = geometry_of(c, x, grid);
  const Sampling& s = c.params<Sampling>();
  kernels::visit_float(x.dtype(), "grid_sample", [&](auto tag) {
    using T = typename decltype(tag)::type;
    sample_all<T>(g, s, x.data<T>(), grid.data<T>(), c.output().data<T>());
  });
}

// Inputs (grad_output, x, grid); outputs (grad_x, grad_grid).
std::vector<TensorMeta> infer_backward(const InferContext& c) {
  check_float_inputs(c);
  sampling_of(c);
  const Geometry g = geometry_of(c, c.input(1), c.input(2));
  const Shape& gs = c.input(2).shape();
  if (!(c.input(0).shape() == Shape{g.n, g.c, gs[1], gs[2]}))
    c.fail("the output gradient must be [", g.n, ", ", g.c, ", ", gs[1], ", ", gs[2], "]");
  return {{c.input(1).dtype(), c.input(1).shape()}, {c.input(2).dtype(), gs}};
}

void kernel_backward(const KernelContext& c) {
  const Tensor gy = kernels::dense(c.input(0)), x = kernels::dense(c.input(1)), grid = kernels::dense(c.input(2));
  const Geometry g = geometry_of(c, x, grid);
  const Sampling& s = c.params<Sampling>();
  kernels::visit_float(x.dtype(), "grid_sample_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    backward_x<T>(g, s, grid.data<T>(), gy.data<T>(), c.output(0).data<T>());
    backward_grid<T>(g, s, x.data<T>(), grid.data<T>(), gy.data<T>(), c.output(1).data<T>());
  });
}

Cost sampling_cost(const CallContext& c, std::span<const TensorMeta> out) {
  const double n = double(out[0].shape.numel()) + double(c.input(0).numel());
  return {8 * n, n * double(dtype_size(out[0].dtype))};
}

}  // namespace

BATON_OP(grid_sample_op, "grid_sample")
    .inputs(2)
    .string_attr("mode")
    .string_attr("padding_mode")
    .int_attr("align_corners")
    .infer(infer)
    .params(sampling_of)
    .cpu(kernel)
    .grad([](const GradContext& c) {
      Tensor in[3] = {c.grad_output(), c.input(0), c.input(1)};
      std::vector<Tensor> g = call_many(*find_op("grid_sample_backward"), in, c.attrs, c.loc);
      return Grads{g[0], g[1]};
    })
    .cost(sampling_cost)
    .onnx("GridSample");

BATON_OP(grid_sample_backward_op, "grid_sample_backward")
    .inputs(3)
    .outputs(2)
    .string_attr("mode")
    .string_attr("padding_mode")
    .int_attr("align_corners")
    .infer(infer_backward)
    .params(sampling_of)
    .cpu(kernel_backward)
    .cost(sampling_cost);

}  // namespace baton::ops

namespace baton {

Tensor grid_sample(const Tensor& x, const Tensor& grid, const GridSampleOptions& o, SourceLoc loc) {
  return ops::call(ops::grid_sample_op, {x, grid},
                   {{"mode", o.mode}, {"padding_mode", o.padding_mode}, {"align_corners", int64_t(o.align_corners)}},
                   loc);
}

}  // namespace baton
