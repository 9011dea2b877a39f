// conv2d (and its backward ops through gradients): values against a naive double loop,
// errors, and the oneDNN implementations picked for the benchmark CNN.
#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "dispatch/registry.h"
#include "harness/op_harness.h"
#include "ops/epilogue_activations.h"
#include "kernels/cpu/onednn.h"

namespace baton::testing {
namespace {

// out[n,o,y,x] = b[o] + sum over the group's channels and taps, written independently of
// the library's loops.
Tensor ref_conv(const Tensor& x, const Tensor& w, const Tensor* b, const Conv2dOptions& o) {
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t O = w.size(0), CG = w.size(1), KH = w.size(2), KW = w.size(3), G = o.groups;
  const int64_t OH = (H + 2 * o.padding[0] - o.dilation[0] * (KH - 1) - 1) / o.stride[0] + 1;
  const int64_t OW = (W + 2 * o.padding[1] - o.dilation[1] * (KW - 1) - 1) / o.stride[1] + 1;
  auto xv = x.contiguous().to_vector<double>(), wv = w.contiguous().to_vector<double>();
  std::vector<double> bv = b ? b->to_vector<double>() : std::vector<double>(size_t(O), 0.0);
  std::vector<double> out(size_t(N * O * OH * OW));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t oc = 0; oc < O; ++oc)
      for (int64_t y = 0; y < OH; ++y)
        for (int64_t xo = 0; xo < OW; ++xo) {
          double s = bv[size_t(oc)];
          for (int64_t ci = 0; ci < CG; ++ci)
            for (int64_t ky = 0; ky < KH; ++ky)
              for (int64_t kx = 0; kx < KW; ++kx) {
                int64_t iy = y * o.stride[0] - o.padding[0] + ky * o.dilation[0];
                int64_t ix = xo * o.stride[1] - o.padding[1] + kx * o.dilation[1];
                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                int64_t c = oc / (O / G) * CG + ci;
                s += xv[size_t(((n * C + c) * H + iy) * W + ix)] * wv[size_t(((oc * CG + ci) * KH + ky) * KW + kx)];
              }
          out[size_t(((n * O + oc) * OH + y) * OW + xo)] = s;
        }
  return tensor(out, {N, O, OH, OW});
}

OpCase conv_case(std::string name, Shape x, Shape w, bool bias, Conv2dOptions o) {
  return OpCase{
      .name = "nn.conv2d/" + name,
      .make_inputs =
          [=] {
            Inputs in{uniform(x, -1, 1, 1), uniform(w, -1, 1, 2)};
            if (bias) in.push_back(uniform({w[0]}, -1, 1, 3));
            return in;
          },
      .fn = [o](const Inputs& i) { return conv2d(i[0], i[1], i.size() == 3 ? i[2] : Tensor{}, o); },
      .reference = [o](const Inputs& i) { return ref_conv(i[0], i[1], i.size() == 3 ? &i[2] : nullptr, o); },
      .covers = {"conv2d_backward_input", "conv2d_backward_weight"},
  };
}

// Second-order: the backward ops differentiated again (their own gradient rules).
OpCase double_backward_case() {
  Conv2dOptions o{{2, 1}, {1, 0}, {1, 2}, 1};
  auto fn = [o](const Inputs& i) {
    const bool was = GradMode::enabled();  // the finite-difference pass runs without grad
    GradMode::set_enabled(true);
    auto leaf = [](const Tensor& t) {  // a graph input needs no requires_grad to be differentiated
      return t.requires_grad() || t.is_symbolic() ? t : t.detach().requires_grad_();
    };
    Tensor x = leaf(i[0]), w = leaf(i[1]);
    Tensor y = conv2d(x, w, {}, o);
    auto g = grad({(y * y).sum()}, {x, w}, {}, false, /*create_graph=*/true);
    GradMode::set_enabled(was);
    return g[0].sum() * 0.5 + (g[1] * g[1]).sum();  // uses both backward ops' gradients
  };
  return OpCase{
      .name = "nn.conv2d_backward_input/double_backward",
      .make_inputs = [] { return Inputs{uniform({1, 2, 5, 6}, -1, 1, 4), uniform({3, 2, 2, 2}, -1, 1, 5)}; },
      .fn = fn,
      .reference = [fn](const Inputs& i) { return fn(i); },  // checked by the gradient pass
      .check_f32 = false,
      .covers = {"conv2d_backward_weight"},
  };
}

// conv2d_fused (made by the epilogue-fusion pass): act(conv + bias + residual), f64
// loops and f32 oneDNN post-ops against the same reference (the activation by its op).
OpCase fused_case(std::string name, bool residual, const EpilogueActivation& act, Conv2dOptions o) {
  auto attrs = [=] {
    auto v = [](const std::array<int64_t, 2>& a) { return std::vector<int64_t>(a.begin(), a.end()); };
    ops::Attrs a{{"stride", v(o.stride)}, {"padding", v(o.padding)}, {"dilation", v(o.dilation)}, {"groups", o.groups}};
    for (const auto& [n, value] : act.attrs.items()) a.set(n, value);
    a.set("cache_weights", int64_t(1));
    return a;
  };
  return OpCase{
      .name = "nn.conv2d_fused/" + name,
      .make_inputs =
          [=] {
            Inputs in{uniform({2, 4, 7, 6}, -1, 1, 11), uniform({6, 4 / o.groups, 3, 3}, -1, 1, 12),
                      uniform({6}, -1, 1, 13)};
            if (residual) in.push_back(uniform(ref_conv(in[0], in[1], &in[2], o).shape(), -1, 1, 14));
            return in;
          },
      .fn = [=](const Inputs& i) { return ops::call_many(*ops::find_op("conv2d_fused"), i, attrs(), SourceLoc::current())[0]; },
      .reference =
          [=](const Inputs& i) {
            Tensor y = ref_conv(i[0], i[1], &i[2], o);
            if (residual) y = y + i[3];
            return act.op(y);
          },
      .check_grad = false,
  };
}

// f(gy element, x element, w element) for each tap of a convolution (input shape x, weight
// shape w, output shape gy) that reads an input pixel, not the padding: flat indices.
template <class F>
void for_each_tap(const Shape& x, const Shape& w, const Shape& gy, const Conv2dOptions& o, F f) {
  const int64_t N = x[0], C = x[1], H = x[2], W = x[3], O = w[0], CG = w[1], KH = w[2], KW = w[3];
  const int64_t OH = gy[2], OW = gy[3];
  for (int64_t n = 0; n < N; ++n)
    for (int64_t oc = 0; oc < O; ++oc)
      for (int64_t y = 0; y < OH; ++y)
        for (int64_t xo = 0; xo < OW; ++xo)
          for (int64_t ci = 0; ci < CG; ++ci)
            for (int64_t ky = 0; ky < KH; ++ky)
              for (int64_t kx = 0; kx < KW; ++kx) {
                const int64_t iy = y * o.stride[0] - o.padding[0] + ky * o.dilation[0];
                const int64_t ix = xo * o.stride[1] - o.padding[1] + kx * o.dilation[1];
                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                const int64_t c = oc / (O / o.groups) * CG + ci;
                f(size_t(((n * O + oc) * OH + y) * OW + xo), size_t(((n * C + c) * H + iy) * W + ix),
                  size_t(((oc * CG + ci) * KH + ky) * KW + kx));
              }
}

// [gw flattened, gb] of a convolution with output gradient gy: gw[oc, ci, ky, kx] sums
// gy * x under each tap, gb[oc] sums gy.
Tensor ref_weight_bias_grad(const Tensor& gy, const Tensor& x, const Shape& w, const Conv2dOptions& o) {
  auto gv = gy.contiguous().to_vector<double>(), xv = x.contiguous().to_vector<double>();
  std::vector<double> gw(size_t(w.numel()), 0.0);
  std::vector<double> gb(static_cast<size_t>(w[0]), 0.0);
  for_each_tap(x.shape(), w, gy.shape(), o, [&](size_t g, size_t i, size_t k) { gw[k] += gv[g] * xv[i]; });
  const int64_t plane = gy.size(2) * gy.size(3);
  for (size_t k = 0; k < gv.size(); ++k) gb[k / size_t(plane) % size_t(w[0])] += gv[k];
  gw.insert(gw.end(), gb.begin(), gb.end());
  return tensor(gw, {int64_t(gw.size())});
}

// conv2d_backward_weight_bias (made by the epilogue-fusion pass): the weight and bias
// gradients of one output gradient, as one tensor [grad_weight flattened, grad_bias].
OpCase weight_bias_case(std::string name, Conv2dOptions o) {
  auto v = [](const std::array<int64_t, 2>& a) { return std::vector<int64_t>(a.begin(), a.end()); };
  const Shape x{2, 4, 7, 6}, w{6, 4 / o.groups, 3, 3};
  return OpCase{
      .name = "nn.conv2d_backward_weight_bias/" + name,
      .make_inputs = [=] { return Inputs{uniform(ref_conv(zeros(x), zeros(w), nullptr, o).shape(), -1, 1, 15),
                                         uniform(x, -1, 1, 16)}; },
      .fn =
          [=](const Inputs& i) {
            ops::Attrs a{{"stride", v(o.stride)}, {"padding", v(o.padding)}, {"dilation", v(o.dilation)},
                         {"groups", o.groups}, {"weight_shape", w.vec()}};
            auto g = ops::call_many(*ops::find_op("conv2d_backward_weight_bias"), i, a, SourceLoc::current());
            return cat({g[0].reshape({-1}), g[1]}, 0);
          },
      .reference = [=](const Inputs& i) { return ref_weight_bias_grad(i[0], i[1], w, o); },
      .check_grad = false,
  };
}

// gx of a convolution with output gradient gy: gx[n, c, iy, ix] sums gy times the weight
// of each tap that read that pixel.
Tensor ref_input_grad(const Tensor& gy, const Tensor& w, const Shape& x, const Conv2dOptions& o) {
  auto gv = gy.contiguous().to_vector<double>(), wv = w.contiguous().to_vector<double>();
  std::vector<double> gx(size_t(x.numel()), 0.0);
  for_each_tap(x, w.shape(), gy.shape(), o, [&](size_t g, size_t i, size_t k) { gx[i] += gv[g] * wv[k]; });
  return tensor(gx, x);
}

// A max pooling's output gradient gy (with its window offsets, and its maxima or null)
// scattered onto the pooling's input of shape `dense`: where the maximum is > 0.
Tensor scattered(const Tensor& gy, const Tensor& offsets, const Tensor* maxima, const Shape& dense,
                 std::array<int64_t, 2> window, std::array<int64_t, 2> stride) {
  const Shape pooled = gy.shape();
  std::vector<double> out(size_t(dense.numel()), 0.0);
  const std::vector<double> g = gy.to_vector<double>();
  const std::vector<int32_t> at = offsets.to_vector<int32_t>();
  const std::vector<double> mx = maxima ? maxima->to_vector<double>() : std::vector<double>(g.size(), 1.0);
  for (int64_t k = 0; k < pooled.numel(); ++k) {
    if (!(mx[size_t(k)] > 0)) continue;
    const int64_t px = k % pooled[3], py = k / pooled[3] % pooled[2], plane = k / (pooled[2] * pooled[3]);
    const int64_t y = py * stride[0] + at[size_t(k)] / window[1], xx = px * stride[1] + at[size_t(k)] % window[1];
    out[size_t((plane * dense[2] + y) * dense[3] + xx)] += g[size_t(k)];
  }
  return tensor(out, dense);
}

// How a pooled-gradient case gives its windows: i32 offsets, with the maxima too (the
// relu's mask: only gradients whose maximum is > 0 count), or u8 window codes (offset | 4
// where the maximum is > 0, kernels/cpu/pool.h).
enum class Windows { Offsets, OffsetsMaxima, Codes };

// The gradients through a max pooling with disjoint windows, as one tensor, of the ops the
// pool-gradient fusion pass makes: conv2d_backward_weight_bias_pooled (weight and bias;
// inputs: pooled gradient, window offsets or codes, x[, maxima]) or, with
// `input_gradient`, conv2d_backward_pooled (input, weight and bias; inputs: pooled
// gradient, window offsets, weights, x[, maxima]). Reference: the pooling's gradient
// scattered by the offsets (where the maximum is > 0), then ref_input_grad and
// ref_weight_bias_grad.
OpCase pooled_case(std::string name, Shape x, Shape w, Conv2dOptions o, std::array<int64_t, 2> window,
                   std::array<int64_t, 2> stride, Windows windows, bool input_gradient = false) {
  auto v = [](const std::array<int64_t, 2>& a) { return std::vector<int64_t>(a.begin(), a.end()); };
  const Shape conv_out = ref_conv(zeros(x), zeros(w), nullptr, o).shape();
  const Shape pooled{x[0], w[0], (conv_out[2] - window[0]) / stride[0] + 1, (conv_out[3] - window[1]) / stride[1] + 1};
  const char* op = input_gradient ? "conv2d_backward_pooled" : "conv2d_backward_weight_bias_pooled";
  const size_t first_x = input_gradient ? 3 : 2;  // where x lies in the inputs (the weights before it)
  return OpCase{
      .name = std::string("nn.") + op + "/" + name,
      .make_inputs =
          [=] {
            const Tensor offsets = floor(uniform(pooled, 0, double(window[0] * window[1]), 22)).to(i32);
            const Tensor maxima = uniform(pooled, -1, 1, 24);
            Inputs in{uniform(pooled, -1, 1, 21),
                      windows == Windows::Codes ? (offsets + 4 * (maxima > 0).to(i32)).to(u8) : offsets};
            if (input_gradient) in.push_back(uniform(w, -1, 1, 25));
            in.push_back(uniform(x, -1, 1, 23));
            if (windows == Windows::OffsetsMaxima) in.push_back(maxima);
            return in;
          },
      .fn =
          [=](const Inputs& i) {
            ops::Attrs a{{"stride", v(o.stride)}, {"padding", v(o.padding)}, {"dilation", v(o.dilation)},
                         {"groups", o.groups}, {"pool_kernel", v(window)}, {"pool_stride", v(stride)}};
            if (!input_gradient) a.set("weight_shape", w.vec());
            auto g = ops::call_many(*ops::find_op(op), i, a, SourceLoc::current());
            std::vector<Tensor> flat;
            for (const Tensor& t : g) flat.push_back(t.reshape({-1}));
            return cat(flat, 0);
          },
      .reference =
          [=](const Inputs& i) {
            Tensor offsets = i[1], maxima = windows == Windows::OffsetsMaxima ? i[first_x + 1] : Tensor();
            if (windows == Windows::Codes) {  // offset = code % 4, counted where code >= 4
              const Tensor codes = i[1].to(i32);
              offsets = codes - 4 * floor(codes.to(f64) / 4).to(i32);
              maxima = (codes >= 4).to(f64);
            }
            const Tensor dy = scattered(i[0], offsets, maxima.defined() ? &maxima : nullptr, conv_out, window, stride);
            const Tensor weight_bias = ref_weight_bias_grad(dy, i[first_x], w, o);
            return input_gradient ? cat({ref_input_grad(dy, i[2], x, o).reshape({-1}), weight_bias}, 0) : weight_bias;
          },
      .check_grad = false,
  };
}

// conv2d_max_pool2d (made by the convolution-pooling fusion pass): the maxima of
// act(conv + bias) over each pooling window, then each one's first position in its
// window (with `codes`, plus 4 where the maximum is > 0: window codes), as one tensor;
// reference: ref_conv, the activation, and windows walked here.
OpCase conv_pool_case(std::string name, Shape x, Shape w, Conv2dOptions o, std::array<int64_t, 2> window,
                      std::array<int64_t, 2> stride, std::string activation, bool offsets = true,
                      bool codes = false) {
  auto v = [](const std::array<int64_t, 2>& a) { return std::vector<int64_t>(a.begin(), a.end()); };
  ops::Attrs attrs{{"stride", v(o.stride)},   {"padding", v(o.padding)},     {"dilation", v(o.dilation)},
                   {"groups", o.groups},      {"activation", activation}, {"pool_kernel", v(window)},
                   {"pool_stride", v(stride)}};
  if (codes) attrs.set("window_codes", int64_t(1));
  return OpCase{
      .name = (offsets ? "nn.conv2d_max_pool2d/" : "nn.conv2d_max_pool2d_values/") + name,
      .make_inputs = [=] { return Inputs{uniform(x, -1, 1, 31), uniform(w, -1, 1, 32), uniform({w[0]}, -1, 1, 33)}; },
      .fn =
          [=](const Inputs& i) {
            const char* op = offsets ? "conv2d_max_pool2d" : "conv2d_max_pool2d_values";
            auto y = ops::call_many(*ops::find_op(op), i, attrs, SourceLoc::current());
            return offsets ? cat({y[0].reshape({-1}), y[1].to(y[0].dtype()).reshape({-1})}, 0) : y[0].reshape({-1});
          },
      .reference =
          [=](const Inputs& i) {
            Tensor conv = ref_conv(i[0], i[1], &i[2], o);
            if (activation == "relu") conv = relu(conv);
            const Shape s = conv.shape();
            const int64_t ph = (s[2] - window[0]) / stride[0] + 1, pw = (s[3] - window[1]) / stride[1] + 1;
            const std::vector<double> c = conv.to_vector<double>();
            std::vector<double> best, at;
            for (int64_t plane = 0; plane < s[0] * s[1]; ++plane)
              for (int64_t py = 0; py < ph; ++py)
                for (int64_t px = 0; px < pw; ++px) {
                  double m = 0, k = -1;
                  for (int64_t wy = 0; wy < window[0]; ++wy)
                    for (int64_t wx = 0; wx < window[1]; ++wx) {
                      const double e = c[size_t((plane * s[2] + py * stride[0] + wy) * s[3] + px * stride[1] + wx)];
                      if (k < 0 || e > m) m = e, k = double(wy * window[1] + wx);
                    }
                  best.push_back(m);
                  at.push_back(codes && m > 0 ? k + 4 : k);
                }
            if (offsets) best.insert(best.end(), at.begin(), at.end());
            return tensor(best, {int64_t(best.size())});
          },
      .check_grad = false,
  };
}

const EpilogueActivation kRelu{"relu", {{"activation", std::string("relu")}}, [](const Tensor& y) { return relu(y); }};
const EpilogueActivation kNone{"none", {{"activation", std::string("none")}}, [](const Tensor& y) { return y; }};

// Each further activation, alone and after a residual.
BATON_OP_CASES {
  std::vector<OpCase> cases;
  for (const EpilogueActivation& a : epilogue_activations()) {
    cases.push_back(fused_case(a.name, false, a, {}));
    cases.push_back(fused_case("residual_" + a.name, true, a, {{2, 1}, {1, 1}, {1, 1}, 1}));
  }
  return cases;
}

BATON_OP_CASES {
  return {
      // 7x7 outputs under 2x2 windows: the last row and column lie in no window
      pooled_case("relu_mask", {2, 1, 9, 9}, {10, 1, 3, 3}, {}, {2, 2}, {2, 2}, Windows::OffsetsMaxima),
      pooled_case("window_codes", {2, 1, 9, 9}, {16, 1, 3, 3}, {}, {2, 2}, {2, 2}, Windows::Codes),
      pooled_case("strided_padded_windows_apart", {1, 2, 9, 8}, {3, 2, 3, 2}, {{2, 1}, {1, 1}, {1, 2}, 1}, {1, 2},
                  {2, 3}, Windows::Offsets),
      // baton's Winograd geometry (where a plan may take the one pass), 5x5 outputs: the last
      // row and column lie in no window
      pooled_case("winograd_geometry_relu_mask", {2, 8, 5, 5}, {16, 8, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}, {2, 2},
                  {2, 2}, Windows::OffsetsMaxima, true),
      pooled_case("strided_windows_apart", {1, 2, 9, 8}, {3, 2, 3, 2}, {{2, 1}, {1, 1}, {1, 2}, 1}, {1, 2}, {2, 3},
                  Windows::Offsets, true),
      conv_pool_case("first_layer_relu", {2, 1, 10, 9}, {8, 1, 3, 3}, {}, {2, 2}, {2, 2}, "relu"),
      conv_pool_case("three_channels_padded", {1, 3, 7, 8}, {16, 3, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}, {2, 2},
                     {2, 2}, "relu"),
      conv_pool_case("first_layer_relu", {2, 1, 10, 9}, {8, 1, 3, 3}, {}, {2, 2}, {2, 2}, "relu", false),
      conv_pool_case("window_codes", {2, 2, 10, 9}, {8, 2, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}, {2, 2}, {2, 2},
                     "none", true, true),
      // the loops: no vector path for this geometry (overlapping 3x2 windows, no relu)
      conv_pool_case("strided_dilated_overlapping", {1, 2, 9, 11}, {3, 2, 2, 3}, {{2, 1}, {1, 0}, {1, 2}, 1}, {3, 2},
                     {1, 2}, "none"),
      weight_bias_case("plain", {}),
      weight_bias_case("strided_padded", {{2, 1}, {1, 1}, {1, 1}, 1}),
      fused_case("relu", false, kRelu, {}),
      fused_case("residual_relu_strided", true, kRelu, {{2, 1}, {1, 1}, {1, 1}, 1}),
      fused_case("residual_groups", true, kNone, {{1, 1}, {1, 1}, {1, 1}, 2}),
      conv_case("basic", {2, 3, 6, 5}, {4, 3, 3, 3}, true, {}),
      conv_case("no_bias_padding", {1, 2, 5, 5}, {3, 2, 3, 3}, false, {{1, 1}, {1, 1}, {1, 1}, 1}),
      conv_case("stride_uneven", {1, 2, 7, 6}, {2, 2, 3, 2}, true, {{2, 3}, {1, 0}, {1, 1}, 1}),
      conv_case("dilation", {1, 2, 7, 7}, {2, 2, 3, 3}, true, {{1, 1}, {2, 1}, {2, 3}, 1}),
      conv_case("groups", {2, 4, 5, 5}, {6, 2, 3, 3}, true, {{1, 2}, {1, 1}, {1, 1}, 2}),
      conv_case("depthwise", {1, 3, 5, 4}, {3, 1, 3, 3}, false, {{1, 1}, {1, 1}, {1, 1}, 3}),
      double_backward_case(),
  };
}

TEST(Conv2d, ErrorsNameOpShapesAndLine) {
  Tensor x = zeros({1, 3, 8, 8});
  int line = __LINE__ + 1;
  EXPECT_THROWS_WITH(ShapeError, conv2d(x, zeros({4, 2, 3, 3})), "[conv2d]", "channel mismatch",
                     "[1,3,8,8]", "[4,2,3,3]", "conv_test.cpp:" + std::to_string(line));
  EXPECT_THROWS_WITH(ShapeError, conv2d(zeros({3, 8, 8}), zeros({4, 3, 3, 3})), "[conv2d]", "[3,8,8]");
  EXPECT_THROWS_WITH(ShapeError, conv2d(x, zeros({4, 3, 9, 9})), "[conv2d]", "larger");
  EXPECT_THROWS_WITH(ShapeError, conv2d(x, zeros({4, 3, 3, 3}), zeros({5})), "[conv2d]", "bias");
  EXPECT_THROWS_WITH(ValueError, conv2d(x, zeros({4, 3, 3, 3}), {}, {{0, 1}}), "[conv2d]", "stride");
  EXPECT_THROWS_WITH(ShapeError, conv2d(x, zeros({4, 1, 3, 3}), {}, {{1, 1}, {0, 0}, {1, 1}, 2}),
                     "[conv2d]", "groups");
}

// The CNN of the benchmark (batch 64) forward and backward in f32: oneDNN must pick
// optimized kernels everywhere, and agree with the f64 loops.
TEST(Conv2d, BenchmarkShapesUseOptimizedKernelsAndAgree) {
  kernels::onednn::clear_reference_impls();
  Tensor x = uniform({64, 1, 28, 28}), w1 = uniform({32, 1, 3, 3}, -1, 1, 2),
         w2 = uniform({64, 32, 3, 3}, -0.1, 0.1, 3), b = uniform({32}, -1, 1, 4);
  Tensor x32 = x.to(f32).requires_grad_(), w132 = w1.to(f32).requires_grad_(),
         w232 = w2.to(f32).requires_grad_();
  Tensor h = conv2d(x32, w132, b.to(f32));
  Tensor y = conv2d(max_pool2d(relu(h), {}), w232);
  EXPECT_EQ(y.shape(), (Shape{64, 64, 11, 11}));
  y.sum().backward();
  Tensor h64 = conv2d(x, w1, b);
  EXPECT_ALL_CLOSE(h, h64, 1e-4, 1e-4);
  EXPECT_ALL_CLOSE(y, conv2d(max_pool2d(relu(h64), {}), w2), 1e-3, 1e-4);
  EXPECT_EQ(w132.grad().shape(), w1.shape());
  (void)conv2d(zeros({1, 3, 224, 224}), zeros({64, 3, 7, 7}), {}, {{2, 2}, {3, 3}, {1, 1}, 1});
  (void)conv2d(zeros({1, 64, 56, 56}), zeros({64, 64, 3, 3}), {}, {{1, 1}, {1, 1}, {1, 1}, 1});
  std::string refs;
  for (auto& r : kernels::onednn::reference_impls()) refs += r + "\n";
  EXPECT_EQ(refs, "");
}

// A plan's primitives are the fastest of oneDNN's first optimized implementations: every
// candidate is timed and named in `times`, none is a reference kernel, and the one returned
// is the first in oneDNN's order within kClearWin of the least time there.
TEST(Conv2d, FastestImplementationIsTheLeastTimedOfTheOptimizedOnes) {
  namespace dnn = kernels::onednn;
  using Tag = dnnl::memory::format_tag;
  auto md = [](dnnl::memory::dims d, Tag t) { return dnnl::memory::desc(d, dnnl::memory::data_type::f32, t); };
  // The CNN's first layer, channels-last: oneDNN has several kernels for it on x86.
  dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                    md({8, 1, 28, 28}, Tag::nhwc), md({32, 1, 3, 3}, Tag::any),
                                    md({8, 32, 26, 26}, Tag::nhwc), {1, 1}, {0, 0}, {0, 0});
  dnnl::convolution_forward::primitive_desc pd(d, dnn::default_attr(), dnn::engine());
  std::string times;
  const auto chosen = dnn::fastest_implementation(pd, times);
  EXPECT_FALSE(dnn::is_reference(chosen));
  if (times.empty()) GTEST_SKIP() << "oneDNN offers one optimized implementation here: " << chosen.impl_info_str();
  std::istringstream in(times);
  std::vector<std::pair<std::string, double>> timed;
  std::string name, unit;
  double ms = 0, best = 1e300;
  while (in >> name >> ms >> unit) {  // "name 0.4 ms;" ...
    EXPECT_NE(name.rfind("ref", 0), 0u) << times;
    timed.emplace_back(name, ms);
    best = std::min(best, ms);
  }
  EXPECT_GE(timed.size(), 2u) << times;
  EXPECT_LE(timed.size(), dnn::kImplCandidates) << times;
  auto taken = std::find_if(timed.begin(), timed.end(), [&](const auto& t) { return t.second * dnn::kClearWin <= best; });
  ASSERT_NE(taken, timed.end()) << times;
  EXPECT_EQ(taken->first, chosen.impl_info_str()) << times;
}

