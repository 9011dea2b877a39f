// conv2d (and its backward ops through gradients): values against a naive double loop,
// errors, and the oneDNN implementations picked for the benchmark CNN.
#include "harness/op_harness.h"
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

BATON_OP_CASES {
  return {
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

}  // namespace
}  // namespace baton::testing
