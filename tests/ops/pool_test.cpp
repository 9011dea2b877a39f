// max_pool2d, avg_pool2d, adaptive_avg_pool2d and their backward ops.
#include <cmath>
#include <limits>

#include "harness/op_harness.h"
#include "kernels/cpu/onednn.h"
#include "kernels/cpu/pool.h"
#include "dispatch/registry.h"

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

ops::Attrs pool_attrs(const Pool2dOptions& o) {
  auto v = [](const std::array<int64_t, 2>& a) { return std::vector<int64_t>(a.begin(), a.end()); };
  std::array<int64_t, 2> stride = o.stride[0] == 0 ? o.kernel : o.stride;
  return {{"kernel", v(o.kernel)}, {"stride", v(stride)}, {"padding", v(o.padding)}};
}

// A case of `op`, a plan's form of max_pool2d: the same values.
OpCase plan_form_case(const std::string& op, std::string name, Shape x, Pool2dOptions o) {
  OpCase c = pool_case("nn." + op + "/" + name, x, o, true);
  c.fn = [o, op](const Inputs& i) {
    return ops::call_many(*ops::find_op(op), i, pool_attrs(o), SourceLoc::current())[0];
  };
  c.covers = {};
  return c;
}

// max_pool2d_values (what a plan runs when nothing reads max_pool2d's indices).
OpCase values_case(std::string name, Shape x, Pool2dOptions o) {
  OpCase c = plan_form_case("max_pool2d_values", std::move(name), x, o);
  c.check_grad = false;
  return c;
}

