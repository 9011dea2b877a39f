// resize (src/ops/resize.cpp): values against index_select and interpolation matrices
// written out by hand, gradients against finite differences (resize_backward), errors that
// name the op. In a graph: constant scales keep symbolic dims as products (2*h); fed scales
// make the dims fresh symbols that one session binds per run (resize_by_values).
// tests/io/onnx_resize_test.cpp checks the ONNX modes on hand-built models.
#include <gtest/gtest.h>

#include <cmath>

#include "baton/baton.h"
#include "harness/op_harness.h"

namespace baton::testing {
namespace {

Tensor values(std::vector<double> v) {
  const auto n = int64_t(v.size());
  return tensor(v, Shape{n});
}
Tensor sizes(std::vector<int64_t> v) {
  const auto n = int64_t(v.size());
  return tensor(v, Shape{n});
}
Tensor matrix(std::vector<double> v, int64_t rows, int64_t cols) { return tensor(v, Shape{rows, cols}); }

OpCase resize_case(const std::string& what, std::function<Inputs()> make, ResizeOptions o, OpFn reference) {
  OpCase c;
  c.name = str("resize.resize/", what);
  c.make_inputs = std::move(make);
  c.fn = [o](const Inputs& in) { return resize(in[0], in[1], o, in.size() > 2 ? in[2] : Tensor()); };
  c.reference = std::move(reference);
  c.grad_inputs = {0};
  c.covers = {"resize_backward", "resize_by_values"};
  return c;
}

ResizeOptions linear(std::string coordinates) {
  ResizeOptions o;
  o.mode = "linear";
  o.coordinates = std::move(coordinates);
  return o;
}

BATON_OP_CASES {
  // half_pixel 2 -> 4: sources -0.25, 0.25, 0.75, 1.25 round (prefer floor) to 0, 0, 1, 1.
  OpCase nearest = resize_case(
      "nearest_half_pixel_2x", [] { return Inputs{uniform({1, 2, 2, 3}, -2, 2, 1), values({1, 1, 2, 2})}; }, {},
      [](const Inputs& in) {
        return index_select(index_select(in[0], 2, sizes({0, 0, 1, 1})), 3, sizes({0, 0, 1, 1, 2, 2}));
      });
  // align_corners 3 -> 5: sources 0, 0.5, 1, 1.5, 2.
  OpCase corners = resize_case(
      "linear_align_corners_sizes", [] { return Inputs{uniform({2, 1, 3}, -2, 2, 2), sizes({2, 1, 5})}; },
      linear("align_corners"), [](const Inputs& in) {
        const Tensor m = matrix({1, 0, 0, .5, .5, 0, 0, 1, 0, 0, .5, .5, 0, 0, 1}, 5, 3);
        return matmul(in[0], m.t());
      });
  // half_pixel 4 -> 2 on both axes: sources 0.5 and 2.5, the means of neighbour pairs.
  OpCase halves = resize_case(
      "linear_half_pixel_down", [] { return Inputs{uniform({1, 4, 4}, -2, 2, 3), values({1, 0.5, 0.5})}; },
      linear("half_pixel"), [](const Inputs& in) {
        const Tensor m = matrix({.5, .5, 0, 0, 0, 0, .5, .5}, 2, 4);
        return matmul(matmul(m, in[0]), m.t());
      });
  // Keys' weights sum to 1, edge-clamped or not: a constant stays that constant.
  ResizeOptions cubic;
  cubic.mode = "cubic";
  OpCase flat = resize_case(
      "cubic_keeps_a_constant", [] { return Inputs{full({1, 1, 3, 4}, 2.5, f64), values({1, 1, 2, 1.5})}; }, cubic,
      [](const Inputs&) { return full({1, 1, 6, 6}, 2.5, f64); });
  flat.atol = 1e-12;
  // roi [-0.5, 1.5] of a width of 3: sources -1, 1, 3; the outer two take the extrapolation.
  ResizeOptions crop = linear("tf_crop_and_resize");
  crop.extrapolation = 7;
  OpCase cropped = resize_case(
      "tf_crop_and_resize",
      [] { return Inputs{uniform({2, 3}, -2, 2, 4), sizes({2, 3}), values({0, -0.5, 1, 1.5})}; }, crop,
      [](const Inputs& in) {
        const Tensor seven = full({2, 1}, 7.0, f64);
        return cat({seven, index_select(in[0], 1, sizes({1})), seven}, 1);
      });
  // Sizes in a constant (not an input): a graph's node is `resize`, its dims known.
  OpCase constant = resize_case(
      "linear_align_corners_constant_sizes", [] { return Inputs{uniform({2, 3}, -2, 2, 5)}; }, {}, corners.reference);
  constant.fn = [](const Inputs& in) { return resize(in[0], sizes({2, 5}), linear("align_corners")); };
  return {nearest, corners, halves, flat, cropped, constant};
}

// Nearest resizing moves elements: integers too, exactly.
TEST(Resize, NearestCopiesIntegers) {
  const Tensor x = tensor(std::vector<int64_t>{1, 2, 3, 4}, Shape{2, 2});
  const Tensor y = resize(x, values({1, 2}));
  EXPECT_EQ(y.dtype(), DType::i64);
  EXPECT_EQ(y.to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 2, 2, 3, 3, 4, 4}));
}

