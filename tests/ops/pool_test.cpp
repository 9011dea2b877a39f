// max_pool2d, avg_pool2d, adaptive_avg_pool2d and their backward ops.
#include <cmath>
#include <limits>

#include "harness/op_harness.h"

namespace baton::testing {
namespace {

// Reference pooling over windows [lo, hi) of each output position, computed on a padded
// copy: reduce(values, padded window size).
using Reduce = std::function<double(const std::vector<double>&, int64_t)>;
using WindowFn = std::function<std::pair<int64_t, int64_t>(int64_t o, int64_t size, int64_t out)>;

Tensor ref_pool(const Tensor& x, int64_t oh, int64_t ow, WindowFn wy, WindowFn wx, Reduce r) {
  const int64_t P = x.size(0) * x.size(1), H = x.size(2), W = x.size(3);
  auto xv = x.contiguous().to_vector<double>();
  std::vector<double> out;
  for (int64_t p = 0; p < P; ++p)
    for (int64_t y = 0; y < oh; ++y)
      for (int64_t xo = 0; xo < ow; ++xo) {
        auto [y0, y1] = wy(y, H, oh);
        auto [x0, x1] = wx(xo, W, ow);
        std::vector<double> vals;
        for (int64_t iy = y0; iy < y1; ++iy)
          for (int64_t ix = x0; ix < x1; ++ix)
            if (iy >= 0 && iy < H && ix >= 0 && ix < W) vals.push_back(xv[size_t((p * H + iy) * W + ix)]);
        out.push_back(r(vals, (y1 - y0) * (x1 - x0)));
      }
  return tensor(out, {x.size(0), x.size(1), oh, ow});
}

WindowFn fixed(int64_t k, int64_t s, int64_t pad) {
  return [=](int64_t o, int64_t size, int64_t) {
    return std::pair{o * s - pad, std::min(o * s - pad + k, size + pad)};
  };
}
WindowFn adaptive() {
  return [](int64_t o, int64_t size, int64_t out) {
    return std::pair{int64_t(std::floor(double(o * size) / double(out))),
                     int64_t(std::ceil(double((o + 1) * size) / double(out)))};
  };
}
double max_of(const std::vector<double>& v, int64_t) { return *std::max_element(v.begin(), v.end()); }
double mean_of(const std::vector<double>& v, int64_t n) {
  double s = 0;
  for (double e : v) s += e;
  return s / double(n);
}

int64_t out_size(int64_t size, int64_t k, int64_t s, int64_t p) { return (size + 2 * p - k) / s + 1; }

OpCase pool_case(std::string name, Shape x, Pool2dOptions o, bool is_max) {
  std::array<int64_t, 2> s = o.stride[0] == 0 ? o.kernel : o.stride;
  return OpCase{
      .name = name,
      .make_inputs = [x] { return Inputs{uniform(x, -1, 1, 1)}; },  // distinct values: no ties
      .fn = [o, is_max](const Inputs& i) { return is_max ? max_pool2d(i[0], o) : avg_pool2d(i[0], o); },
      .reference =
          [=](const Inputs& i) {
            return ref_pool(i[0], out_size(x[2], o.kernel[0], s[0], o.padding[0]),
                            out_size(x[3], o.kernel[1], s[1], o.padding[1]),
                            fixed(o.kernel[0], s[0], o.padding[0]), fixed(o.kernel[1], s[1], o.padding[1]),
                            is_max ? Reduce(max_of) : Reduce(mean_of));
          },
      .covers = {is_max ? "max_pool2d_backward" : "avg_pool2d_backward"},
  };
}

OpCase adaptive_case(std::string name, Shape x, std::array<int64_t, 2> out) {
  return OpCase{
      .name = "nn.adaptive_avg_pool2d/" + name,
      .make_inputs = [x] { return Inputs{uniform(x, -1, 1, 1)}; },
      .fn = [out](const Inputs& i) { return adaptive_avg_pool2d(i[0], out); },
      .reference = [out](const Inputs& i) { return ref_pool(i[0], out[0], out[1], adaptive(), adaptive(), mean_of); },
      .covers = {"adaptive_avg_pool2d_backward", "avg_pool2d"},
  };
}

// The linear backward ops differentiated again.
OpCase double_backward(std::string name, std::function<Tensor(const Tensor&)> pool, Shape out) {
  auto fn = [pool](const Inputs& i) {
    const bool was = GradMode::enabled();  // the finite-difference pass runs without grad
    GradMode::set_enabled(true);
    Tensor x = i[0].detach().requires_grad_();
    Tensor y = pool(x);
    Tensor g = grad({(y * i[1]).sum()}, {x}, {}, false, true)[0];
    GradMode::set_enabled(was);
    return g * g;
  };
  return OpCase{.name = name,
                .make_inputs = [out] { return Inputs{uniform({1, 2, 5, 7}), uniform(out, -1, 1, 3)}; },
                .fn = fn,
                .reference = fn,
                .grad_inputs = {1},
                .check_f32 = false};
}

BATON_OP_CASES {
  return {
      pool_case("nn.max_pool2d/2x2", {2, 3, 6, 5}, {}, true),
      pool_case("nn.max_pool2d/stride_padding", {1, 2, 7, 6}, {{3, 3}, {2, 1}, {1, 1}}, true),
      pool_case("nn.avg_pool2d/2x2", {2, 3, 6, 5}, {}, false),
      pool_case("nn.avg_pool2d/padding_counted", {1, 2, 7, 6}, {{3, 2}, {2, 2}, {1, 1}}, false),
      adaptive_case("uneven", {2, 2, 7, 5}, {3, 2}),
      adaptive_case("even", {1, 2, 6, 4}, {3, 2}),
      adaptive_case("global", {2, 3, 5, 5}, {1, 1}),
      double_backward("nn.avg_pool2d_backward/double_backward",
                      [](const Tensor& x) { return avg_pool2d(x, {{2, 3}, {2, 2}, {0, 1}}); }, {1, 2, 2, 4}),
      double_backward("nn.adaptive_avg_pool2d_backward/double_backward",
                      [](const Tensor& x) { return adaptive_avg_pool2d(x, {2, 3}); }, {1, 2, 2, 3}),
  };
}

TEST(Pool, MaxPoolRoutesGradientToTheFirstMaximum) {
  Tensor x = tensor<double>({{{{1, 3}, {3, 2}}}}).requires_grad_();
  Tensor y = max_pool2d(x, {});
  EXPECT_EQ(y.item<double>(), 3);
  y.sum().backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0, 1, 0, 0}));
}

TEST(Pool, ErrorsNameOpShapesAndLine) {
  int line = __LINE__ + 1;
  EXPECT_THROWS_WITH(ShapeError, max_pool2d(zeros({3, 4, 4}), {}), "[max_pool2d]", "[3,4,4]",
                     "pool_test.cpp:" + std::to_string(line));
  EXPECT_THROWS_WITH(ShapeError, avg_pool2d(zeros({1, 1, 2, 2}), {{3, 3}}), "[avg_pool2d]", "[1,1,2,2]");
  EXPECT_THROWS_WITH(ValueError, max_pool2d(zeros({1, 1, 4, 4}), {{2, 2}, {1, 1}, {2, 2}}), "[max_pool2d]",
                     "padding");
  EXPECT_THROWS_WITH(ValueError, adaptive_avg_pool2d(zeros({1, 1, 4, 5}), {0, 2}), "[adaptive_avg_pool2d]");
}

}  // namespace
}  // namespace baton::testing
