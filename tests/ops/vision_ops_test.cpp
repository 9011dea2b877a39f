// Vision ops: grid_sample, roi_align and max_unpool (values against references written
// here from the definitions, gradients by the harness) and non_max_suppression (hand-worked
// selections), with their errors.
#include <cmath>
#include <limits>
#include <optional>

#include "harness/op_harness.h"

namespace baton::testing {
namespace {

// ---- grid_sample ---------------------------------------------------------------------

// Mirror v into [lo, hi] by folding the line with period 2 (hi - lo).
double fold(double v, double lo, double hi) {
  const double range = hi - lo;
  if (range <= 0) return lo;
  double t = std::fmod(v - lo, 2 * range);
  if (t < 0) t += 2 * range;
  return lo + (t > range ? 2 * range - t : t);
}

// Keys' cubic kernel (a = -0.75) at distance s.
double keys(double s) {
  const double a = -0.75, d = std::abs(s);
  if (d <= 1) return (a + 2) * d * d * d - (a + 3) * d * d + 1;
  if (d < 2) return a * d * d * d - 5 * a * d * d + 8 * a * d - 4 * a;
  return 0;
}

struct GridRef {
  GridSampleOptions o;
  int64_t h, w;
  std::vector<double> img;  // one plane

  double lo(int64_t) const { return o.align_corners ? 0 : -0.5; }
  double hi(int64_t size) const { return o.align_corners ? double(size - 1) : double(size) - 0.5; }
  // The coordinate along an axis of `size` pixels, padding applied to the point.
  double coordinate(double g, int64_t size) const {
    double v = o.align_corners ? (g + 1) / 2 * double(size - 1) : ((g + 1) * double(size) - 1) / 2;
    if (o.mode == "nearest") v = std::nearbyint(v);
    if (v >= lo(size) && v <= hi(size)) return v;
    if (o.padding_mode == "border") return std::clamp(v, 0.0, double(size - 1));
    if (o.padding_mode == "reflection") return fold(v, lo(size), hi(size));
    return v;
  }
  // A pixel index after padding, or -1 for zero.
  int64_t index(int64_t i, int64_t size) const {
    if (i >= 0 && i < size) return i;
    if (o.padding_mode == "border") return std::clamp<int64_t>(i, 0, size - 1);
    if (o.padding_mode == "reflection") return int64_t(fold(double(i), lo(size), hi(size)));
    return -1;
  }
  double pixel(int64_t y, int64_t x) const {
    const int64_t yi = index(y, h), xi = index(x, w);
    return yi < 0 || xi < 0 ? 0.0 : img[size_t(yi * w + xi)];
  }
  double at(double gx, double gy) const {
    const double x = coordinate(gx, w), y = coordinate(gy, h);
    if (o.mode == "nearest") return pixel(int64_t(y), int64_t(x));
    const auto y0 = int64_t(std::floor(y)), x0 = int64_t(std::floor(x));
    double sum = 0;
    const int64_t reach = o.mode == "bicubic" ? 2 : 1;
    for (int64_t i = y0 - reach + 1; i <= y0 + reach; ++i)
      for (int64_t j = x0 - reach + 1; j <= x0 + reach; ++j) {
        const double wy = o.mode == "bicubic" ? keys(y - double(i)) : 1 - std::abs(y - double(i));
        const double wx = o.mode == "bicubic" ? keys(x - double(j)) : 1 - std::abs(x - double(j));
        sum += wy * wx * pixel(i, j);
      }
    return sum;
  }
};

Tensor grid_sample_reference(const Tensor& x_in, const Tensor& grid_in, const GridSampleOptions& o) {
  const Tensor x = x_in.contiguous(), grid = grid_in.contiguous();
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3), oh = grid.size(1), ow = grid.size(2);
  const std::vector<double> xv = x.to_vector<double>(), gv = grid.to_vector<double>();
  std::vector<double> out;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch) {
      GridRef r{o, h, w, {xv.begin() + (b * c + ch) * h * w, xv.begin() + (b * c + ch + 1) * h * w}};
      for (int64_t p = 0; p < oh * ow; ++p) {
        const size_t at = size_t((b * oh * ow + p) * 2);
        out.push_back(r.at(gv[at], gv[at + 1]));
      }
    }
  return tensor(out, Shape{n, c, oh, ow});
}

