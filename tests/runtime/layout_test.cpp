// Layout planning: at O2 a plan keeps the activations between convolutions and poolings
// in the layout oneDNN's convolutions use on the machine (channels-last, or nChw8c /
// nChw16c channel blocks), reordering only at the edges; the kernels read and write every
// layout with the same results.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <sstream>
#include <thread>

#include "baton/baton.h"
#include "harness/op_harness.h"
#include "kernels/cpu/conv.h"
#include "kernels/cpu/conv_winograd.h"
#include "kernels/cpu/layout.h"
#include "kernels/cpu/pool.h"
#include "dispatch/registry.h"

namespace baton {
namespace {

Tensor uniform(const Shape& shape, uint64_t seed) { return testing::uniform(shape, -1, 1, seed).to(f32); }

// The same values stored channels-last: shape [n, c, h, w], memory in n, h, w, c order.
Tensor channels_last(const Tensor& t) {
  Tensor nhwc = t.permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2});
  if (t.size(1) > 1) {  // one channel: both layouts at once
    EXPECT_EQ(nhwc.strides(), channels_last_strides(t.shape()));
  }
  return nhwc;
}

Tensor empty_channels_last(const Shape& shape) {
  return channels_last(zeros(shape, f32));
}

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

struct ConvNet {
  Graph g{"convnet"};
  Tensor x = g.placeholder(f32, {2, 3, 12, 12}, "x");
  Tensor w1 = uniform({8, 3, 3, 3}, 1), w2 = uniform({8, 8, 3, 3}, 2), w3 = uniform({8, 8, 1, 1}, 3);
  Tensor b = uniform({8}, 4);
  Tensor y;
  ConvNet() {
    Tensor h = relu(conv2d(x, w1, b, {.padding = {1, 1}}));   // conv2d_fused with relu at O2,
    Tensor p = max_pool2d(h, {.kernel = {2, 2}});               // and with its pooling one step
    Tensor r = relu(conv2d(p, w2, b, {.padding = {1, 1}}) + p);  // residual, in place over p
    Tensor a = avg_pool2d(conv2d(r, w3, b), {.kernel = {2, 2}});
    y = exp(a);  // an element-wise reader, which follows the average pool's layout
  }
};

// Each machine's choice, on any machine: 0 (channels-last, as with AVX-512's brgconv), 8
// (AVX2's nChw8c), 16.
class ActivationLayouts : public ::testing::TestWithParam<int64_t> {
 protected:
  // How explain() names the layout of the values between the convolutions: ConvNet's 8
  // channels fill no block of 16, so those stay channels-last.
  std::string layout_name() const {
    return blocked() ? str("nChw", GetParam(), "c") : "channels-last";
  }
  bool blocked() const { return GetParam() && 8 % GetParam() == 0; }
  kernels::onednn::ChannelBlockOverride block_{GetParam()};
};

TEST_P(ActivationLayouts, StayInTheConvolutionsLayoutBetweenThem) {
  ConvNet net;
  Tensor value = uniform({2, 3, 12, 12}, 5);
  Session plain(net.g, {.level = OptLevel::O1}), planned(net.g, {.level = OptLevel::O2});
  Tensor want = plain.run({net.y}, {{net.x, value}}).at(0);
  Tensor got = planned.run({net.y}, {{net.x, value}}).at(0);
  // The plan may run its 3x3 convolutions with oneDNN's Winograd kernel, which rounds
  // differently from direct convolution by a few ulps (exp then magnifies them).
  EXPECT_ALL_CLOSE(got, want, 1e-5, 1e-5);
  const std::string report = planned.explain();
  // The max pool's values (the first convolution and its pooling are one step,
  // fuse_conv_pool.cpp) and the two other convolution results; the average pool's where it
  // is channels-last (exp reads any layout, but no channel blocks).
  EXPECT_EQ(count(report, layout_name()), blocked() ? 3u : 4u) << report;
  EXPECT_EQ(count(report, "conv2d_max_pool2d_values "), 1u) << report;
  EXPECT_EQ(count(plain.explain(), layout_name()), 0u);
  // Each convolution's and pooling's kernel was prepared with the plan: the report names
  // it (oneDNN's, the fused step's, the average pool's) for each of those four steps.
  EXPECT_EQ(count(report, "]\n"), 4u) << report;
  EXPECT_EQ(count(report, "[ref"), 0u) << report;
  // A feed in another layout than the plan assumed: the step finds the primitive it needs
  // (with blocked values, the plan's primitive, the feed reordered to its layout).
  EXPECT_ALL_CLOSE(planned.run({net.y}, {{net.x, channels_last(value)}}).at(0), want, 1e-5, 1e-5);
}