// max_pool2d_window (what a plan runs when only max_pool2d_backward reads the indices):
// gradients through max_pool2d_window_backward.
OpCase window_case(std::string name, Shape x, Pool2dOptions o) {
  OpCase c = plan_form_case("max_pool2d_window", std::move(name), x, o);
  c.covers = {"max_pool2d_window_backward"};
  return c;
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
      values_case("2x2", {2, 3, 6, 5}, {}),
      values_case("stride_padding", {1, 2, 7, 6}, {{3, 3}, {2, 1}, {1, 1}}),
      window_case("2x2", {2, 3, 6, 5}, {}),
      window_case("stride_padding", {1, 2, 7, 6}, {{3, 3}, {2, 1}, {1, 1}}),
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

// f32 pooling runs on oneDNN, f64 on the loops: both must agree, indices included.
struct Geometry {
  Shape x;
  Pool2dOptions o;
};
const std::vector<Geometry>& geometries() {
  static const std::vector<Geometry> g{
      {{2, 3, 6, 5}, {}},                           // odd width: the last column unused
      {{1, 2, 7, 6}, {{3, 3}, {2, 1}, {1, 1}}},       // stride != kernel, padding
      {{2, 19, 9, 8}, {{3, 2}, {2, 2}, {1, 1}}},      // channels not a multiple of the block
      {{3, 5, 7, 11}, {{2, 3}, {1, 3}, {1, 0}}},      // right padding < 0 (last columns unused)
      {{4, 8, 13, 13}, {{3, 3}, {3, 3}, {0, 0}}},     // floor drops the last row
      {{1, 9, 20, 20}, {{16, 17}, {1, 2}, {8, 8}}},   // 272-element windows: s32 workspace
      {{2, 16, 7, 7}, {{2, 2}, {2, 2}, {1, 1}}},      // groups of 8 channels, windows clipped by padding
  };
  return g;
}

// (values, indices) of max_pool2d through the registry: the public function drops indices.
std::vector<Tensor> max_pool_outputs(const Tensor& x, const Pool2dOptions& o) {
  std::array<int64_t, 2> s = o.stride[0] == 0 ? o.kernel : o.stride;
  ops::Attrs a{{"kernel", std::vector<int64_t>{o.kernel[0], o.kernel[1]}},
               {"stride", std::vector<int64_t>{s[0], s[1]}},
               {"padding", std::vector<int64_t>{o.padding[0], o.padding[1]}}};
  Tensor in[1] = {x};
  return ops::call_many(*ops::find_op("max_pool2d"), in, a, SourceLoc::current());
}

// d(sum(pool(x) * gy))/dx for x in dtype t.
Tensor pool_grad(const std::function<Tensor(const Tensor&)>& pool, const Tensor& x, const Tensor& gy,
                 DType t) {
  Tensor xt = x.to(t).detach().requires_grad_();
  (pool(xt) * gy.to(t)).sum().backward();
  return xt.grad();
}

// The implementation of the first oneDNN primitive whose description starts with `what`.
std::string impl_of(const std::string& what) {
  for (auto& c : kernels::onednn::created_impls())
    if (c.starts_with(what)) return c.substr(c.find(" -> ") + 4);
  return "none";
}

TEST(Pool, F32OnOneDnnAgreesWithF64Loops) {
  for (const Geometry& g : geometries()) {
    SCOPED_TRACE(str(g.x, " kernel ", Shape(g.o.kernel), " stride ", Shape(g.o.stride)));
    // Few distinct values: many ties, which must resolve to the first maximum.
    Tensor ties = uniform(g.x, 0, 4, 7).to(i64).to(f64);
    for (const Tensor& x : {uniform(g.x, -1, 1, 3), ties}) {
      auto m64 = max_pool_outputs(x, g.o), m32 = max_pool_outputs(x.to(f32), g.o);
      EXPECT_ALL_CLOSE(m32[0], m64[0], 1e-7, 1e-7);
      EXPECT_EQ(m32[1].to_vector<int64_t>(), m64[1].to_vector<int64_t>());
    }
    Tensor x = uniform(g.x, -1, 1, 4);
    Tensor gy = uniform(max_pool2d(x, g.o).shape(), -1, 1, 5);
    auto max = [&](const Tensor& t) { return max_pool2d(t, g.o); };
    auto avg = [&](const Tensor& t) { return avg_pool2d(t, g.o); };
    EXPECT_ALL_CLOSE(avg_pool2d(x.to(f32), g.o), avg_pool2d(x, g.o), 1e-6, 1e-5);
    EXPECT_ALL_CLOSE(pool_grad(max, x, gy, f32), pool_grad(max, x, gy, f64), 1e-6, 1e-5);
    EXPECT_ALL_CLOSE(pool_grad(avg, x, gy, f32), pool_grad(avg, x, gy, f64), 1e-6, 1e-5);
  }
  // Every geometry really ran on oneDNN's optimized (jit) kernels.
  for (const Geometry& g : geometries())
    for (const char* what : {"max_pool2d forward ", "avg_pool2d forward ", "avg_pool2d backward "})
      EXPECT_TRUE(impl_of(what + str(g.x) + " kernel " + str(Shape(g.o.kernel))).starts_with("jit"))
          << what << g.x;
}

// oneDNN skips NaN and starts windows at -FLT_MAX; f32 must still behave like f64 (and PyTorch).
TEST(Pool, F32MaxPoolKeepsNaNAndInfinity) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  Tensor with_nan = tensor<double>({{{{1, nan, 0}, {3, 2, 0}}}});
  Tensor all_inf = tensor<double>({{{{-inf, -inf, 1}, {-inf, -inf, 2}}}});
  Pool2dOptions o{{2, 2}, {1, 1}, {1, 1}};
  for (const Tensor& x : {with_nan, all_inf}) {
    auto m64 = max_pool_outputs(x, o), m32 = max_pool_outputs(x.to(f32), o);
    EXPECT_ALL_CLOSE(m32[0], m64[0], 0, 0);
    EXPECT_EQ(m32[1].to_vector<int64_t>(), m64[1].to_vector<int64_t>());
  }
  EXPECT_TRUE(std::isnan(max_pool2d(with_nan.to(f32), {}).to_vector<double>()[0]));
}

// t's values stored channels-last.
Tensor channels_last(const Tensor& t) { return t.permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2}); }