// softplus of results from -40 to -5: tiny positive values, which oneDNN 2.6's soft_relu
// post-op loses (it gives -1.9e-6 at -20). The fused step keeps them, eager and planned.
TEST(Conv2d, FusedSoftplusKeepsTinyPositiveValues) {
  Tensor x = uniform({2, 4, 7, 6}, 0.5, 1, 21).to(f32), w = uniform({6, 4, 3, 3}, -1, -0.5, 22).to(f32);
  Tensor b = full({6}, -5.0, f32);
  const ops::Attrs attrs{{"stride", std::vector<int64_t>{1, 1}},   {"padding", std::vector<int64_t>{0, 0}},
                         {"dilation", std::vector<int64_t>{1, 1}}, {"groups", int64_t(1)},
                         {"activation", std::string("softplus")}};
  const Tensor want = softplus(conv2d(x.to(f64), w.to(f64), b.to(f64)));
  Graph g("softplus");
  Tensor xp = g.placeholder(f32, {2, 4, 7, 6}, "x");
  auto fused = [&](const Tensor& input) {
    return ops::call_many(*ops::find_op("conv2d_fused"), std::vector<Tensor>{input, w, b}, attrs,
                          SourceLoc::current())[0];
  };
  Tensor yp = fused(xp);
  const Tensor eager = fused(x);
  const Tensor planned = Session(g).run({yp}, {{xp, x}})[0];
  for (const Tensor& got : {eager, planned}) {
    for (float v : got.to_vector<float>()) ASSERT_GT(v, 0.f);
    EXPECT_ALL_CLOSE(got.to(f64), want, 1e-5, 0.0);
  }
  EXPECT_LT(max(want).item<double>(), 1e-2);  // the results were as small as meant
}