OpCase grid_case(const std::string& what, GridSampleOptions o, Shape x_shape, Shape grid_shape, double spread = 1.2) {
  OpCase c;
  c.name = "vision.grid_sample/" + what;
  c.make_inputs = [=] { return Inputs{uniform(x_shape, -1, 1, 3), uniform(grid_shape, -spread, spread, 4)}; };
  c.fn = [=](const Inputs& in) { return grid_sample(in[0], in[1], o); };
  c.reference = [=](const Inputs& in) { return grid_sample_reference(in[0], in[1], o); };
  c.covers = {"grid_sample_backward"};
  if (o.mode == "nearest") c.grad_inputs = {0};  // the grid's gradient is zero almost everywhere
  return c;
}

BATON_OP_CASES {
  auto opts = [](std::string mode, std::string padding, bool align) {
    return GridSampleOptions{std::move(mode), std::move(padding), align};
  };
  return {
      grid_case("bilinear_zeros", opts("bilinear", "zeros", false), {2, 3, 4, 5}, {2, 3, 4, 2}),
      grid_case("bilinear_zeros_aligned", opts("bilinear", "zeros", true), {1, 2, 5, 4}, {1, 3, 3, 2}),
      grid_case("bilinear_border", opts("bilinear", "border", false), {1, 2, 4, 4}, {1, 4, 3, 2}, 1.6),
      grid_case("bilinear_reflection", opts("bilinear", "reflection", false), {1, 2, 4, 5}, {1, 4, 3, 2}, 2.5),
      grid_case("bilinear_reflection_aligned", opts("bilinear", "reflection", true), {1, 1, 3, 4}, {1, 5, 2, 2}, 3),
      grid_case("nearest_zeros", opts("nearest", "zeros", false), {1, 2, 4, 5}, {1, 3, 4, 2}),
      grid_case("nearest_border_aligned", opts("nearest", "border", true), {1, 2, 4, 5}, {1, 3, 4, 2}, 1.5),
      grid_case("bicubic_zeros", opts("bicubic", "zeros", false), {1, 2, 5, 4}, {1, 3, 4, 2}),
      grid_case("bicubic_border", opts("bicubic", "border", false), {1, 1, 4, 5}, {1, 3, 4, 2}, 1.5),
      grid_case("bicubic_reflection_aligned", opts("bicubic", "reflection", true), {1, 1, 5, 4}, {1, 3, 4, 2}, 2),
  };
}

TEST(GridSample, CornersAndCentres) {
  const Tensor x = tensor<double>({{{{1, 2}, {3, 4}}}});
  // align_corners: -1 and 1 are the centres of the corner pixels; 0 is between all four.
  const Tensor grid = tensor<double>({{{{-1, -1}, {1, -1}, {-1, 1}, {1, 1}, {0, 0}}}});
  EXPECT_EQ(grid_sample(x, grid, {"bilinear", "zeros", true}).to_vector<double>(),
            (std::vector<double>{1, 2, 3, 4, 2.5}));
  // Without it, -1 is the outer edge: half of the corner pixel, half zero padding, twice.
  EXPECT_EQ(grid_sample(x, grid, {"bilinear", "zeros", false}).to_vector<double>(),
            (std::vector<double>{0.25, 0.5, 0.75, 1, 2.5}));
  EXPECT_EQ(grid_sample(x, grid, {"bilinear", "border", false}).to_vector<double>(),
            (std::vector<double>{1, 2, 3, 4, 2.5}));
}

TEST(GridSample, NonFiniteAndFarPointsAreSafe) {
  const Tensor x = uniform({1, 1, 3, 3});
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  const Tensor grid = tensor<double>({{{{nan, 0}, {inf, 0}, {1e300, -1e300}, {0, -inf}}}});
  for (const char* padding : {"zeros", "border", "reflection"})
    for (const char* mode : {"bilinear", "nearest", "bicubic"}) {
      const std::vector<double> y = grid_sample(x, grid, {mode, padding, false}).to_vector<double>();
      for (double v : y) EXPECT_TRUE(std::isfinite(v)) << mode << " " << padding;
      EXPECT_EQ(y[0], 0.0);  // NaN samples nothing
    }
}