// max_pool2d_window's offsets locate max_pool2d's flat indices in their windows, from
// oneDNN (u8 and s32 workspaces, blocked), from the loops (NaN, f64) and from the
// channels-last pass (NaN, a plane of -inf, f64), read plain or channels-last, written
// plain or channels-last; max_pool2d_values gives the same values.
TEST(Pool, WindowOffsetsLocateTheFlatIndices) {
  for (const Geometry& geometry : geometries()) {
    SCOPED_TRACE(str(geometry.x, " kernel ", Shape(geometry.o.kernel)));
    Tensor x = uniform(geometry.x, -1, 1, 3).to(f32);
    Tensor with_nan = x.clone(), with_inf = x.clone();
    with_nan.data<float>()[1] = std::numeric_limits<float>::quiet_NaN();
    std::fill_n(with_inf.data<float>(), geometry.x[2] * geometry.x[3], -std::numeric_limits<float>::infinity());
    const Tensor ties = uniform(geometry.x, 0, 4, 7).to(i64).to(f32);  // the first maximum must win
    const ops::Attrs a = pool_attrs(geometry.o);
    const auto& k = a.ints("kernel"), &st = a.ints("stride"), &pad = a.ints("padding");
    for (const Tensor& in : {x, with_nan, with_inf, x.to(f64), channels_last(x), channels_last(with_nan),
                             channels_last(with_inf), channels_last(x.to(f64)), channels_last(ties)}) {
      SCOPED_TRACE(str(in.dtype(), kernels::is_channels_last(in) ? " channels-last input" : " plain input"));
      auto flat = max_pool_outputs(in.contiguous(), geometry.o);
      const Shape s = flat[0].shape();
      for (bool channels_last : {false, true}) {
        Tensor y = empty(s, in.dtype()), offsets = empty(s, i32);
        if (channels_last) {
          y = empty({s[0], s[2], s[3], s[1]}, in.dtype()).permute({0, 3, 1, 2});
          offsets = empty({s[0], s[2], s[3], s[1]}, i32).permute({0, 3, 1, 2});
        }
        const kernels::PoolGeom g{in.size(0), in.size(1), in.size(2), in.size(3), k[0], k[1], st[0], st[1],
                                  pad[0], pad[1], s[2], s[3]};
        kernels::max_pool_window_forward(g, in, y, offsets);
        EXPECT_ALL_CLOSE(y, flat[0], 0, 0);
        Tensor values = channels_last ? empty({s[0], s[2], s[3], s[1]}, in.dtype()).permute({0, 3, 1, 2})
                                      : empty(s, in.dtype());  // the values alone, in y's layout
        kernels::max_pool_values(g, in, values);
        EXPECT_ALL_CLOSE(values, flat[0], 0, 0);
        const std::vector<int64_t> want = flat[1].to_vector<int64_t>();
        const std::vector<int32_t> got = offsets.contiguous().to_vector<int32_t>();
        for (size_t i = 0; i < want.size(); ++i) {
          const int64_t ox = int64_t(i) % s[3], oy = int64_t(i) / s[3] % s[2];
          const int64_t iy = oy * st[0] - pad[0] + got[i] / k[1], ix = ox * st[1] - pad[1] + got[i] % k[1];
          ASSERT_EQ(iy * g.w + ix, want[i]) << "output " << i << (channels_last ? " channels-last" : "");
        }
      }
    }
  }
}

// Masked by the window maxima of a pooled relu result (overlapping windows, padding, NaN),
// the window backward is relu_backward of its plain result, bit for bit, in either layout.
TEST(Pool, WindowBackwardMaskedByTheMaximaIsTheRelusBackward) {
  const kernels::PoolGeom g{2, 5, 8, 8, 3, 3, 2, 2, 1, 1, 4, 4};
  Tensor x = uniform({2, 5, 8, 8}, -1, 1, 6).to(f32);
  x.data<float>()[9] = std::numeric_limits<float>::quiet_NaN();
  Tensor relu_out = relu(x), gy = uniform({2, 5, 4, 4}, -1, 1, 7).to(f32);
  Tensor y = empty({2, 5, 4, 4}, f32), offsets = empty({2, 5, 4, 4}, i32), plain = empty({2, 5, 8, 8}, f32);
  kernels::max_pool_window_forward(g, relu_out, y, offsets);
  kernels::max_pool_window_backward(g, gy, offsets, plain);
  const Tensor want = where(relu_out > 0.0, plain, zeros_like(plain));  // relu_backward(plain, relu_out)
  for (bool last : {false, true}) {
    Tensor gx = last ? channels_last(empty({2, 5, 8, 8}, f32)) : empty({2, 5, 8, 8}, f32);
    Tensor maxima = last ? channels_last(y) : y;
    kernels::max_pool_window_backward(g, last ? channels_last(gy) : gy, last ? channels_last(offsets) : offsets, gx,
                                      &maxima);
    EXPECT_ALL_CLOSE(gx, want, 0, 0) << last;
  }
}