// An infinite weight at a corner tap meets the padding in the forward, and an infinite
// output gradient at a corner pixel meets it in the weight gradient: direct kernels skip
// the padding, im2col kernels multiply its zeros (NaN). Whatever kernels a plan timed
// fastest, its results hold eager's infinities and NaNs in the same places (a plan that
// timed an im2col kernel runs oneDNN's first pick for such operands, as eager does).
TEST(Conv2d, PlansPutInfinitiesWhereEagerDoes) {
  const float inf = std::numeric_limits<float>::infinity();
  Tensor w = uniform({4, 3, 3, 3}, -1, 1, 3).to(f32), x = uniform({2, 3, 8, 8}, -1, 1, 4).to(f32);
  Tensor scale = ones({2, 4, 8, 8}, f32);
  w.data<float>()[0] = inf;      // output channel 0, input channel 0, tap (0, 0)
  scale.data<float>()[0] = inf;  // image 0, channel 0, pixel (0, 0): its tap (0, 0) is padding
  const Conv2dOptions padded{.padding = {1, 1}};
  Tensor we = w.clone().requires_grad_();
  Tensor ye = conv2d(x, we, {}, padded);
  (ye * scale).sum().backward();
  Graph g("padded");
  Tensor xp = g.placeholder(f32, {2, 3, 8, 8}, "x");
  Tensor wp = g.variable(w.clone(), "w");
  Tensor yp = conv2d(xp, wp, {}, padded);
  Tensor gw = grad((yp * scale).sum(), {wp}).at(0);
  for (OptLevel level : {OptLevel::O0, OptLevel::O2}) {
    const std::vector<Tensor> got = Session(g, {.level = level}).run({yp, gw}, {{xp, x}});
    EXPECT_ALL_CLOSE(got[0], ye, 1e-5, 1e-5) << "forward";
    EXPECT_ALL_CLOSE(got[1], we.grad(), 1e-4, 1e-4) << "weight gradient";
  }
  const std::vector<float> forward = ye.to_vector<float>(), weight_grad = we.grad().to_vector<float>();
  EXPECT_TRUE(std::any_of(forward.begin(), forward.end(), [](float v) { return std::isinf(v); }));
  EXPECT_TRUE(std::any_of(weight_grad.begin(), weight_grad.end(), [](float v) { return std::isinf(v); }));
}