// NaN reaches the result through a max pooling of blocked or channels-last values (the
// window loops compare NaN as eager's loops do; oneDNN's pooling would skip it). A 1x1
// convolution before it: a 3x3 one would run with the pooling as one step.
TEST_P(ActivationLayouts, PoolingLoopsServeBlockedValuesToo) {
  Graph g("pooled");
  Tensor x = g.placeholder(f32, {2, 3, 12, 12}, "x");
  Tensor b = uniform({8}, 4);
  Tensor p = max_pool2d(conv2d(x, uniform({8, 3, 1, 1}, 1), b), {.kernel = {2, 2}});
  Tensor y = exp(avg_pool2d(conv2d(p, uniform({8, 8, 1, 1}, 2), b), {.kernel = {2, 2}}));
  Tensor value = uniform({2, 3, 12, 12}, 6);
  value.data<float>()[7] = std::numeric_limits<float>::quiet_NaN();
  Session plain(g, {.level = OptLevel::O1}), planned(g, {.level = OptLevel::O2});
  Tensor want = plain.run({y}, {{x, value}}).at(0), got = planned.run({y}, {{x, value}}).at(0);
  EXPECT_ALL_CLOSE(got, want, 1e-5, 1e-5);
  int64_t nan = 0;
  for (int64_t i = 0; i < got.numel(); ++i) nan += std::isnan(got.data<float>()[i]) ? 1 : 0;
  EXPECT_GT(nan, 0);
  EXPECT_EQ(count(planned.explain(), layout_name()), blocked() ? 3u : 4u) << planned.explain();
}

INSTANTIATE_TEST_SUITE_P(Blocks, ActivationLayouts, ::testing::Values(0, 8, 16),
                         [](const auto& info) { return info.param ? str("nChw", info.param, "c") : std::string("nhwc"); });

// A plan runs batched 3x3 stride-1 convolutions of 64+ channels with oneDNN's Winograd
// kernel where it has one (not on AVX2-only machines), residual and relu post-ops
// included; the values stay within Winograd's rounding of eager's direct convolution.
TEST(Layouts, PlannedThreeByThreeConvolutionsMayRunWinograd) {
  Graph g("block");
  Tensor x = g.placeholder(f32, {4, 64, 8, 8}, "x");
  Tensor w1 = uniform({64, 64, 3, 3}, 7) * 0.1, w2 = uniform({64, 64, 3, 3}, 8) * 0.1, b = uniform({64}, 9);
  auto block = [&](const Tensor& in) {
    Tensor h = relu(conv2d(in, w1, b, {.padding = {1, 1}}));
    return relu(conv2d(h, w2, b, {.padding = {1, 1}}) + in);
  };
  Tensor y = block(x);
  Tensor value = uniform({4, 64, 8, 8}, 10);
  Session sess(g);
  EXPECT_ALL_CLOSE(sess.run({y}, {{x, value}}).at(0), block(value), 1e-5, 1e-5);
  const std::string report = sess.explain();
  EXPECT_EQ(count(report, "]\n"), 2u) << report;  // both convolutions prepared
  EXPECT_EQ(count(report, "[ref"), 0u) << report;
}

// A training step: the activations, their gradients (the relu_backward fused into the
// poolings' backward) and the poolings' window offsets stay in the convolutions' layout
// through the backward convolutions and poolings too: channels-last, or channel blocks.
// The conv bias gradients sum tensors of that layout. The gradients equal the unplanned
// graph's.
// Two layers of conv, relu and max pooling, and a loss: the training steps below.
struct TrainingNet {
  Graph g{"train"};
  Tensor x = g.placeholder(f32, {4, 1, 12, 12}, "x");
  Tensor w1 = g.variable(uniform({16, 1, 3, 3}, 1), "w1"), b1 = g.variable(uniform({16}, 2), "b1");
  Tensor w2 = g.variable(uniform({16, 16, 3, 3}, 3) * 0.2, "w2"), b2 = g.variable(uniform({16}, 4), "b2");
  Tensor h = max_pool2d(relu(conv2d(x, w1, b1)), {.kernel = {2, 2}});  // [4, 16, 5, 5]
  Tensor z = max_pool2d(relu(conv2d(h, w2, b2, {.padding = {1, 1}})), {.kernel = {2, 2}});
  Tensor loss = (z * z).sum();
};