// Disjoint windows over channels-last tensors (stride >= kernel, no padding) gather each
// gradient pixel once: exactly the plain scatter's result, with and without the maxima as
// a mask, where windows leave rows and columns uncovered (stride 3) or not, in f32 and f64,
// from channels-last or plain gradients, offsets and maxima (copied a row at a time).
TEST(Pool, DisjointWindowsGatherWhatTheScatterWrites) {
  for (const kernels::PoolGeom& g : {kernels::PoolGeom{2, 9, 8, 8, 2, 2, 2, 2, 0, 0, 4, 4},
                                     kernels::PoolGeom{2, 9, 7, 8, 2, 2, 3, 3, 0, 0, 2, 3},
                                     kernels::PoolGeom{2, 16, 9, 8, 2, 2, 2, 2, 0, 0, 4, 4}}) {
    for (DType dtype : {f32, f64}) {
      SCOPED_TRACE(str(dtype, " stride ", g.sh));
      const Shape in{g.n, g.c, g.h, g.w}, out{g.n, g.c, g.oh, g.ow};
      Tensor relu_out = relu(uniform(in, -1, 1, 8).to(dtype)), gy = uniform(out, -1, 1, 9).to(dtype);
      Tensor y = empty(out, dtype), offsets = empty(out, i32);
      kernels::max_pool_window_forward(g, relu_out, y, offsets);
      for (bool masked : {false, true}) {
        Tensor want = empty(in, dtype), got = channels_last(empty(in, dtype)), maxima = channels_last(y);
        kernels::max_pool_window_backward(g, gy, offsets, want, masked ? &y : nullptr);
        kernels::max_pool_window_backward(g, channels_last(gy), channels_last(offsets), got, masked ? &maxima : nullptr);
        EXPECT_EQ(got.contiguous().to_vector<double>(), want.to_vector<double>()) << masked;
        Tensor from_plain = channels_last(empty(in, dtype));
        kernels::max_pool_window_backward(g, gy, offsets, from_plain, masked ? &y : nullptr);
        EXPECT_EQ(from_plain.contiguous().to_vector<double>(), want.to_vector<double>()) << masked << " plain operands";
      }
      Tensor bad = channels_last(offsets);
      bad.data<int32_t>()[5] = int32_t(g.kh * g.kw);
      EXPECT_THROWS_WITH(IndexError, kernels::max_pool_window_backward(g, channels_last(gy), bad, channels_last(empty(in, dtype))),
                         "max_pool2d_window_backward", "window");
      Tensor bad_plain = offsets.clone();
      bad_plain.data<int32_t>()[5] = -1;
      EXPECT_THROWS_WITH(IndexError, kernels::max_pool_window_backward(g, gy, bad_plain, channels_last(empty(in, dtype))),
                         "max_pool2d_window_backward", "window");
    }
  }
}

