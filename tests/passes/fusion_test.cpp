// The O2 fusion passes: batch-norm folding into convolutions and convolution epilogues.
// Values are compared within a tolerance (see each test): folding and fused epilogues
// change the order of arithmetic.
#include "passes/pass_testing.h"

namespace baton::passes::testing {
namespace {

const std::string kConvBnRelu =
    "graph @g(%x: f64[2,3,6,6], %w: f64[4,3,3,3], %gamma: f64[4], %beta: f64[4], %mean: f64[4], %var: f64[4]) {\n"
    "  %0 = conv2d(%x, %w) {stride=[1,1], padding=[1,1], dilation=[1,1], groups=1} : f64[2,4,6,6]   # m.cpp:1\n"
    "  %1, %2, %3 = batch_norm(%0, %gamma, %beta, %mean, %var) {training=0, eps=1e-05} : f64[2,4,6,6], f64[4], f64[4]   # m.cpp:2\n"
    "  %4 = relu(%1) : f64[2,4,6,6]   # m.cpp:3\n"
    "  return %4\n"
    "}\n";

// Positive variances, as running statistics are.
std::map<std::string, Tensor> bn_params(bool with_weights) {
  std::map<std::string, Tensor> p{{"gamma", baton::testing::uniform({4}, 0.5, 1.5, 3)},
                                  {"beta", baton::testing::uniform({4}, -1, 1, 4)},
                                  {"mean", baton::testing::uniform({4}, -1, 1, 5)},
                                  {"var", baton::testing::uniform({4}, 0.5, 2, 6)}};
  if (with_weights) p["w"] = baton::testing::uniform({4, 3, 3, 3}, -1, 1, 2);
  return p;
}

TEST(PassFusion, FoldsBatchNormThenFusesTheRelu) {
  PassCase c(kConvBnRelu, bn_params(true));
  Effect fold = c.run_pass("fold_batch_norm");
  EXPECT_EQ(text_of(c.g),
            "graph @g(%x: f64[2,3,6,6], %w: f64[4,3,3,3], %gamma: f64[4], %beta: f64[4], %mean: f64[4], %var: f64[4], "
            "%k0: f64[4,3,3,3], %k1: f64[4]) {\n"
            "  %0 = conv2d_fused(%x, %k0, %k1) {stride=[1,1], padding=[1,1], dilation=[1,1], groups=1, "
            "activation=\"none\", cache_weights=1} : f64[2,4,6,6] # m.cpp:2\n"
            "  %1 = relu(%0) : f64[2,4,6,6] # m.cpp:3\n"
            "  return %1\n"
            "}\n");
  EXPECT_EQ(details(fold), "%1, %2, %3 = batch_norm(%0, %gamma, %beta, %mean, %var) (m.cpp:2) folded into "
                           "%0 = conv2d(%x, %w) (m.cpp:1)\n");
  Effect fuse = c.run_pass("fuse_epilogue");
  EXPECT_EQ(text_of(c.g),
            "graph @g(%x: f64[2,3,6,6], %w: f64[4,3,3,3], %gamma: f64[4], %beta: f64[4], %mean: f64[4], %var: f64[4], "
            "%k0: f64[4,3,3,3], %k1: f64[4]) {\n"
            "  %0 = conv2d_fused(%x, %k0, %k1) {stride=[1,1], padding=[1,1], dilation=[1,1], groups=1, "
            "activation=\"relu\", cache_weights=1} : f64[2,4,6,6] # m.cpp:3\n"
            "  return %0\n"
            "}\n");
  // f64: the folded weights round differently from normalizing the result, ~1e-15.
  c.expect_close_values(1e-12, 1e-12);
}

TEST(PassFusion, FoldsBatchNormIntoALinearLayer) {
  PassCase c(
      "graph @g(%x: f64[5,3], %w: f64[4,3], %b: f64[4], %gamma: f64[4], %beta: f64[4], %mean: f64[4], %var: f64[4]) {\n"
      "  %0 = linear(%x, %w, %b) : f64[5,4]   # m.cpp:1\n"
      "  %1, %2, %3 = batch_norm(%0, %gamma, %beta, %mean, %var) {training=0, eps=1e-05} : f64[5,4], f64[4], f64[4]   # m.cpp:2\n"
      "  return %1\n"
      "}\n",
      [] {
        auto p = bn_params(false);
        p["w"] = baton::testing::uniform({4, 3}, -1, 1, 7);
        p["b"] = baton::testing::uniform({4}, -1, 1, 8);
        return p;
      }());
  Effect fold = c.run_pass("fold_batch_norm");
  EXPECT_EQ(text_of(c.g),
            "graph @g(%x: f64[5,3], %w: f64[4,3], %b: f64[4], %gamma: f64[4], %beta: f64[4], %mean: f64[4], "
            "%var: f64[4], %k0: f64[4,3], %k1: f64[4]) {\n"
            "  %0 = linear(%x, %k0, %k1) : f64[5,4] # m.cpp:2\n"
            "  return %0\n"
            "}\n");
  EXPECT_EQ(details(fold), "%1, %2, %3 = batch_norm(%0, %gamma, %beta, %mean, %var) (m.cpp:2) folded into "
                           "%0 = linear(%x, %w, %b) (m.cpp:1)\n");
  c.expect_close_values(1e-12, 1e-12);  // f64: the folded weights round differently, ~1e-15
}

TEST(PassFusion, BatchNormOfParametersThatMayChangeStays) {
  PassCase c(kConvBnRelu, bn_params(false));  // the weight is not fixed
  Effect e = c.run_pass("fold_batch_norm");
  EXPECT_TRUE(e.details.empty());
}

TEST(PassFusion, ResidualAddThenReluBecomeTheEpilogue) {
  PassCase c(
      "graph @g(%x: f32[1,4,5,5], %w: f32[4,4,3,3], %b: f32[4], %r: f32[1,4,5,5]) {\n"
      "  %0 = conv2d(%x, %w, %b) {stride=[1,1], padding=[1,1], dilation=[1,1], groups=1} : f32[1,4,5,5]   # m.cpp:1\n"
      "  %1 = add(%r, %0) : f32[1,4,5,5]   # m.cpp:2\n"
      "  %2 = relu(%1) : f32[1,4,5,5]   # m.cpp:3\n"
      "  return %2\n"
      "}\n");
  c.optimize(Level::O2);
  EXPECT_EQ(text_of(c.g),
            "graph @g(%x: f32[1,4,5,5], %w: f32[4,4,3,3], %b: f32[4], %r: f32[1,4,5,5]) {\n"
            "  %0 = conv2d_fused(%x, %w, %b, %r) {stride=[1,1], padding=[1,1], dilation=[1,1], groups=1, "
            "activation=\"relu\", cache_weights=1} : f32[1,4,5,5] # m.cpp:3\n"
            "  return %0\n"
            "}\n");
  // f32, 36-term dot products: oneDNN's post-ops round once where the separate ops round
  // after each step; a few ulps.
  c.expect_close_values(1e-5, 1e-5);
}

TEST(PassFusion, LinearThenReluBecomeOneStep) {
  PassCase c(
      "graph @g(%x: f32[3,5], %w: f32[4,5], %b: f32[4], %v: f32[2,4]) {\n"
      "  %0 = linear(%x, %w, %b) : f32[3,4]   # m.cpp:1\n"
      "  %1 = relu(%0) : f32[3,4]   # m.cpp:2\n"
      "  %2 = linear(%1, %v) : f32[3,2]   # m.cpp:3\n"
      "  %3 = relu(%2) : f32[3,2]   # m.cpp:4\n"
      "  %4 = add(%2, %3) : f32[3,2]\n"
      "  return %1, %4\n"
      "}\n");
  Effect e = c.run_pass("fuse_epilogue");
  // The second product's result is read twice: it stays as it is.
  EXPECT_EQ(text_of(c.g),
            "graph @g(%x: f32[3,5], %w: f32[4,5], %b: f32[4], %v: f32[2,4]) {\n"
            "  %0 = linear_fused(%x, %w, %b) {activation=\"relu\"} : f32[3,4] # m.cpp:2\n"
            "  %1 = linear(%0, %v) : f32[3,2] # m.cpp:3\n"
            "  %2 = relu(%1) : f32[3,2] # m.cpp:4\n"
            "  %3 = add(%1, %2) : f32[3,2]\n"
            "  return %0, %3\n"
            "}\n");
  EXPECT_EQ(details(e), "%1 = relu(%0) (m.cpp:2) fused into %0 = linear(%x, %w, %b) (m.cpp:1)\n");
  // f32: the step applies relu to the stored product as the relu op does (not as oneDNN's
  // post-op, which makes NaN 0: fused_relu_nan_test.cpp); equal values.
  c.expect_close_values(1e-6, 1e-6);
}

TEST(PassFusion, ReluBackwardOfAPoolingBackwardBecomesItsMask) {
  PassCase c(
      "graph @g(%y: f32[1,2,4,4], %gy: f32[1,2,2,2]) {\n"
      "  %0, %1 = max_pool2d_window(%y) {kernel=[2,2], stride=[2,2], padding=[0,0]} : f32[1,2,2,2], i32[1,2,2,2]\n"
      "  %2 = max_pool2d_window_backward(%gy, %1) {kernel=[2,2], stride=[2,2], padding=[0,0], input_shape=[1,2,4,4]} "
      ": f32[1,2,4,4]   # m.cpp:1\n"
      "  %3 = relu_backward(%2, %y) : f32[1,2,4,4]   # m.cpp:2\n"
      "  return %0, %3\n"
      "}\n");
  Effect e = c.run_pass("fuse_epilogue");
  EXPECT_EQ(text_of(c.g),
            "graph @g(%y: f32[1,2,4,4], %gy: f32[1,2,2,2]) {\n"
            "  %0, %1 = max_pool2d_window(%y) {kernel=[2,2], stride=[2,2], padding=[0,0]} : f32[1,2,2,2], "
            "i32[1,2,2,2]\n"
            "  %2 = max_pool2d_window_backward(%gy, %1, %0) {kernel=[2,2], stride=[2,2], padding=[0,0], "
            "input_shape=[1,2,4,4]} : f32[1,2,4,4] # m.cpp:2\n"
            "  return %0, %2\n"
            "}\n");
  EXPECT_EQ(details(e), "%3 = relu_backward(%2, %y) (m.cpp:2) fused into %2 = max_pool2d_window_backward(%gy, %1) "
                        "(m.cpp:1)\n");
  c.expect_same_values();  // the same additions, masked by the maxima instead of zeroed after
}

// The first layer's weight and bias gradients taken through its pooling: the
// convolution's output gradient is not made. Not when its windows overlap, nor when
// another node (here a graph output) reads that gradient too.
TEST(PassFusion, APoolingGradientOnlyAWeightGradientReadsIsTakenThroughTheWindows) {
  const char* pooled =
      "graph @g(%y: f32[2,8,6,6], %gy: f32[2,8,3,3], %x: f32[2,1,8,8]) {\n"
      "  %0, %1 = max_pool2d_window(%y) {kernel=[2,2], stride=[2,2], padding=[0,0]} : f32[2,8,3,3], i32[2,8,3,3]\n"
      "  %2 = max_pool2d_window_backward(%gy, %1, %0) {kernel=[2,2], stride=[2,2], padding=[0,0], "
      "input_shape=[2,8,6,6]} : f32[2,8,6,6]   # m.cpp:1\n"
      "  %3, %4 = conv2d_backward_weight_bias(%2, %x) {stride=[1,1], padding=[0,0], dilation=[1,1], groups=1, "
      "weight_shape=[8,1,3,3]} : f32[8,1,3,3], f32[8]   # m.cpp:2\n"
      "  return %3, %4\n"
      "}\n";
  PassCase c(pooled);
  Effect e = c.run_pass("fuse_pool_gradient");
  EXPECT_EQ(text_of(c.g),
            "graph @g(%y: f32[2,8,6,6], %gy: f32[2,8,3,3], %x: f32[2,1,8,8]) {\n"
            "  %0, %1 = max_pool2d_window(%y) {kernel=[2,2], stride=[2,2], padding=[0,0]} : f32[2,8,3,3], "
            "i32[2,8,3,3]\n"
            "  %2, %3 = conv2d_backward_weight_bias_pooled(%gy, %1, %x, %0) {stride=[1,1], padding=[0,0], "
            "dilation=[1,1], groups=1, weight_shape=[8,1,3,3], pool_kernel=[2,2], pool_stride=[2,2]} : f32[8,1,3,3], "
            "f32[8] # m.cpp:2\n"
            "  return %2, %3\n"
            "}\n");
  EXPECT_EQ(details(e), "%2 = max_pool2d_window_backward(%gy, %1, %0) (m.cpp:1) fused into %3, %4 = "
                        "conv2d_backward_weight_bias(%2, %x) (m.cpp:2)\n");
  // The same products summed in another order (f32 sums of up to 8 x 18 terms).
  c.expect_close_values(1e-5, 1e-5);

  const char* overlapping =
      "graph @g(%y: f32[1,8,4,4], %gy: f32[1,8,3,3], %x: f32[1,1,6,6]) {\n"
      "  %0, %1 = max_pool2d_window(%y) {kernel=[2,2], stride=[1,1], padding=[0,0]} : f32[1,8,3,3], i32[1,8,3,3]\n"
      "  %2 = max_pool2d_window_backward(%gy, %1, %0) {kernel=[2,2], stride=[1,1], padding=[0,0], "
      "input_shape=[1,8,4,4]} : f32[1,8,4,4]\n"
      "  %3, %4 = conv2d_backward_weight_bias(%2, %x) {stride=[1,1], padding=[0,0], dilation=[1,1], groups=1, "
      "weight_shape=[8,1,3,3]} : f32[8,1,3,3], f32[8]\n"
      "  return %3, %4\n"
      "}\n";
  std::string fetched = pooled;
  fetched.replace(fetched.find("  return %3, %4"), 15, "  return %3, %4, %2");
  for (const std::string& kept : {fetched, std::string(overlapping)}) {
    PassCase unchanged(kept);
    unchanged.run_pass("fuse_pool_gradient");
    EXPECT_EQ(text_of(unchanged.g), text_of(graph::parse_graph(kept))) << kept;
  }
}

// Where the pooling's offsets and maxima come from a first layer's convolution-and-pooling
// step and only the fused weight gradient reads the offsets, that step writes one-byte
// window codes (offset and the maximum's sign) and the gradient reads them instead of
// both. Not for a convolution of more input channels (Winograd's steps write no codes).
TEST(PassFusion, AFirstLayersPoolingWritesWindowCodesForItsWeightGradient) {
  const char* first_layer =
      "graph @g(%x: f32[2,1,8,8], %w: f32[8,1,3,3], %b: f32[8], %gy: f32[2,8,3,3]) {\n"
      "  %0, %1 = conv2d_max_pool2d(%x, %w, %b) {stride=[1,1], padding=[0,0], dilation=[1,1], groups=1, "
      "activation=\"relu\", pool_kernel=[2,2], pool_stride=[2,2]} : f32[2,8,3,3], i32[2,8,3,3]\n"
      "  %2 = max_pool2d_window_backward(%gy, %1, %0) {kernel=[2,2], stride=[2,2], padding=[0,0], "
      "input_shape=[2,8,6,6]} : f32[2,8,6,6]   # m.cpp:1\n"
      "  %3, %4 = conv2d_backward_weight_bias(%2, %x) {stride=[1,1], padding=[0,0], dilation=[1,1], groups=1, "
      "weight_shape=[8,1,3,3]} : f32[8,1,3,3], f32[8]   # m.cpp:2\n"
      "  return %0, %3, %4\n"
      "}\n";
  PassCase c(first_layer);
  Effect e = c.run_pass("fuse_pool_gradient");
  EXPECT_EQ(text_of(c.g),
            "graph @g(%x: f32[2,1,8,8], %w: f32[8,1,3,3], %b: f32[8], %gy: f32[2,8,3,3]) {\n"
            "  %0, %1 = conv2d_max_pool2d(%x, %w, %b) {stride=[1,1], padding=[0,0], dilation=[1,1], groups=1, "
            "activation=\"relu\", pool_kernel=[2,2], pool_stride=[2,2], window_codes=1} : f32[2,8,3,3], "
            "u8[2,8,3,3]\n"
            "  %2, %3 = conv2d_backward_weight_bias_pooled(%gy, %1, %x) {stride=[1,1], padding=[0,0], "
            "dilation=[1,1], groups=1, weight_shape=[8,1,3,3], pool_kernel=[2,2], pool_stride=[2,2]} : "
            "f32[8,1,3,3], f32[8] # m.cpp:2\n"
            "  return %0, %2, %3\n"
            "}\n");
  EXPECT_EQ(details(e), "%2 = max_pool2d_window_backward(%gy, %1, %0) (m.cpp:1) fused into %3, %4 = "
                        "conv2d_backward_weight_bias(%2, %x) (m.cpp:2), the pooling's windows as one-byte codes\n");
  c.expect_close_values(1e-5, 1e-5);

  std::string wide = first_layer;  // 5 input channels
  for (const char* from : {"f32[2,1,8,8]", "f32[8,1,3,3]", "weight_shape=[8,1,3,3]"}) {
    std::string to = from;
    to.replace(to.find(",1,"), 3, ",5,");
    for (size_t at = wide.find(from); at != std::string::npos; at = wide.find(from, at + to.size()))
      wide.replace(at, std::string(from).size(), to);
  }
  PassCase apart(wide);
  apart.run_pass("fuse_pool_gradient");
  EXPECT_EQ(text_of(apart.g).find("window_codes"), std::string::npos) << text_of(apart.g);
}

// A pooling gradient that a convolution's input and weight gradients both read: the three
// become conv2d_backward_pooled, placed where the first of the two was. Not when the two
// gradients are of different convolutions (here another padding).
TEST(PassFusion, APoolingGradientBothConvolutionGradientsReadBecomesOneStep) {
  const char* pooled =
      "graph @g(%y: f32[2,16,6,6], %gy: f32[2,16,3,3], %x: f32[2,8,6,6], %w: f32[16,8,3,3]) {\n"
      "  %0, %1 = max_pool2d_window(%y) {kernel=[2,2], stride=[2,2], padding=[0,0]} : f32[2,16,3,3], "
      "i32[2,16,3,3]\n"
      "  %2 = max_pool2d_window_backward(%gy, %1, %0) {kernel=[2,2], stride=[2,2], padding=[0,0], "
      "input_shape=[2,16,6,6]} : f32[2,16,6,6]   # m.cpp:1\n"
      "  %3 = conv2d_backward_input(%2, %w) {stride=[1,1], padding=[1,1], dilation=[1,1], groups=1, "
      "input_shape=[2,8,6,6]} : f32[2,8,6,6]   # m.cpp:2\n"
      "  %4, %5 = conv2d_backward_weight_bias(%2, %x) {stride=[1,1], padding=[1,1], dilation=[1,1], groups=1, "
      "weight_shape=[16,8,3,3]} : f32[16,8,3,3], f32[16]   # m.cpp:3\n"
      "  return %3, %4, %5\n"
      "}\n";
  PassCase c(pooled);
  Effect e = c.run_pass("fuse_pool_gradient");
  EXPECT_EQ(text_of(c.g),
            "graph @g(%y: f32[2,16,6,6], %gy: f32[2,16,3,3], %x: f32[2,8,6,6], %w: f32[16,8,3,3]) {\n"
            "  %0, %1 = max_pool2d_window(%y) {kernel=[2,2], stride=[2,2], padding=[0,0]} : f32[2,16,3,3], "
            "i32[2,16,3,3]\n"
            "  %2, %3, %4 = conv2d_backward_pooled(%gy, %1, %w, %x, %0) {stride=[1,1], padding=[1,1], "
            "dilation=[1,1], groups=1, pool_kernel=[2,2], pool_stride=[2,2]} : f32[2,8,6,6], f32[16,8,3,3], "
            "f32[16] # m.cpp:3\n"
            "  return %2, %3, %4\n"
            "}\n");
  EXPECT_EQ(details(e), "%2 = max_pool2d_window_backward(%gy, %1, %0) (m.cpp:1) fused into %3 = "
                        "conv2d_backward_input(%2, %w) (m.cpp:2) and %4, %5 = conv2d_backward_weight_bias(%2, %x) "
                        "(m.cpp:3)\n");
  // Unplanned, the fused op makes the same output gradient and runs the same kernels.
  c.expect_close_values(1e-5, 1e-5);

  std::string other_convolution = pooled;
  other_convolution.replace(other_convolution.find("padding=[1,1], dilation=[1,1], groups=1, input_shape"), 13,
                            "padding=[0,0]");
  other_convolution.replace(other_convolution.find("input_shape=[2,8,6,6]} : f32[2,8,6,6]"), 37,
                            "input_shape=[2,8,8,8]} : f32[2,8,8,8]");
  PassCase unchanged(other_convolution);
  unchanged.run_pass("fuse_pool_gradient");
  EXPECT_EQ(text_of(unchanged.g), text_of(graph::parse_graph(other_convolution)));
}

// A first layer's convolution (few input channels, its relu fused) and the 2x2 pooling
// that alone reads it become one step. Not when the convolution has many input
// channels, nor when another node (here a graph output) reads its result.
TEST(PassFusion, AFirstLayerConvolutionAndItsPoolingBecomeOneStep) {
  const char* layer =
      "graph @g(%x: f32[2,1,9,9], %w: f32[8,1,3,3], %b: f32[8]) {\n"
      "  %0 = conv2d_fused(%x, %w, %b) {stride=[1,1], padding=[1,1], dilation=[1,1], groups=1, activation=\"relu\"} "
      ": f32[2,8,9,9]   # m.cpp:1\n"
      "  %1, %2 = max_pool2d_window(%0) {kernel=[2,2], stride=[2,2], padding=[0,0]} : f32[2,8,4,4], i32[2,8,4,4]"
      "   # m.cpp:2\n"
      "  return %1, %2\n"
      "}\n";
  PassCase c(layer);
  Effect e = c.run_pass("fuse_conv_pool");
  EXPECT_EQ(text_of(c.g),
            "graph @g(%x: f32[2,1,9,9], %w: f32[8,1,3,3], %b: f32[8]) {\n"
            "  %0, %1 = conv2d_max_pool2d(%x, %w, %b) {stride=[1,1], padding=[1,1], dilation=[1,1], groups=1, "
            "activation=\"relu\", pool_kernel=[2,2], pool_stride=[2,2]} : f32[2,8,4,4], i32[2,8,4,4] # m.cpp:1\n"
            "  return %0, %1\n"
            "}\n");
  EXPECT_EQ(details(e), "%0 = conv2d_fused(%x, %w, %b) (m.cpp:1) and %1, %2 = max_pool2d_window(%0) (m.cpp:2) "
                        "fused\n");
  // The same products summed in another order (f32 sums of 9 terms); the window offsets
  // equal unless two outputs of a window tie within that rounding (none here).
  c.expect_close_values(1e-5, 1e-5);

  // In inference the pooling keeps its values alone: so does the fused step.
  std::string values = layer;
  values.replace(values.find("%1, %2 = max_pool2d_window"), 26, "%1 = max_pool2d_values");
  values.replace(values.find(" : f32[2,8,4,4], i32[2,8,4,4]"), 29, " : f32[2,8,4,4]");
  values.replace(values.find("return %1, %2"), 13, "return %1");
  PassCase inference(values);
  inference.run_pass("fuse_conv_pool");
  EXPECT_EQ(text_of(inference.g),
            "graph @g(%x: f32[2,1,9,9], %w: f32[8,1,3,3], %b: f32[8]) {\n"
            "  %0 = conv2d_max_pool2d_values(%x, %w, %b) {stride=[1,1], padding=[1,1], dilation=[1,1], groups=1, "
            "activation=\"relu\", pool_kernel=[2,2], pool_stride=[2,2]} : f32[2,8,4,4] # m.cpp:1\n"
            "  return %0\n"
            "}\n");
  inference.expect_close_values(1e-5, 1e-5);

  std::string many_channels = layer;
  for (const char* from : {"%x: f32[2,1,9,9]", "%w: f32[8,1,3,3]"}) {
    std::string to = from;
    to.replace(to.find(",1,"), 3, ",5,");
    many_channels.replace(many_channels.find(from), std::string(from).size(), to);
  }
  std::string fetched = layer;
  fetched.replace(fetched.find("  return %1, %2"), 15, "  return %1, %2, %0");
  for (const std::string& kept : {many_channels, fetched}) {
    PassCase unchanged(kept);
    unchanged.run_pass("fuse_conv_pool");
    EXPECT_EQ(text_of(unchanged.g), text_of(graph::parse_graph(kept))) << kept;
  }
}

TEST(PassFusion, WeightAndBiasGradientsOfOneOutputGradientBecomeOneOp) {
  PassCase c(
      "graph @g(%gy: f32[2,3,4,4], %x: f32[2,2,6,6]) {\n"
      "  %0 = sum(%gy) {dims=[0,2,3], keepdim=0} : f32[3]   # m.cpp:1\n"
      "  %1 = conv2d_backward_weight(%gy, %x) {stride=[1,1], padding=[0,0], dilation=[1,1], groups=1, "
      "weight_shape=[3,2,3,3]} : f32[3,2,3,3]   # m.cpp:2\n"
      "  %2 = sum(%gy) {dims=[0,2], keepdim=0} : f32[3,4]\n"
      "  return %1, %0, %2\n"
      "}\n");
  Effect e = c.run_pass("fuse_epilogue");
  // The fused op takes the place of the first of the two; the other sum stays.
  EXPECT_EQ(text_of(c.g),
            "graph @g(%gy: f32[2,3,4,4], %x: f32[2,2,6,6]) {\n"
            "  %0, %1 = conv2d_backward_weight_bias(%gy, %x) {stride=[1,1], padding=[0,0], dilation=[1,1], "
            "groups=1, weight_shape=[3,2,3,3]} : f32[3,2,3,3], f32[3] # m.cpp:2\n"
            "  %2 = sum(%gy) {dims=[0,2], keepdim=0} : f32[3,4]\n"
            "  return %0, %1, %2\n"
            "}\n");
  EXPECT_EQ(details(e), "%0 = sum(%gy) (m.cpp:1) fused into %1 = conv2d_backward_weight(%gy, %x) (m.cpp:2)\n");
  // oneDNN sums the bias in its own order (f32 sums of 32 terms): within a few ulps.
  c.expect_close_values(1e-5, 1e-5);
}

// ONNX's MatMul + Add + Relu: the bias becomes the product's, then the relu its post-op.
TEST(PassFusion, MatmulPlusBiasThenReluBecomeOneProduct) {
  PassCase c(
      "graph @g(%x: f32[3,5], %w: f32[5,4], %v: f32[5,4], %b: f32[4], %m: f32[3,4]) {\n"
      "  %0 = matmul(%x, %w) : f32[3,4]   # m.cpp:1\n"
      "  %1 = add(%b, %0) : f32[3,4]   # m.cpp:2\n"
      "  %2 = relu(%1) : f32[3,4]   # m.cpp:3\n"
      "  %3 = matmul(%x, %v) : f32[3,4]\n"
      "  %4 = add(%3, %m) : f32[3,4]\n"
      "  return %2, %4\n"
      "}\n");
  c.optimize(Level::O2);
  // The second sum adds a matrix, not a bias row: it stays an add.
  EXPECT_EQ(text_of(c.g),
            "graph @g(%x: f32[3,5], %w: f32[5,4], %v: f32[5,4], %b: f32[4], %m: f32[3,4]) {\n"
            "  %0 = permute(%w) {dims=[1,0]} : f32[4,5] # m.cpp:1\n"
            "  %1 = linear_fused(%x, %0, %b) {activation=\"relu\"} : f32[3,4] # m.cpp:3\n"
            "  %2 = matmul(%x, %v) : f32[3,4]\n"
            "  %3 = add(%2, %m) : f32[3,4]\n"
            "  return %1, %3\n"
            "}\n");
  // f32, 5-term dot products: the bias added inside the product rounds once less; an ulp.
  c.expect_close_values(1e-6, 1e-6);
}

TEST(PassFusion, AConvWhoseResultIsReadTwiceKeepsItsOwnOps) {
  const std::string text =
      "graph @g(%x: f32[1,2,4,4], %w: f32[2,2,1,1]) {\n"
      "  %0 = conv2d(%x, %w) {stride=[1,1], padding=[0,0], dilation=[1,1], groups=1} : f32[1,2,4,4]\n"
      "  %1 = relu(%0) : f32[1,2,4,4]\n"
      "  %2 = add(%0, %1) : f32[1,2,4,4]\n"
      "  return %2\n"
      "}\n";
  PassCase c(text);
  Effect e = c.run_pass("fuse_epilogue");
  EXPECT_EQ(graph::to_text(c.g), text);
  EXPECT_TRUE(e.details.empty());
}

TEST(PassFusion, ABroadcastingAddIsNotAResidual) {
  const std::string text =
      "graph @g(%x: f32[1,2,4,4], %w: f32[2,2,1,1], %r: f32[2,1,1]) {\n"
      "  %0 = conv2d(%x, %w) {stride=[1,1], padding=[0,0], dilation=[1,1], groups=1} : f32[1,2,4,4]\n"
      "  %1 = add(%0, %r) : f32[1,2,4,4]\n"
      "  return %1\n"
      "}\n";
  PassCase c(text);
  c.run_pass("fuse_epilogue");
  EXPECT_EQ(graph::to_text(c.g), text);
}

}  // namespace
}  // namespace baton::passes::testing
