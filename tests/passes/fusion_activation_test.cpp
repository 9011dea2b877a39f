// Epilogue fusion of the activations beyond relu (sigmoid, tanh, gelu, silu, leaky_relu,
// elu, clamp) into conv2d_fused and linear_fused, and of a linear layer's residual add:
// each rewrite's graph text before and after, the optimized graph's values against the
// unoptimized one's, and the cases the pass must leave alone.
#include "ops/epilogue_activations.h"
#include "passes/pass_testing.h"

namespace baton::passes::testing {
namespace {

using baton::testing::epilogue_activations;
using baton::testing::EpilogueActivation;

// A float attribute as graph text prints it: 6.0, 0.2.
std::string float_text(double v) {
  std::string s = str(v);
  return s.find_first_of(".en") == std::string::npos ? s + ".0" : s;
}

// The activation's node in graph text: `%1 = leaky_relu(%0) {negative_slope=0.1}`.
std::string activation_node(const EpilogueActivation& a, const std::string& in, const std::string& type) {
  const std::string op = a.attrs.s("activation");
  std::string attrs;
  for (const auto& [n, v] : a.attrs.items())
    if (n != "activation") attrs += (attrs.empty() ? "" : ", ") + n + "=" + float_text(std::get<double>(v));
  return str("  %1 = ", op, "(", in, ")", attrs.empty() ? "" : " {" + attrs + "}", " : ", type, "   # m.cpp:2\n");
}

// The fused step's activation attributes as graph text prints them.
std::string activation_text(const EpilogueActivation& a) {
  std::string s = str("activation=\"", a.attrs.s("activation"), "\"");
  for (const auto& [n, v] : a.attrs.items())
    if (n != "activation") s += str(", ", n, "=", float_text(std::get<double>(v)));
  return s;
}

TEST(PassFusionActivation, ConvThenEachActivationBecomesOneStep) {
  for (const EpilogueActivation& a : epilogue_activations()) {
    PassCase c("graph @g(%x: f32[2,8,6,6], %w: f32[8,8,3,3], %b: f32[8]) {\n"
               "  %0 = conv2d(%x, %w, %b) {stride=[1,1], padding=[1,1], dilation=[1,1], groups=1} : f32[2,8,6,6]"
               "   # m.cpp:1\n" +
               activation_node(a, "%0", "f32[2,8,6,6]") + "  return %1\n}\n");
    Effect e = c.run_pass("fuse_epilogue");
    EXPECT_EQ(text_of(c.g), "graph @g(%x: f32[2,8,6,6], %w: f32[8,8,3,3], %b: f32[8]) {\n"
                            "  %0 = conv2d_fused(%x, %w, %b) {stride=[1,1], padding=[1,1], dilation=[1,1], groups=1, " +
                                activation_text(a) + ", cache_weights=1} : f32[2,8,6,6] # m.cpp:2\n"
                                                     "  return %0\n}\n")
        << a.name;
    EXPECT_EQ(e.details.size(), 1u);
    // f32: oneDNN's eltwise post-op against baton's element function; the transcendental
    // ones (logistic, tanh, gelu_erf, swish, elu) are approximations on both sides, a few
    // ulps apart, and the fused primitive may sum the 72 products in another order. All
    // measured within 1e-6 + 1e-6 |y| (values up to ~13); 1e-5 as the other fusion tests.
    SCOPED_TRACE(a.name);
    c.expect_close_values(1e-5, 1e-5);
  }
}

TEST(PassFusionActivation, LinearThenEachActivationBecomesOneStep) {
  for (const EpilogueActivation& a : epilogue_activations()) {
    PassCase c("graph @g(%x: f32[3,5], %w: f32[4,5], %b: f32[4]) {\n"
               "  %0 = linear(%x, %w, %b) : f32[3,4]   # m.cpp:1\n" +
               activation_node(a, "%0", "f32[3,4]") + "  return %1\n}\n");
    c.run_pass("fuse_epilogue");
    EXPECT_EQ(text_of(c.g), "graph @g(%x: f32[3,5], %w: f32[4,5], %b: f32[4]) {\n"
                            "  %0 = linear_fused(%x, %w, %b) {" +
                                activation_text(a) + "} : f32[3,4] # m.cpp:2\n  return %0\n}\n")
        << a.name;
    // The step runs the activation op's own element function over the stored product.
    c.expect_same_values();
  }
}

// ResNet's order, add then the activation, on a linear layer: the residual is the fused
// step's fourth input (either operand of the add), then the activation joins it in the
// same pass (before fuse_elementwise could group the activation with what follows).
TEST(PassFusionActivation, LinearResidualAddThenActivationBecomeOneStep) {
  for (const char* add : {"add(%0, %r)", "add(%r, %0)"}) {
    PassCase c(str("graph @g(%x: f32[2,3,5], %w: f32[4,5], %b: f32[4], %r: f32[2,3,4]) {\n"
                   "  %0 = linear(%x, %w, %b) : f32[2,3,4]   # m.cpp:1\n"
                   "  %1 = ", add, " : f32[2,3,4]   # m.cpp:2\n"
                   "  %2 = leaky_relu(%1) {negative_slope=0.2} : f32[2,3,4]   # m.cpp:3\n"
                   "  return %2\n}\n"));
    Effect e = c.run_pass("fuse_epilogue");
    EXPECT_EQ(text_of(c.g), "graph @g(%x: f32[2,3,5], %w: f32[4,5], %b: f32[4], %r: f32[2,3,4]) {\n"
                            "  %0 = linear_fused(%x, %w, %b, %r) {activation=\"leaky_relu\", negative_slope=0.2} "
                            ": f32[2,3,4] # m.cpp:3\n"
                            "  return %0\n}\n");
    EXPECT_EQ(details(e), str("%1 = ", add, " (m.cpp:2) fused into %0 = linear(%x, %w, %b) (m.cpp:1)\n"
                              "%2 = leaky_relu(%1) (m.cpp:3) fused into %1 = linear_fused(%x, %w, %b, %r) (m.cpp:2)\n"));
    c.expect_same_values();  // the add and the activation's functions, in the ops' order
  }
}

// A residual of a linear layer without a bias: a zero bias is added (as for a conv).
TEST(PassFusionActivation, LinearWithoutBiasGetsAZeroOneBesideItsResidual) {
  PassCase c("graph @g(%x: f32[3,5], %w: f32[4,5], %r: f32[3,4]) {\n"
             "  %0 = linear(%x, %w) : f32[3,4]   # m.cpp:1\n"
             "  %1 = add(%0, %r) : f32[3,4]   # m.cpp:2\n"
             "  %2 = gelu(%1) : f32[3,4]   # m.cpp:3\n"
             "  return %2\n}\n");
  c.optimize(Level::O2);
  EXPECT_EQ(text_of(c.g), "graph @g(%x: f32[3,5], %w: f32[4,5], %r: f32[3,4], %k0: f32[4]) {\n"
                          "  %0 = linear_fused(%x, %w, %k0, %r) {activation=\"gelu\"} : f32[3,4] # m.cpp:3\n"
                          "  return %0\n}\n");
  c.expect_same_values();  // adding a zero bias changes no sum (x + 0 == x, -0 aside)
}

TEST(PassFusionActivation, ConvResidualAddThenActivationBecomeOneStep) {
  PassCase c("graph @g(%x: f32[1,8,5,5], %w: f32[8,8,3,3], %b: f32[8], %r: f32[1,8,5,5]) {\n"
             "  %0 = conv2d(%x, %w, %b) {stride=[1,1], padding=[1,1], dilation=[1,1], groups=1} : f32[1,8,5,5]"
             "   # m.cpp:1\n"
             "  %1 = add(%r, %0) : f32[1,8,5,5]   # m.cpp:2\n"
             "  %2 = elu(%1) {alpha=0.5} : f32[1,8,5,5]   # m.cpp:3\n"
             "  return %2\n}\n");
  c.optimize(Level::O2);
  EXPECT_EQ(text_of(c.g), "graph @g(%x: f32[1,8,5,5], %w: f32[8,8,3,3], %b: f32[8], %r: f32[1,8,5,5]) {\n"
                          "  %0 = conv2d_fused(%x, %w, %b, %r) {stride=[1,1], padding=[1,1], dilation=[1,1], "
                          "groups=1, activation=\"elu\", alpha=0.5, cache_weights=1} : f32[1,8,5,5] # m.cpp:3\n"
                          "  return %0\n}\n");
  c.expect_close_values(1e-5, 1e-5);  // as ConvThenEachActivationBecomesOneStep
}

// Left alone: an activation whose input another node reads too (a training graph's gelu,
// whose backward reads it), an activation after an activation, an add after an activation
// (the step applies the add first), a broadcast residual, and a convolution with a
// non-relu activation before a 2x2 max pooling (the pooled kernels apply relu only).
TEST(PassFusionActivation, StepsStayWhereTheKernelCannotApplyTheEpilogue) {
  const std::vector<std::string> kept = {
      "graph @g(%x: f32[3,5], %w: f32[4,5], %g: f32[3,4]) {\n"
      "  %0 = linear(%x, %w) : f32[3,4]\n"
      "  %1 = gelu(%0) : f32[3,4]\n"
      "  %2 = mul(%0, %g) : f32[3,4]\n"
      "  return %1, %2\n}\n",
      "graph @g(%x: f32[3,5], %w: f32[4,5], %r: f32[3,4]) {\n"
      "  %0 = linear_fused(%x, %w) {activation=\"tanh\"} : f32[3,4]\n"
      "  %1 = add(%0, %r) : f32[3,4]\n"
      "  return %1\n}\n",
      "graph @g(%x: f32[3,5], %w: f32[4,5], %r: f32[4]) {\n"
      "  %0 = linear(%x, %w) : f32[3,4]\n"
      "  %1 = add(%0, %r) : f32[3,4]\n"
      "  return %1\n}\n",
  };
  for (const std::string& text : kept) {
    PassCase c(text);
    c.run_pass("fuse_epilogue");
    EXPECT_EQ(text_of(c.g), text_of(graph::parse_graph(text))) << text;
  }
  const std::string pooled =
      "graph @g(%x: f32[1,8,6,6], %w: f32[8,8,3,3], %b: f32[8]) {\n"
      "  %0 = conv2d_fused(%x, %w, %b) {stride=[1,1], padding=[1,1], dilation=[1,1], groups=1, "
      "activation=\"sigmoid\", cache_weights=1} : f32[1,8,6,6]\n"
      "  %1 = max_pool2d_values(%0) {kernel=[2,2], stride=[2,2], padding=[0,0]} : f32[1,8,3,3]\n"
      "  return %1\n}\n";
  PassCase c(pooled);
  c.run_pass("fuse_conv_pool");
  EXPECT_EQ(text_of(c.g), text_of(graph::parse_graph(pooled)));
}

// ONNX's forms: SiLU as x * sigmoid(x), Clip with fixed bounds as minimum(maximum(x, lo),
// hi) (as the importer reads it).
TEST(PassFusionActivation, CompositeSiluAndClipBecomeTheStepsActivation) {
  PassCase silu("graph @g(%x: f32[1,8,5,5], %w: f32[8,8,3,3], %b: f32[8]) {\n"
                "  %0 = conv2d(%x, %w, %b) {stride=[1,1], padding=[1,1], dilation=[1,1], groups=1} : f32[1,8,5,5]"
                "   # m.cpp:1\n"
                "  %1 = sigmoid(%0) : f32[1,8,5,5]   # m.cpp:2\n"
                "  %2 = mul(%1, %0) : f32[1,8,5,5]   # m.cpp:3\n"
                "  return %2\n}\n");
  Effect e = silu.run_pass("fuse_epilogue");
  EXPECT_EQ(text_of(silu.g), "graph @g(%x: f32[1,8,5,5], %w: f32[8,8,3,3], %b: f32[8]) {\n"
                             "  %0 = conv2d_fused(%x, %w, %b) {stride=[1,1], padding=[1,1], dilation=[1,1], "
                             "groups=1, activation=\"silu\", cache_weights=1} : f32[1,8,5,5] # m.cpp:3\n"
                             "  return %0\n}\n");
  EXPECT_EQ(details(e), "%1 = sigmoid(%0) (m.cpp:2) fused into %0 = conv2d(%x, %w, %b) (m.cpp:1)\n"
                        "%2 = mul(%1, %0) (m.cpp:3) fused into %0 = conv2d(%x, %w, %b) (m.cpp:1)\n");
  silu.expect_close_values(1e-5, 1e-5);  // as ConvThenEachActivationBecomesOneStep

  PassCase clip("graph @g(%x: f32[3,5], %w: f32[4,5], %b: f32[4], %lo: f32[], %hi: f32[]) {\n"
                "  %0 = linear(%x, %w, %b) : f32[3,4]   # m.cpp:1\n"
                "  %1 = maximum(%0, %lo) : f32[3,4]   # m.cpp:2\n"
                "  %2 = minimum(%1, %hi) : f32[3,4]   # m.cpp:3\n"
                "  return %2\n}\n",
                {{"lo", full({}, -0.25, f32)}, {"hi", full({}, 0.5, f32)}});
  clip.run_pass("fuse_epilogue");
  EXPECT_EQ(text_of(clip.g), "graph @g(%x: f32[3,5], %w: f32[4,5], %b: f32[4], %lo: f32[], %hi: f32[]) {\n"
                             "  %0 = linear_fused(%x, %w, %b) {activation=\"clamp\", min=-0.25, max=0.5} : f32[3,4] "
                             "# m.cpp:3\n"
                             "  return %0\n}\n");
  clip.expect_same_values();  // clamp's values are maximum's then minimum's for lo <= hi
}

// Kept: bounds that may change (not fixed), lo > hi (clamp would give lo, the ops hi), and
// a sigmoid another node reads too.
TEST(PassFusionActivation, CompositeActivationsStayWhenTheyAreNotTheActivation) {
  const std::string clip =
      "graph @g(%x: f32[3,5], %w: f32[4,5], %lo: f32[], %hi: f32[]) {\n"
      "  %0 = linear(%x, %w) : f32[3,4]\n"
      "  %1 = maximum(%0, %lo) : f32[3,4]\n"
      "  %2 = minimum(%1, %hi) : f32[3,4]\n"
      "  return %2\n}\n";
  const std::string silu =
      "graph @g(%x: f32[3,5], %w: f32[4,5]) {\n"
      "  %0 = linear(%x, %w) : f32[3,4]\n"
      "  %1 = sigmoid(%0) : f32[3,4]\n"
      "  %2 = mul(%0, %1) : f32[3,4]\n"
      "  return %2, %1\n}\n";
  const std::vector<std::pair<std::string, std::map<std::string, Tensor>>> kept = {
      {clip, {}},
      {clip, {{"lo", full({}, 1.0, f32)}, {"hi", full({}, 0.5, f32)}}},
      {silu, {}},
  };
  for (const auto& [text, fixed] : kept) {
    PassCase c(text, fixed);
    c.run_pass("fuse_epilogue");
    EXPECT_EQ(text_of(c.g), text_of(graph::parse_graph(text))) << text;
  }
}

}  // namespace
}  // namespace baton::passes::testing