// A plan's blocked operands (nChw8c bytes under plain strides) next to plain and
// channels-last ones in one call: the window loops see each as images of 8 channels,
// copying the operands that have no such view, and give the plain call's results.
TEST(Pool, WindowLoopsMixBlockedPlainAndChannelsLastOperands) {
  const kernels::PoolGeom g{2, 16, 6, 7, 3, 3, 2, 2, 1, 1, 3, 4};
  auto blocked = [](const Tensor& t) {
    const Shape s = t.shape();
    return t.reshape({s[0], s[1] / 8, 8, s[2], s[3]}).permute({0, 1, 3, 4, 2}).contiguous().reshape(s);
  };
  auto unblocked = [](const Tensor& t) {
    const Shape s = t.shape();
    return t.reshape({s[0], s[1] / 8, s[2], s[3], 8}).permute({0, 1, 4, 2, 3}).contiguous().reshape(s);
  };
  Tensor x = uniform({2, 16, 6, 7}, -1, 1, 11).to(f32);
  x.data<float>()[3] = std::numeric_limits<float>::quiet_NaN();
  Tensor want_y = empty({2, 16, 3, 4}, f32), want_offsets = empty({2, 16, 3, 4}, i32);
  kernels::max_pool_window_forward(g, x, want_y, want_offsets);
  // x blocked, y plain, the offsets channels-last.
  const kernels::WindowPoolPlan forward = kernels::window_pool_plan(std::vector<int64_t>{8, 0, 0});
  Tensor y = empty({2, 16, 3, 4}, f32), offsets = channels_last(empty({2, 16, 3, 4}, i32));
  kernels::max_pool_window_forward(g, blocked(x), y, offsets, &forward);
  EXPECT_ALL_CLOSE(y, want_y, 0, 0);
  EXPECT_EQ(offsets.contiguous().to_vector<int32_t>(), want_offsets.to_vector<int32_t>());
  // gy plain, the offsets blocked, the maxima channels-last, gx blocked.
  Tensor gy = uniform({2, 16, 3, 4}, -1, 1, 12).to(f32), want_gx = empty(x.shape(), f32);
  kernels::max_pool_window_backward(g, gy, want_offsets, want_gx, &want_y);
  const kernels::WindowPoolPlan backward = kernels::window_pool_plan(std::vector<int64_t>{0, 8, 0, 8});
  Tensor gx = empty(x.shape(), f32), maxima = channels_last(want_y);
  kernels::max_pool_window_backward(g, gy, blocked(want_offsets), gx, &maxima, &backward);
  EXPECT_ALL_CLOSE(unblocked(gx), want_gx, 0, 0);
}

TEST(Pool, WindowBackwardRejectsAnOffsetOutsideItsWindow) {
  ops::Attrs a = pool_attrs({{2, 2}, {2, 2}, {1, 1}});
  a.set("input_shape", std::vector<int64_t>{1, 1, 3, 3});
  Tensor gy = ones({1, 1, 2, 2}, f32);
  for (int32_t bad : {4, -1, 0}) {  // past the window; negative; on the top-left padding
    Tensor offsets = full({1, 1, 2, 2}, 3, i32);
    offsets.data<int32_t>()[0] = bad;
    EXPECT_THROWS_WITH(IndexError, ops::call(*ops::find_op("max_pool2d_window_backward"), {gy, offsets}, a, SourceLoc::current()),
                       "max_pool2d_window_backward", "window");
  }
  EXPECT_THROWS_WITH(ShapeError,
                     ops::call(*ops::find_op("max_pool2d_window_backward"), {gy, ones({1, 1, 2, 2}, i64)}, a,
                               SourceLoc::current()),
                     "[max_pool2d_window_backward]", "i32");
}

// The benchmark CNN's pooling, forward and backward, must get optimized oneDNN kernels.
TEST(Pool, BenchmarkShapesUseOptimizedKernels) {
  kernels::onednn::clear_reference_impls();
  for (Shape s : {Shape{64, 32, 26, 26}, Shape{64, 64, 11, 11}}) {
    Tensor x = uniform(s, -1, 1, 2).to(f32).requires_grad_();
    (max_pool2d(x, {}).sum() + avg_pool2d(x, {}).sum()).backward();
    EXPECT_ALL_CLOSE(max_pool2d(x.detach(), {}), max_pool2d(x.detach().to(f64), {}), 0, 0);
  }
  std::string refs;
  for (auto& r : kernels::onednn::reference_impls()) refs += r + "\n";
  EXPECT_EQ(refs, "");
  for (const char* shape : {" [64,32,26,26]", " [64,64,11,11]"})
    for (const char* what : {"max_pool2d forward", "avg_pool2d forward", "avg_pool2d backward"})
      EXPECT_TRUE(impl_of(what + std::string(shape) + " kernel [2,2] stride [2,2]").starts_with("jit"))
          << what << shape;
}

}  // namespace
}  // namespace baton::testing