// The same where a plan chose an im2col kernel (on AVX2 machines it may time fastest; here
// it is forced) for a convolution between two others, whose activations are in the plan's
// layouts: fed finite weights, the plan runs it; fed an infinite one, it runs oneDNN's first
// pick instead, as eager does, rather than make the im2col kernel's NaN.
TEST(Conv2d, APlanThatChoseIm2colRunsEagersKernelForInfiniteWeights) {
  kernels::onednn::ImplementationOverride im2col("gemm");
  const Tensor x = uniform({2, 3, 8, 8}, -1, 1, 3).to(f32), first = uniform({8, 3, 3, 3}, -1, 1, 4).to(f32);
  const Tensor last = uniform({4, 8, 1, 1}, -1, 1, 5).to(f32);
  const Tensor middle = uniform({8, 8, 3, 3}, -1, 1, 6).to(f32);
  const Conv2dOptions padded{.padding = {1, 1}};
  auto net = [&](const Tensor& in, const Tensor& w) { return conv2d(conv2d(conv2d(in, first, {}, padded), w, {}, padded), last); };
  Graph g("padded");
  Tensor xp = g.placeholder(f32, {2, 3, 8, 8}, "x"), wp = g.placeholder(f32, {8, 8, 3, 3}, "w");
  const Tensor yp = net(xp, wp);
  Session session(g, {.level = OptLevel::O2});
  EXPECT_ALL_CLOSE(session.run({yp}, {{xp, x}, {wp, middle}}).at(0), net(x, middle), 1e-5, 1e-5);
  const std::string report = session.explain();
  if (report.find("gemm") == std::string::npos) GTEST_SKIP() << "no im2col kernel for these layouts:\n" << report;
  Tensor infinite = middle.clone();
  infinite.data<float>()[0] = std::numeric_limits<float>::infinity();  // output channel 0's tap (0, 0)
  const Tensor expected = net(x, infinite);
  const std::vector<float> values = expected.to_vector<float>();
  ASSERT_TRUE(std::isfinite(values[0])) << "output pixel (0, 0) meets the infinity only in the padding";
  ASSERT_TRUE(std::isinf(values[9])) << "output pixel (1, 1) meets it in the image";
  EXPECT_ALL_CLOSE(session.run({yp}, {{xp, x}, {wp, infinite}}).at(0), expected, 1e-5, 1e-5) << report;
}