TEST_P(ActivationLayouts, TrainingStepKeepsActivationsAndTheirGradientsInTheConvolutionsLayout) {
  TrainingNet net;
  Graph& g = net.g;
  const Tensor& x = net.x;
  // x's gradient too: the first pooling's input gradient is then made (else the first
  // weight gradient takes the pooled one: fuse_pool_gradient.cpp), and the first
  // convolution's input gradient runs.
  std::vector<Tensor> grads = grad(net.loss, {net.w1, net.b1, net.w2, net.b2, x});
  kernels::WinogradOverride direct(false);  // conv_winograd_test.cpp plans this step with it
  Session plain(g, {.level = OptLevel::O1}), planned(g, {.level = OptLevel::O2});
  Tensor value = uniform({4, 1, 12, 12}, 5);
  std::vector<Tensor> want = plain.run(grads, {{x, value}}), got = planned.run(grads, {{x, value}});
  for (size_t i = 0; i < grads.size(); ++i) EXPECT_ALL_CLOSE(got[i], want[i], 1e-4, 1e-5) << "gradient " << i;
  const std::string report = planned.explain();
  // Forward: the first pooling's values and offsets (each convolution and its pooling are
  // one step, fuse_conv_pool.cpp: their results are never stored); backward: the input
  // gradient of conv 2. (Each pooling's input gradient is made inside the step that takes
  // its convolution's gradients, fuse_pool_gradient.cpp, in the same layout.)
  const int64_t block = GetParam();
  EXPECT_GE(count(report, block ? str("nChw", block, "c") : "channels-last"), 3u) << report;
  EXPECT_EQ(count(report, "conv2d_max_pool2d "), 2u) << report;
  EXPECT_EQ(count(report, "[ref"), 0u) << report;
  // Each weight gradient (with its conv's bias gradient) runs the way that measured
  // fastest: oneDNN's kernel with the bias in its pass or summed apart, and for the first
  // layer also im2col + GEMM (on a blocked gradient, im2col + vector sums). Each runs in the
  // step that takes its convolution's gradients through its pooling (fuse_pool_gradient.cpp).
  // (Other steps show times too where oneDNN offered several implementations.)
  std::istringstream lines(report);
  size_t measured_weight_gradients = 0;
  for (std::string line; std::getline(lines, line);) {
    const size_t weight_gradient = line.find("the weight gradient by ");
    if (line.find("conv2d_backward_pooled") != std::string::npos && weight_gradient != std::string::npos &&
        line.find("(measured: ", weight_gradient) != std::string::npos)
      ++measured_weight_gradients;
  }
  EXPECT_EQ(measured_weight_gradients, 2u) << report;
  EXPECT_GE(count(report, block ? "im2col+blocked sums" : "im2col+sgemm"), 1u) << report;
}

// Without x's gradient, the first layer's weight and bias gradients are taken through its
// pooling (fuse_pool_gradient.cpp), from the pooled gradient in whatever layout the plan
// keeps it (channels-last: the kernel's vector path; blocks: read as the plan converts
// them). The gradients equal the unfused plan's.
TEST_P(ActivationLayouts, AFirstLayersWeightGradientIsTakenThroughItsPooling) {
  TrainingNet net;
  std::vector<Tensor> grads = grad(net.loss, {net.w1, net.b1, net.w2, net.b2});
  Session plain(net.g, {.level = OptLevel::O1}), planned(net.g, {.level = OptLevel::O2});
  Tensor value = uniform({4, 1, 12, 12}, 5);
  std::vector<Tensor> want = plain.run(grads, {{net.x, value}}), got = planned.run(grads, {{net.x, value}});
  for (size_t i = 0; i < grads.size(); ++i) EXPECT_ALL_CLOSE(got[i], want[i], 1e-4, 1e-5) << "gradient " << i;
  EXPECT_EQ(count(planned.explain(), "conv2d_backward_weight_bias_pooled "), 1u) << planned.explain();
}