TEST(GridSample, Errors) {
  const Tensor x = uniform({1, 2, 3, 3}), grid = uniform({1, 2, 2, 2});
  EXPECT_THROWS_WITH(ShapeError, grid_sample(uniform({2, 3, 3}), grid), "[grid_sample]", "[N, C, H, W]");
  EXPECT_THROWS_WITH(ShapeError, grid_sample(x, uniform({2, 2, 2, 2})), "[grid_sample]", "grid must be");
  EXPECT_THROWS_WITH(ShapeError, grid_sample(x, uniform({1, 2, 2, 3})), "[grid_sample]", "[1,2,2,3]");
  EXPECT_THROWS_WITH(ValueError, grid_sample(x, grid, {"trilinear"}), "[grid_sample]", "trilinear");
  EXPECT_THROWS_WITH(ValueError, grid_sample(x, grid, {"bilinear", "wrap"}), "padding_mode", "wrap");
  EXPECT_THROWS_WITH(DTypeError, grid_sample(x, grid.to(f32)), "[grid_sample]");
}

// ---- roi_align -----------------------------------------------------------------------

// Bilinear value of the plane at (y, x) as RoiAlign defines it, and the four weighted
// corners (for max).
std::vector<double> roi_corners(const std::vector<double>& plane, int64_t h, int64_t w, double y, double x) {
  if (y < -1 || y > double(h) || x < -1 || x > double(w)) return {0, 0, 0, 0};
  y = std::min(std::max(y, 0.0), double(h - 1));
  x = std::min(std::max(x, 0.0), double(w - 1));
  const auto y0 = int64_t(y), x0 = int64_t(x);
  const int64_t y1 = std::min(y0 + 1, h - 1), x1 = std::min(x0 + 1, w - 1);
  const double ly = y - double(y0), lx = x - double(x0);
  auto p = [&](int64_t i, int64_t j) { return plane[size_t(i * w + j)]; };
  return {(1 - ly) * (1 - lx) * p(y0, x0), (1 - ly) * lx * p(y0, x1), ly * (1 - lx) * p(y1, x0), ly * lx * p(y1, x1)};
}

Tensor roi_align_reference(const Tensor& x_in, const Tensor& rois_in, const Tensor& batch, const RoiAlignOptions& o) {
  const Tensor x = x_in.contiguous();
  const int64_t c = x.size(1), h = x.size(2), w = x.size(3);
  const std::vector<double> xv = x.to_vector<double>(), rv = rois_in.contiguous().to_vector<double>();
  const std::vector<int64_t> bv = batch.to_vector<int64_t>();
  std::vector<double> out;
  for (size_t r = 0; r < bv.size(); ++r)
    for (int64_t ch = 0; ch < c; ++ch) {
      const std::vector<double> plane(xv.begin() + (bv[r] * c + ch) * h * w, xv.begin() + (bv[r] * c + ch + 1) * h * w);
      const double shift = o.half_pixel ? 0.5 : 0;
      const double x1 = rv[4 * r] * o.spatial_scale - shift, y1 = rv[4 * r + 1] * o.spatial_scale - shift;
      double rw = rv[4 * r + 2] * o.spatial_scale - shift - x1, rh = rv[4 * r + 3] * o.spatial_scale - shift - y1;
      if (!o.half_pixel) rw = std::max(rw, 1.0), rh = std::max(rh, 1.0);
      const double bh = rh / double(o.output_height), bw = rw / double(o.output_width);
      const int64_t gh = o.sampling_ratio > 0 ? o.sampling_ratio : int64_t(std::ceil(bh));
      const int64_t gw = o.sampling_ratio > 0 ? o.sampling_ratio : int64_t(std::ceil(bw));
      for (int64_t i = 0; i < o.output_height; ++i)
        for (int64_t j = 0; j < o.output_width; ++j) {
          double sum = 0, best = -1e300;
          for (int64_t a = 0; a < gh; ++a)
            for (int64_t b = 0; b < gw; ++b) {
              const double y = y1 + bh * (double(i) + (double(a) + 0.5) / double(gh));
              const double xx = x1 + bw * (double(j) + (double(b) + 0.5) / double(gw));
              for (double v : roi_corners(plane, h, w, y, xx)) sum += v, best = std::max(best, v);
            }
          out.push_back(o.max ? best : sum / double(std::max<int64_t>(gh * gw, 1)));
        }
    }
  return tensor(out, Shape{int64_t(bv.size()), c, o.output_height, o.output_width});
}