TEST(Resize, BadInputsAreErrorsNamingTheOp) {
  const Tensor x = zeros({2, 3});
  EXPECT_TRUE(throws_with<ShapeError>([&] { resize(x, values({2})); }, {"[resize]", "one scale or size per dim"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { resize(x, values({1, -2})); }, {"[resize]", "must be positive"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { resize(x, sizes({2, int64_t(1) << 30})); }, {"[resize]", "output size"}));
  EXPECT_TRUE(throws_with<DTypeError>([&] { resize(x, zeros({2}, DType::b8)); }, {"[resize]", "scales (floats)"}));
  EXPECT_TRUE(throws_with<DTypeError>(
      [&] { resize(zeros({2, 3}, i64), values({1, 2}), linear("half_pixel")); }, {"[resize]", "floating input"}));
  ResizeOptions odd;
  odd.coordinates = "sideways";
  EXPECT_TRUE(throws_with<ValueError>([&] { resize(x, values({1, 2}), odd); }, {"[resize]", "'sideways'"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { resize(zeros({0, 3}), sizes({2, 3})); }, {"[resize]", "empty dim 0"}));
}

// A NaN in the roi makes NaN coordinates: NaN values, never an index outside x.
TEST(Resize, NanRoiGivesNanValues) {
  ResizeOptions crop = linear("tf_crop_and_resize");
  const Tensor y = resize(ones({1, 3}), sizes({1, 3}), crop, values({0, std::nan(""), 1, 1}));
  EXPECT_TRUE(std::isnan(y.to_vector<float>()[1]));
}

// Constant scales on symbolic dims: a whole scale multiplies the symbol (2*h), a scale of 1
// keeps it; the graph runs any size, and matches eager resizing.
TEST(Resize, ConstantScalesKeepSymbolicDims) {
  Graph g("resize_sym");
  Tensor x = g.placeholder(f32, {"n", 1, "h", "w"}, "x");
  Tensor y = resize(x, values({1, 1, 2, 3}), linear("half_pixel"));
  EXPECT_EQ(y.shape()[0], sym::named("n"));
  EXPECT_EQ(y.shape()[2], sym::mul(2, sym::named("h")));
  EXPECT_EQ(y.shape()[3], sym::mul(3, sym::named("w")));
  Session sess(g);
  for (Shape s : {Shape{1, 1, 2, 3}, Shape{2, 1, 5, 1}}) {
    const Tensor xv = uniform(s, -1, 1, 7).to(f32);
    EXPECT_ALL_CLOSE(sess.run({y}, {{x, xv}})[0], resize(xv, values({1, 1, 2, 3}), linear("half_pixel")), 0, 0);
  }
}

// Scales fed to the graph: the output dims are symbols only a run knows (resize_by_values),
// and later steps are planned once they are bound.
TEST(Resize, FedScalesAreReadWhenTheGraphRuns) {
  Graph g("resize_fed");
  Tensor x = g.placeholder(f32, {1, 1, 2, 2}, "x");
  Tensor s = g.placeholder(f64, {4}, "s");
  Tensor y = resize(x, s, linear("align_corners"));
  Tensor total = sum(y * 2.0f);
  EXPECT_TRUE(sym::is_symbol(y.shape()[2]) && sym::is_symbol(y.shape()[3]));
  EXPECT_NE(g.to_text().find("resize_by_values("), std::string::npos) << g.to_text();
  const Tensor xv = tensor(std::vector<float>{0, 1, 2, 3}, Shape{1, 1, 2, 2});
  for (OptLevel level : {OptLevel::O0, OptLevel::O2}) {
    Session sess(g, {.level = level});
    for (std::vector<double> scales : {std::vector<double>{1, 1, 2, 2}, {1, 1, 1.5, 3}}) {
      const Tensor want = resize(xv, values(scales), linear("align_corners"));
      std::vector<Tensor> got = sess.run({y, total}, {{x, xv}, {s, values(scales)}});
      EXPECT_ALL_CLOSE(got[0], want, 0, 0);
      EXPECT_ALL_CLOSE(got[1], sum(want * 2.0f), 1e-5, 1e-6);
    }
  }
}

// The gradient of a resize whose scales are fed: resize_backward reads them as it runs.
TEST(Resize, GradientOfAFedScaleResize) {
  Graph g("resize_grad");
  Tensor x = g.placeholder(f64, {1, 3}, "x");
  Tensor s = g.placeholder(f64, {2}, "s");
  Tensor dx = grad({sum(resize(x, s, linear("half_pixel")) * 3.0)}, {x})[0];
  Session sess(g);
  for (std::vector<double> scales : {std::vector<double>{1, 2}, {2, 0.7}}) {
    Tensor xv = uniform({1, 3}, -1, 1, 3).requires_grad_();
    sum(resize(xv, values(scales), linear("half_pixel")) * 3.0).backward();
    EXPECT_ALL_CLOSE(sess.run({dx}, {{x, xv.detach()}, {s, values(scales)}})[0], xv.grad(), 1e-12, 0);
  }
}

}  // namespace
}  // namespace baton::testing