// The second convolution (16 channels in) and its pooling run as one step by baton's
// Winograd, which pools in its output transform where the pooled outputs are in 8-channel
// vectors or any strides (nChw16c: the convolution apart, its result in the step's
// scratch, then the pooling loops). A NaN in the input sends the step apart too (the
// transforms would spread it over whole tiles). Values equal the unfused plan's.
TEST_P(ActivationLayouts, WinogradPoolsInItsOutputTransform) {
  TrainingNet net;
  std::vector<Tensor> grads = grad(net.loss, {net.w1, net.b1, net.w2, net.b2});
  kernels::WinogradOverride winograd(true);
  Session plain(net.g, {.level = OptLevel::O1}), planned(net.g, {.level = OptLevel::O2});
  Tensor value = uniform({4, 1, 12, 12}, 5);
  Tensor with_nan = value.clone();
  with_nan.data<float>()[3 * 12 + 5] = std::numeric_limits<float>::quiet_NaN();
  for (const Tensor& x : {value, with_nan}) {
    // Winograd rounds differently from direct convolution (~1e-6 of the values' scale).
    std::vector<Tensor> want = plain.run(grads, {{net.x, x}}), got = planned.run(grads, {{net.x, x}});
    for (size_t i = 0; i < grads.size(); ++i) EXPECT_ALL_CLOSE(got[i], want[i], 1e-4, 1e-5) << "gradient " << i;
  }
  const std::string report = planned.explain();
  EXPECT_EQ(count(report, "pooled in its output transform"), GetParam() == 16 ? 0u : 1u) << report;
  EXPECT_EQ(count(report, "then the pooling loops"), GetParam() == 16 ? 1u : 0u) << report;
}

TEST(Layouts, BackwardConvolutionsReadAndWriteEitherLayout) {
  for (const kernels::ConvGeom& g : {kernels::ConvGeom{2, 8, 7, 7, 16, 3, 3, 7, 7, 1, 1, 1, 1, 1, 1, 1},
                                    kernels::ConvGeom{3, 1, 9, 9, 16, 3, 3, 7, 7, 1, 1, 1, 0, 0, 1, 1}}) {
    Tensor gy = uniform(g.output_shape(), 1), w = uniform(g.weight_shape(), 2), x = uniform(g.input_shape(), 3);
    Tensor want_gx = empty(g.input_shape(), f32), want_gw = empty(g.weight_shape(), f32);
    kernels::conv_backward_input_f32(g, gy, w, want_gx);
    kernels::conv_backward_weight_f32(g, gy, x, want_gw);
    for (bool last : {false, true}) {
      Tensor gx = last ? empty_channels_last(g.input_shape()) : empty(g.input_shape(), f32);
      Tensor gw = empty(g.weight_shape(), f32);
      kernels::conv_backward_input_f32(g, last ? channels_last(gy) : gy, w, gx);
      kernels::conv_backward_weight_f32(g, last ? channels_last(gy) : gy, last ? channels_last(x) : x, gw);
      EXPECT_ALL_CLOSE(gx, want_gx, 1e-5, 1e-5) << last;
      EXPECT_ALL_CLOSE(gw, want_gw, 1e-5, 1e-5) << last;
    }
  }
}

TEST(Layouts, MaxPoolBackwardWritesEitherLayout) {
  const kernels::PoolGeom g{2, 5, 8, 8, 3, 3, 2, 2, 1, 1, 4, 4};
  Tensor x = uniform({2, 5, 8, 8}, 6), gy = uniform({2, 5, 4, 4}, 7);
  Tensor y = empty({2, 5, 4, 4}, f32), idx = empty({2, 5, 4, 4}, i64);
  kernels::max_pool_forward(g, x, y, idx);
  Tensor want = empty({2, 5, 8, 8}, f32), gx = empty_channels_last({2, 5, 8, 8});
  kernels::max_pool_backward(g, gy, idx, want);
  kernels::max_pool_backward(g, channels_last(gy), idx, gx);
  EXPECT_ALL_CLOSE(gx, want, 0, 0);
}

// Runs op `name`'s kernel on `inputs` into `out`, as a plan step does.
Tensor run_kernel(const char* name, const std::vector<Tensor>& inputs, Tensor out, const ops::Attrs& attrs = {}) {
  const ops::OpDef& op = *ops::find_op(name);
  std::vector<Tensor> outs{out};
  op.kernel(ops::KernelContext{{op, inputs, attrs, SourceLoc::current()}, outs});
  return out;
}