// And where its weight gradient chose one: an infinite output gradient at a corner pixel
// meets the padding there, and the plan runs oneDNN's first pick for it, as eager does.
TEST(Conv2d, APlanThatChoseIm2colForTheWeightGradientRunsEagersKernelForInfiniteGradients) {
  kernels::onednn::ImplementationOverride im2col("gemm");
  const Tensor x = uniform({2, 3, 8, 8}, -1, 1, 3).to(f32), first = uniform({8, 3, 3, 3}, -1, 1, 4).to(f32);
  const Tensor last = uniform({4, 8, 1, 1}, -1, 1, 5).to(f32), middle = uniform({8, 8, 3, 3}, -1, 1, 6).to(f32);
  const Conv2dOptions padded{.padding = {1, 1}};
  auto net = [&](const Tensor& in, const Tensor& w) { return conv2d(conv2d(conv2d(in, first, {}, padded), w, {}, padded), last); };
  Tensor scale = ones({2, 4, 8, 8}, f32);
  Graph g("padded");
  Tensor xp = g.placeholder(f32, {2, 3, 8, 8}, "x"), wp = g.placeholder(f32, {8, 8, 3, 3}, "w");
  Tensor sp = g.placeholder(f32, {2, 4, 8, 8}, "scale");
  const Tensor gw = grad((net(xp, wp) * sp).sum(), {wp}).at(0);
  Session session(g, {.level = OptLevel::O2});
  auto eager_grad = [&] {
    Tensor w = middle.clone().requires_grad_();
    (net(x, w) * scale).sum().backward();
    return w.grad();
  };
  EXPECT_ALL_CLOSE(session.run({gw}, {{xp, x}, {wp, middle}, {sp, scale}}).at(0), eager_grad(), 1e-4, 1e-4);
  const std::string report = session.explain();
  if (report.find("conv2d_backward_weight") == std::string::npos || report.find("gemm") == std::string::npos)
    GTEST_SKIP() << "no im2col kernel for these layouts:\n" << report;
  scale.data<float>()[0] = std::numeric_limits<float>::infinity();  // image 0, channel 0, pixel (0, 0)
  const Tensor expected = eager_grad();
  const std::vector<float> values = expected.to_vector<float>();
  ASSERT_TRUE(std::none_of(values.begin(), values.end(), [](float v) { return std::isnan(v); }));
  ASSERT_TRUE(std::any_of(values.begin(), values.end(), [](float v) { return std::isinf(v); }));
  EXPECT_ALL_CLOSE(session.run({gw}, {{xp, x}, {wp, middle}, {sp, scale}}).at(0), expected, 1e-4, 1e-4) << report;
}