OpCase roi_case(const std::string& what, RoiAlignOptions o) {
  OpCase c;
  c.name = "vision.roi_align/" + what;
  c.make_inputs = [] {
    // Rois inside, across the edge, beyond it, and reversed (zero size with half_pixel).
    return Inputs{uniform({2, 3, 6, 7}, -1, 1, 5),
                  tensor<double>({{0.5, 1, 4.5, 5}, {-2, 2, 9, 4}, {3, -1.5, 6, 7.5}, {4, 3, 2, 1}, {1, 1, 2.2, 1.7}}),
                  tensor<int64_t>({0, 1, 1, 0, 1})};
  };
  c.fn = [=](const Inputs& in) { return roi_align(in[0], in[1], in[2], o); };
  c.reference = [=](const Inputs& in) { return roi_align_reference(in[0], in[1], in[2], o); };
  c.grad_inputs = {0};
  c.covers = {"roi_align_backward"};
  return c;
}

BATON_OP_CASES {
  return {
      roi_case("avg_half_pixel", {3, 2, 2, 1.0, true, false}),
      roi_case("avg_adaptive_grid", {2, 3, 0, 0.8, true, false}),
      roi_case("avg_output_half_pixel", {2, 2, 0, 1.0, false, false}),
      roi_case("max", {3, 3, 2, 1.0, true, true}),
  };
}

TEST(RoiAlign, OneSampleIsBilinear) {
  // A 1x1 output with one sample: the interpolation at the roi's centre.
  const Tensor x = tensor<double>({{{{0, 1, 2}, {3, 4, 5}, {6, 7, 8}}}});
  const Tensor y = roi_align(x, tensor<double>({{0, 0, 2, 1}}), tensor<int64_t>({0}), {1, 1, 1, 1.0, false, false});
  EXPECT_DOUBLE_EQ(y.item<double>(), 0.5 * 3 + 1);  // at (y, x) = (0.5, 1)
}

TEST(RoiAlign, Errors) {
  const Tensor x = uniform({2, 1, 4, 4}), rois = tensor<double>({{0, 0, 2, 2}});
  EXPECT_THROWS_WITH(IndexError, roi_align(x, rois, tensor<int64_t>({2})), "[roi_align]", "batch index 2");
  EXPECT_THROWS_WITH(ShapeError, roi_align(x, uniform({1, 5}), tensor<int64_t>({0})), "[roi_align]", "[R, 4]");
  EXPECT_THROWS_WITH(ShapeError, roi_align(x, rois, tensor<int64_t>({0, 1})), "batch_indices");
  EXPECT_THROWS_WITH(ValueError, roi_align(x, rois, tensor<int64_t>({0}), {0, 1}), "output size");
  EXPECT_THROWS_WITH(ValueError, roi_align(x, tensor<double>({{0, 0, 1e12, 1e12}}), tensor<int64_t>({0})),
                     "[roi_align]", "samples per bin");
  EXPECT_THROWS_WITH(ValueError, roi_align(x, tensor<double>({{0, std::nan(""), 1, 1}}), tensor<int64_t>({0})),
                     "not finite");
}

// ---- max_unpool ----------------------------------------------------------------------

OpCase unpool_case(const std::string& what, Shape x_shape, Shape out_shape, std::vector<int64_t> picks) {
  OpCase c;
  c.name = "vision.max_unpool/" + what;
  c.make_inputs = [=] { return Inputs{uniform(x_shape, -1, 1, 9), tensor(picks, x_shape)}; };
  c.fn = [=](const Inputs& in) { return max_unpool(in[0], in[1], out_shape); };
  c.reference = [=](const Inputs& in) {
    std::vector<double> out(size_t(out_shape.numel()), 0.0);
    const std::vector<double> v = in[0].to_vector<double>();
    for (size_t i = 0; i < picks.size(); ++i) out[size_t(picks[i])] = v[i];
    return tensor(out, out_shape);
  };
  c.grad_inputs = {0};
  return c;
}

BATON_OP_CASES {
  return {
      unpool_case("2d", {1, 2, 2, 2}, {1, 2, 4, 4}, {5, 7, 13, 15, 16, 19, 28, 30}),
      unpool_case("1d", {2, 1, 3}, {2, 1, 6}, {1, 2, 5, 6, 9, 11}),
  };
}