// Element-wise kernels, fused or not, write the layout they are handed, flat when the
// inputs share it, through strides when not (a plain operand, a broadcast bias).
TEST(Layouts, ElementwiseKernelsWriteTheLayoutTheyAreHanded) {
  const Shape shape{2, 3, 4, 5};
  Tensor a = uniform(shape, 8), b = uniform(shape, 9), bias = uniform({3, 1, 1}, 10);
  EXPECT_ALL_CLOSE(run_kernel("add", {channels_last(a), channels_last(b)}, empty_channels_last(shape)), a + b, 0, 0);
  EXPECT_ALL_CLOSE(run_kernel("add", {channels_last(a), b}, empty_channels_last(shape)), a + b, 0, 0);
  EXPECT_ALL_CLOSE(run_kernel("mul", {channels_last(a), bias}, empty_channels_last(shape)), a * bias, 0, 0);
  EXPECT_ALL_CLOSE(run_kernel("relu_backward", {channels_last(a), channels_last(b)}, empty_channels_last(shape)),
                   where(b > 0.0, a, zeros_like(a)), 0, 0);
  EXPECT_ALL_CLOSE(run_kernel("sigmoid", {channels_last(a)}, empty_channels_last(shape)), sigmoid(a), 0, 0);
  // A fused program runs over the dims in the order they lie in memory.
  ops::Attrs program;
  program.set("program", std::string("r0=sigmoid(in0); r1=mul(r0,in1); r2=add(r1,in2)"));
  EXPECT_ALL_CLOSE(run_kernel("fused_elementwise", {channels_last(a), b, bias}, empty_channels_last(shape), program),
                   sigmoid(a) * b + bias, 1e-6, 1e-6);
  const Tensor m = uniform({6, 7}, 11), n = uniform({6, 7}, 12), row = uniform({7}, 13);
  const Tensor column_major = zeros({7, 6}, f32).t();
  EXPECT_ALL_CLOSE(run_kernel("fused_elementwise", {m.t().contiguous().t(), n, row}, column_major, program),
                   sigmoid(m) * n + row, 1e-6, 1e-6);
  EXPECT_EQ(column_major.strides(), (Shape{1, 6}));
}

// A plan keeps a convolution's weights in oneDNN's layout between runs (the conv reads a
// tensor no node writes); when the caller writes them in place between runs (an eager
// optimizer step, a load), the next run reads the new values, in a Session and compiled.
TEST(Layouts, PlannedConvolutionsSeeWeightsWrittenBetweenRuns) {
  Tensor w = uniform({8, 4, 3, 3}, 1), b = uniform({8}, 2), v = uniform({2, 4, 7, 7}, 3);
  auto net = [&](const Tensor& in) { return relu(conv2d(in, w, b, {.padding = {1, 1}})); };
  Graph g("conv");
  Tensor x = g.placeholder(f32, {2, 4, 7, 7}, "x");
  Tensor y = net(x);
  Session session(g);
  auto compiled = compile([&](Tensor in) { return net(in); });
  for (int round = 0; round < 3; ++round) {
    const Tensor want = net(v);
    EXPECT_ALL_CLOSE(session.run({y}, {{x, v}}).at(0), want, 1e-5, 1e-5) << round;
    EXPECT_ALL_CLOSE(compiled(v), want, 1e-5, 1e-5) << round;
    NoGradGuard no_grad;
    w.copy_(uniform({8, 4, 3, 3}, uint64_t(10 + round)));  // in place: the same storage, a new version
  }
}