// Few input channels take the im2col + GEMM weight gradient in f32: it must agree with
// the f64 loops, with padding, stride and dilation too.
TEST(Conv2d, FirstLayerWeightGradientAgreesWithF64) {
  for (int64_t channels : {1, 3}) {
    Tensor x = uniform({5, channels, 11, 9}), w = uniform({4, channels, 3, 2}, -1, 1, 2);
    Conv2dOptions o{{2, 1}, {1, 2}, {1, 2}, 1};
    Tensor gy = uniform(conv2d(x, w, {}, o).shape(), -1, 1, 3);
    auto gw = [&](DType t) {
      Tensor wt = w.detach().to(t).clone().requires_grad_();
      conv2d(x.to(t), wt, {}, o).backward(gy.to(t));
      return wt.grad();
    };
    EXPECT_ALL_CLOSE(gw(f32), gw(f64), 1e-4, 1e-4);
  }
}

// The f32 backward of conv2d (oneDNN's backward-data and backward-weights primitives, and
// the im2col + GEMM weight gradient for 1-3 input channels) against the same op on f64
// inputs, which runs the direct loops.
//
// Tolerance: the f64 run gets the f32 inputs (rounded once), so the only difference is how
// each gradient element's sum of products is accumulated in f32. For a sum of n products,
// in any order and blocking, with or without FMA, that error is at most n * u * sum|term|
// (u = 2^-24, the f32 unit roundoff; Higham, Accuracy and Stability, 3.1), and sum|term|
// is the same backward run on |x|, |w|, |gy|. The test allows twice that bound: no valid
// implementation exceeds it. The sizes keep n below 600, so the bound stays under a tenth
// of an average term (sum|term| / n): a wrong tap, offset or group is off by whole terms.
struct ConvGrads {
  Tensor x, w, b;
};