TEST(MaxUnpool, IntegersAndErrors) {
  EXPECT_EQ(max_unpool(tensor<int32_t>({7, 8}), tensor<int64_t>({3, 0}), {4}).to_vector<int32_t>(),
            (std::vector<int32_t>{8, 0, 0, 7}));
  EXPECT_THROWS_WITH(IndexError, max_unpool(tensor<double>({1, 2}), tensor<int64_t>({0, 4}), {4}),
                     "[max_unpool]", "index 4");
  EXPECT_THROWS_WITH(IndexError, max_unpool(tensor<double>({1, 2}), tensor<int64_t>({-1, 0}), {4}), "index -1");
  EXPECT_THROWS_WITH(ShapeError, max_unpool(tensor<double>({1, 2}), tensor<int64_t>({0}), {4}), "[max_unpool]");
  EXPECT_THROWS_WITH(DTypeError, max_unpool(tensor<double>({1, 2}), tensor<int32_t>({0, 1}), {4}), "i64");
}

TEST(MaxUnpool, InvertsMaxPoolWithIndices) {
  const Tensor x = uniform({2, 3, 4, 6}, -1, 1, 12);
  const auto [values, in_plane] = max_pool2d_with_indices(x, {{2, 2}, {2, 2}, {0, 0}});
  // Flat indices over the whole tensor: the plane's offset plus the position within it.
  const Tensor flat = in_plane + reshape(arange(6) * 24, Shape{2, 3, 1, 1});
  const Tensor y = max_unpool(values, flat, x.shape());
  // Every kept value sits where it came from, every other element is zero.
  const std::vector<double> xv = x.to_vector<double>(), yv = y.to_vector<double>();
  int kept = 0;
  for (size_t i = 0; i < xv.size(); ++i) {
    if (yv[i] == 0) continue;
    EXPECT_EQ(yv[i], xv[i]);
    ++kept;
  }
  EXPECT_EQ(kept, 2 * 3 * 2 * 3);
}

// ---- non_max_suppression -------------------------------------------------------------

// Six unit boxes (y1, x1, y2, x2): two clusters of overlapping ones and one alone.
const Tensor kBoxes = tensor<float>({{{0, 0, 1, 1},
                                      {0, 0.1f, 1, 1.1f},
                                      {0, -0.1f, 1, 0.9f},
                                      {0, 10, 1, 11},
                                      {0, 10.1f, 1, 11.1f},
                                      {0, 100, 1, 101}}});
const Tensor kScores = tensor<float>({{{0.9f, 0.75f, 0.6f, 0.95f, 0.5f, 0.3f}}});

std::vector<int64_t> nms(const Tensor& boxes, const Tensor& scores, NmsOptions o) {
  const Tensor y = non_max_suppression(boxes, scores, o);
  EXPECT_EQ(y.dtype(), i64);
  EXPECT_EQ(y.dim(), 2);
  EXPECT_EQ(y.size(1), 3);
  return y.to_vector<int64_t>();
}

TEST(NonMaxSuppression, KeepsTheBestOfEachCluster) {
  NmsOptions o{.max_boxes_per_class = 3, .iou_threshold = 0.5};
  EXPECT_EQ(nms(kBoxes, kScores, o), (std::vector<int64_t>{0, 0, 3, 0, 0, 0, 0, 0, 5}));
  o.max_boxes_per_class = 2;  // the limit
  EXPECT_EQ(nms(kBoxes, kScores, o), (std::vector<int64_t>{0, 0, 3, 0, 0, 0}));
  o.max_boxes_per_class = 0;  // none
  EXPECT_EQ(nms(kBoxes, kScores, o).size(), 0u);
  o = {.max_boxes_per_class = 3, .iou_threshold = 0.5, .has_score_threshold = true, .score_threshold = 0.4};
  EXPECT_EQ(nms(kBoxes, kScores, o), (std::vector<int64_t>{0, 0, 3, 0, 0, 0}));
  // IoU of boxes 0 and 1 (and 0 and 2, 3 and 4) is 0.9 / 1.1, of 1 and 2 0.8 / 1.2: a
  // higher threshold keeps them all.
  o = {.max_boxes_per_class = 10, .iou_threshold = 0.85};
  EXPECT_EQ(nms(kBoxes, kScores, o), (std::vector<int64_t>{0, 0, 3, 0, 0, 0, 0, 0, 1, 0, 0, 2, 0, 0, 4, 0, 0, 5}));
}