// Runs of one plan from two threads at once: each finds (or the first makes) the step's
// packed weights, and both get the right values.
TEST(Layouts, PlannedConvolutionsRunFromTwoThreadsAtOnce) {
  Tensor w = uniform({16, 8, 3, 3}, 4), b = uniform({16}, 5), v = uniform({2, 8, 9, 9}, 6);
  Graph g("conv");
  Tensor x = g.placeholder(f32, {2, 8, 9, 9}, "x");
  Tensor y = relu(conv2d(x, w, b, {.padding = {1, 1}}));
  Session session(g);
  const Tensor want = relu(conv2d(v, w, b, {.padding = {1, 1}}));
  std::atomic<int> wrong{0};
  auto runs = [&] {
    for (int i = 0; i < 20; ++i)
      if (!testing::all_close(session.run({y}, {{x, v}}).at(0), want, 1e-5, 1e-5)) ++wrong;
  };
  std::thread other(runs);
  runs();
  other.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST(Layouts, ConvolutionReadsAndWritesEitherLayout) {
  const kernels::ConvGeom g{2, 4, 7, 7, 6, 3, 3, 7, 7, 1, 1, 1, 1, 1, 1, 1};
  Tensor x = uniform(g.input_shape(), 1), w = uniform(g.weight_shape(), 2), bias = uniform({6}, 3);
  Tensor residual = uniform(g.output_shape(), 4);
  Tensor want = empty(g.output_shape(), f32);
  const kernels::Activation relu{.kind = kernels::Activation::Kind::relu};
  kernels::conv_forward_f32(g, x, w, &bias, want, false, {.residual = &residual, .act = relu});
  for (bool x_last : {false, true})
    for (bool out_last : {false, true})
      for (bool residual_last : {false, true}) {
        Tensor out = out_last ? empty_channels_last(g.output_shape()) : empty(g.output_shape(), f32);
        Tensor r = residual_last ? channels_last(residual) : residual;
        kernels::conv_forward_f32(g, x_last ? channels_last(x) : x, w, &bias, out, false,
                                  {.residual = &r, .act = relu});
        EXPECT_ALL_CLOSE(out, want, 1e-6, 1e-6) << x_last << out_last << residual_last;
      }
  // The result over the residual's own buffer, as a plan places it.
  Tensor in_place = channels_last(residual);
  kernels::conv_forward_f32(g, channels_last(x), w, &bias, in_place, false, {.residual = &in_place, .act = relu});
  EXPECT_ALL_CLOSE(in_place, want, 1e-6, 1e-6);
}

TEST(Layouts, PoolingReadsAndWritesEitherLayout) {
  const kernels::PoolGeom g{2, 5, 8, 8, 3, 3, 2, 2, 1, 1, 4, 4};
  Tensor x = uniform({2, 5, 8, 8}, 6);
  Tensor want_max = empty({2, 5, 4, 4}, f32), want_idx = empty({2, 5, 4, 4}, i64), want_avg = empty({2, 5, 4, 4}, f32);
  kernels::max_pool_forward(g, x, want_max, want_idx);
  kernels::avg_pool_forward(g, x, want_avg);
  for (bool x_last : {false, true})
    for (bool out_last : {false, true}) {
      auto out = [&] { return out_last ? empty_channels_last({2, 5, 4, 4}) : empty({2, 5, 4, 4}, f32); };
      Tensor in = x_last ? channels_last(x) : x;
      Tensor max = out(), idx = empty({2, 5, 4, 4}, i64), avg = out();
      kernels::max_pool_forward(g, in, max, idx);
      kernels::avg_pool_forward(g, in, avg);
      EXPECT_ALL_CLOSE(max, want_max, 0, 0) << x_last << out_last;
      EXPECT_ALL_CLOSE(idx, want_idx, 0, 0) << x_last << out_last;
      EXPECT_ALL_CLOSE(avg, want_avg, 1e-6, 1e-6) << x_last << out_last;
    }
  // Indices handed channels-last (a plan lays out every rank-4 output of a pooling so
  // when its readers take it) are written in that layout.
  Tensor idx_last = empty({2, 4, 4, 5}, i64).permute({0, 3, 1, 2}), values = empty_channels_last({2, 5, 4, 4});
  kernels::max_pool_forward(g, channels_last(x), values, idx_last);
  EXPECT_ALL_CLOSE(idx_last, want_idx, 0, 0);
  // A NaN sends max pooling to the loops, which write a channels-last result too.
  Tensor with_nan = x.clone();
  with_nan.data<float>()[3] = std::numeric_limits<float>::quiet_NaN();
  Tensor loops_max = empty({2, 5, 4, 4}, f32), loops_idx = empty({2, 5, 4, 4}, i64);
  kernels::max_pool_forward(g, with_nan, loops_max, loops_idx);
  Tensor max = empty_channels_last({2, 5, 4, 4}), idx = empty({2, 5, 4, 4}, i64);
  kernels::max_pool_forward(g, channels_last(with_nan), max, idx);
  const std::vector<float> got = max.contiguous().to_vector<float>(), want = loops_max.to_vector<float>();
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_TRUE(got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i]))) << i;
  EXPECT_ALL_CLOSE(idx, loops_idx, 0, 0);
}

}  // namespace
}  // namespace baton