// Gradients of sum(conv2d(x, w, b) * gy) by eager autograd.
ConvGrads conv_grads(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& gy, const Conv2dOptions& o) {
  Tensor xl = x.detach().clone().requires_grad_(), wl = w.detach().clone().requires_grad_(),
         bl = b.detach().clone().requires_grad_();
  conv2d(xl, wl, bl, o).backward(gy);
  return {xl.grad(), wl.grad(), bl.grad()};
}

// |got - expected| <= 2 * terms * u * magnitude, element by element.
::testing::AssertionResult within_accumulation_bound(const Tensor& got, const Tensor& expected,
                                                     const Tensor& magnitude, int64_t terms) {
  const double u = 1.0 / 16777216;  // 2^-24
  auto g = got.to_vector<double>(), e = expected.to_vector<double>(), m = magnitude.to_vector<double>();
  if (!(got.shape() == expected.shape())) return ::testing::AssertionFailure() << "shape " << got.shape();
  for (size_t i = 0; i < g.size(); ++i) {
    const double bound = 2 * double(terms) * u * m[i];
    if (!(std::abs(g[i] - e[i]) <= bound))
      return ::testing::AssertionFailure() << "element " << i << ": " << g[i] << " instead of " << e[i]
                                           << " (bound " << bound << ")";
  }
  return ::testing::AssertionSuccess();
}