TEST(NonMaxSuppression, CentreFormatAndFlippedCornersAgree) {
  std::vector<float> centre, flipped;
  for (float v : kBoxes.to_vector<float>()) flipped.push_back(v);
  for (size_t i = 0; i < flipped.size(); i += 4) {
    const float y1 = flipped[i], x1 = flipped[i + 1], y2 = flipped[i + 2], x2 = flipped[i + 3];
    centre.insert(centre.end(), {(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1});
    std::swap(flipped[i], flipped[i + 2]);  // y2 before y1
  }
  const NmsOptions o{.max_boxes_per_class = 3, .iou_threshold = 0.5};
  const std::vector<int64_t> expected{0, 0, 3, 0, 0, 0, 0, 0, 5};
  EXPECT_EQ(nms(tensor(flipped, Shape{1, 6, 4}), kScores, o), expected);
  NmsOptions c = o;
  c.center_point_box = true;
  EXPECT_EQ(nms(tensor(centre, Shape{1, 6, 4}), kScores, c), expected);
}

TEST(NonMaxSuppression, BatchesAndClassesInOrder) {
  const Tensor boxes = cat({kBoxes, kBoxes}, 0).to(f64);
  const Tensor scores = cat({cat({kScores, kScores * -1.0 + 1.0}, 1), cat({kScores, kScores}, 1)}, 0).to(f64);
  const NmsOptions o{.max_boxes_per_class = 2, .iou_threshold = 0.5};
  EXPECT_EQ(nms(boxes, scores, o),
            (std::vector<int64_t>{0, 0, 3, 0, 0, 0, 0, 1, 5, 0, 1, 4, 1, 0, 3, 1, 0, 0, 1, 1, 3, 1, 1, 0}));
}

TEST(NonMaxSuppression, TiesDegenerateBoxesAndNaN) {
  // Identical boxes and scores: the lowest index wins and suppresses the rest.
  const Tensor same = tensor<double>({{{0, 0, 1, 1}, {0, 0, 1, 1}, {0, 0, 1, 1}}});
  EXPECT_EQ(nms(same, tensor<double>({{{0.5, 0.5, 0.5}}}), {.max_boxes_per_class = 5}),
            (std::vector<int64_t>{0, 0, 0}));
  // Boxes of zero area never suppress; a NaN score is never selected.
  const Tensor flat = tensor<double>({{{0, 0, 0, 1}, {0, 0, 0, 1}, {0, 0, 1, 1}}});
  EXPECT_EQ(nms(flat, tensor<double>({{{0.9, 0.8, std::nan("")}}}), {.max_boxes_per_class = 5}),
            (std::vector<int64_t>{0, 0, 0, 0, 0, 1}));
}

// The limits in tensors select as the same limits in options do; in a graph they are
// inputs, so one session serves any limits.
TEST(NonMaxSuppression, LimitsInTensors) {
  auto limits = [](int64_t max_boxes, float iou, std::optional<float> score) {
    return NmsLimits{scalar_tensor<int64_t>(max_boxes), scalar_tensor<float>(iou),
                     score ? scalar_tensor<float>(*score) : Tensor()};
  };
  const std::vector<std::pair<NmsLimits, NmsOptions>> cases{
      {limits(3, 0.5f, std::nullopt), {.max_boxes_per_class = 3, .iou_threshold = 0.5}},
      {limits(2, 0.5f, 0.4f), {.max_boxes_per_class = 2, .iou_threshold = 0.5, .has_score_threshold = true, .score_threshold = 0.4}},
      {limits(10, 0.85f, std::nullopt), {.max_boxes_per_class = 10, .iou_threshold = 0.85}},
      {limits(-1, 0.5f, std::nullopt), {.max_boxes_per_class = 0, .iou_threshold = 0.5}},
      {limits(std::numeric_limits<int64_t>::max(), 0.85f, std::nullopt), {.max_boxes_per_class = 10, .iou_threshold = 0.85}}};
  Graph g("nms_limits");
  const Tensor boxes = g.placeholder(f32, {1, 6, 4}, "boxes"), scores = g.placeholder(f32, {1, 1, 6}, "scores");
  const Tensor max_boxes = g.placeholder(i64, {}, "max_boxes"), iou = g.placeholder(f32, {}, "iou");
  const Tensor selected = non_max_suppression(boxes, scores, NmsLimits{max_boxes, iou, Tensor()});
  Session sess(g);
  for (const auto& [l, o] : cases) {
    EXPECT_EQ(non_max_suppression(kBoxes, kScores, l).to_vector<int64_t>(), nms(kBoxes, kScores, o));
    if (l.score_threshold.defined()) continue;
    const Tensor got = sess.run({selected}, {{boxes, kBoxes}, {scores, kScores}, {max_boxes, l.max_boxes_per_class},
                                             {iou, l.iou_threshold}})[0];
    EXPECT_EQ(got.to_vector<int64_t>(), nms(kBoxes, kScores, o));
  }
  EXPECT_THROWS_WITH(DTypeError, non_max_suppression(kBoxes, kScores, NmsLimits{scalar_tensor<float>(2), scalar_tensor<float>(0.5f)}),
                     "[non_max_suppression]", "max_boxes_per_class must hold one integer");
  EXPECT_THROWS_WITH(DTypeError, non_max_suppression(kBoxes, kScores, NmsLimits{scalar_tensor<int64_t>(2), zeros({2})}),
                     "iou_threshold must hold one float");
}

TEST(NonMaxSuppression, Errors) {
  EXPECT_THROWS_WITH(ShapeError, non_max_suppression(uniform({1, 6, 3}), kScores), "[non_max_suppression]",
                     "boxes must be");
  EXPECT_THROWS_WITH(ShapeError, non_max_suppression(kBoxes, uniform({1, 1, 5})), "[non_max_suppression]",
                     "scores must be");
  EXPECT_THROWS_WITH(DTypeError, non_max_suppression(kBoxes.to(i32), kScores), "floating-point");
  Graph g("nms");
  const Tensor boxes = g.placeholder(f32, {1, "n", 4}, "boxes");
  EXPECT_THROWS_WITH(ShapeError, non_max_suppression(boxes, kScores), "[non_max_suppression]", "scores must be");
}

// In a graph the count of selected boxes is a symbol bound when the run selects them
// (runtime/plan.h, "Stages"): the boxes picked after it are sized per run.
TEST(NonMaxSuppression, InAGraphTheCountIsBoundByTheRun) {
  Graph g("nms");
  const Tensor boxes = g.placeholder(f32, {1, "n", 4}, "boxes"), scores = g.placeholder(f32, {1, 1, "n"}, "scores");
  const NmsOptions o{.max_boxes_per_class = 3, .iou_threshold = 0.5};
  const Tensor selected = non_max_suppression(boxes, scores, o);
  EXPECT_TRUE(sym::is_symbol(selected.shape()[0]));
  const Tensor picked = index_select(squeeze(boxes, 0), 0, squeeze(slice(selected, 1, 2, 3), 1));
  Session session(g);
  for (int64_t n : {6, 4, 3}) {
    const Tensor b = slice(kBoxes, 1, 0, n), s = slice(kScores, 2, 0, n);
    const Tensor want = non_max_suppression(b, s, o);
    const std::vector<Tensor> got = session.run({selected, picked}, {{boxes, b}, {scores, s}});
    EXPECT_EQ(got[0].to_vector<int64_t>(), want.to_vector<int64_t>()) << n << " boxes";
    EXPECT_ALL_CLOSE(got[1], index_select(squeeze(b, 0), 0, squeeze(slice(want, 1, 2, 3), 1)), 0, 0);
  }
}

OpCase nms_case(const std::string& what, NmsOptions o, std::vector<int64_t> expected) {
  OpCase c;
  c.name = str("vision.non_max_suppression/", what);
  c.make_inputs = [] { return Inputs{kBoxes.to(f64), kScores.to(f64)}; };
  c.fn = [o](const Inputs& in) { return non_max_suppression(in[0], in[1], o); };
  c.reference = [expected](const Inputs&) { return tensor(expected, Shape{int64_t(expected.size() / 3), 3}); };
  c.check_grad = false;  // box indices
  c.atol = c.rtol = 0;
  return c;
}

BATON_OP_CASES {
  return {nms_case("clusters", {.max_boxes_per_class = 3, .iou_threshold = 0.5}, {0, 0, 3, 0, 0, 0, 0, 0, 5}),
          nms_case("score_threshold",
                   {.max_boxes_per_class = 3, .iou_threshold = 0.5, .has_score_threshold = true,
                    .score_threshold = 0.4},
                   {0, 0, 3, 0, 0, 0}),
          nms_case("none", {.max_boxes_per_class = 0, .iou_threshold = 0.5}, {})};
}

}  // namespace
}  // namespace baton::testing