struct ConvGeometry {
  std::string name;
  Shape x, w;
  Conv2dOptions o;
};

TEST(Conv2d, F32BackwardValuesAgreeWithF64Loops) {
  const std::vector<ConvGeometry> geometries = {
      {"3x3 same", {4, 8, 9, 9}, {16, 8, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}},
      {"stride 2", {3, 6, 11, 10}, {8, 6, 3, 3}, {{2, 2}, {1, 1}, {1, 1}, 1}},
      {"uneven stride, padding, kernel", {2, 4, 10, 9}, {5, 4, 3, 2}, {{2, 3}, {1, 0}, {1, 1}, 1}},
      {"dilation", {2, 5, 12, 11}, {4, 5, 3, 3}, {{1, 1}, {2, 1}, {2, 3}, 1}},
      {"groups", {3, 8, 8, 8}, {12, 4, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 2}},
      {"depthwise", {2, 6, 9, 7}, {6, 1, 3, 3}, {{2, 1}, {1, 1}, {1, 1}, 6}},
      {"1x1", {5, 16, 6, 6}, {8, 16, 1, 1}, {}},
      {"first layer, 1 channel", {4, 1, 14, 14}, {16, 1, 3, 3}, {}},
      {"first layer, 3 channels, stem", {2, 3, 32, 30}, {8, 3, 7, 7}, {{2, 2}, {3, 3}, {1, 1}, 1}},
      {"first layer, 2 channels, dilated", {3, 2, 15, 13}, {4, 2, 3, 3}, {{1, 2}, {0, 2}, {2, 1}, 1}},
  };
  for (const ConvGeometry& g : geometries) {
    SCOPED_TRACE(g.name);
    // Inputs rounded to f32 once, so both runs see the same numbers.
    Tensor x = uniform(g.x, -1, 1, 1).to(f32), w = uniform(g.w, -1, 1, 2).to(f32), b = uniform({g.w[0]}, -1, 1, 3).to(f32);
    Tensor y = conv2d(x, w, b, g.o);
    Tensor gy = uniform(y.shape(), -1, 1, 4).to(f32);
    ConvGrads got = conv_grads(x, w, b, gy, g.o);
    ConvGrads expected = conv_grads(x.to(f64), w.to(f64), b.to(f64), gy.to(f64), g.o);
    ConvGrads magnitude = conv_grads(abs(x.to(f64)), abs(w.to(f64)), abs(b.to(f64)), abs(gy.to(f64)), g.o);
    const int64_t per_input = g.w[0] / g.o.groups * g.w[2] * g.w[3];    // taps reaching one input
    const int64_t per_weight = y.size(0) * y.size(2) * y.size(3);        // positions one tap visits
    EXPECT_TRUE(within_accumulation_bound(got.x, expected.x, magnitude.x, per_input)) << "input gradient";
    EXPECT_TRUE(within_accumulation_bound(got.w, expected.w, magnitude.w, per_weight)) << "weight gradient";
    EXPECT_TRUE(within_accumulation_bound(got.b, expected.b, magnitude.b, per_weight)) << "bias gradient";
  }
}

}  // namespace
}  // namespace baton::testing
