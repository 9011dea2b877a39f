// layer_norm and dropout (embedding is in shape_ops_test.cpp, next to index_select).
#include <cmath>

#include "harness/op_harness.h"
#include "dispatch/registry.h"

namespace baton::testing {
namespace {

// Rows of n elements normalized in double: (x - mean) / sqrt(var + eps), then * w + b.
struct NormRef {
  std::vector<double> y, mean, rstd;
};
NormRef normalize_ref(const Tensor& x, int64_t n, double eps) {
  NormRef r;
  r.y = x.to_vector<double>();
  for (size_t row = 0; row < r.y.size() / size_t(n); ++row) {
    double* p = r.y.data() + row * size_t(n);
    double m = 0, v = 0;
    for (int64_t i = 0; i < n; ++i) m += p[i];
    m /= double(n);
    for (int64_t i = 0; i < n; ++i) v += (p[i] - m) * (p[i] - m);
    double inv = 1 / std::sqrt(v / double(n) + eps);
    for (int64_t i = 0; i < n; ++i) p[i] = (p[i] - m) * inv;
    r.mean.push_back(m);
    r.rstd.push_back(inv);
  }
  return r;
}

Tensor layer_norm_ref(const Inputs& in, int64_t n, bool affine) {
  auto y = normalize_ref(in[0], n, 1e-5).y;
  if (affine) {
    auto w = in[1].to_vector<double>(), b = in[2].to_vector<double>();
    for (size_t i = 0; i < y.size(); ++i) y[i] = y[i] * w[i % size_t(n)] + b[i % size_t(n)];
  }
  return tensor(y, in[0].shape());
}

// layer_norm_backward(g, y, rstd) over rows of n: rstd * (g - mean(g) - y * mean(g * y)).
Tensor layer_norm_backward_ref(const Inputs& in, int64_t n) {
  std::vector<double> g = in[0].to_vector<double>(), y = in[1].to_vector<double>(), r = in[2].to_vector<double>();
  std::vector<double> dx(g.size());
  for (size_t row = 0; row < g.size() / size_t(n); ++row) {
    double mg = 0, mgy = 0;
    for (int64_t i = 0; i < n; ++i) {
      mg += g[row * size_t(n) + size_t(i)];
      mgy += g[row * size_t(n) + size_t(i)] * y[row * size_t(n) + size_t(i)];
    }
    mg /= double(n);
    mgy /= double(n);
    for (int64_t i = 0; i < n; ++i) {
      const size_t at = row * size_t(n) + size_t(i);
      dx[at] = r[row] * (g[at] - mg - y[at] * mgy);
    }
  }
  return tensor(dx, in[0].shape());
}

// The gradient op on its own: values, and its gradients (second derivatives) against
// finite differences.
OpCase layer_norm_backward_case(std::string name, Shape shape, Shape stats, int64_t axes) {
  const int64_t n = shape.numel() / stats.numel();
  return OpCase{
      .name = std::move(name),
      .make_inputs = [=] { return Inputs{uniform(shape, -1, 1, 4), uniform(shape, -2, 2, 5), uniform(stats, 0.5, 2, 6)}; },
      .fn = [axes](const Inputs& i) {
        return ops::call(*ops::find_op("layer_norm_backward"), {i[0], i[1], i[2]}, {{"axes", axes}}, SourceLoc::current());
      },
      .reference = [n](const Inputs& i) { return layer_norm_backward_ref(i, n); },
  };
}

std::vector<OpCase> layer_norm_cases() {
  return {
      layer_norm_backward_case("nn.layer_norm_backward/rows", {3, 11}, {3, 1}, 1),
      layer_norm_backward_case("nn.layer_norm_backward/two_dims", {2, 3, 4}, {2, 1, 1}, 2),
      OpCase{
          .name = "nn.layer_norm/affine",
          .make_inputs = [] { return Inputs{uniform({3, 5}, -2, 3), uniform({5}, 0.5, 1.5, 2), uniform({5}, -1, 1, 3)}; },
          .fn = [](const Inputs& i) { return layer_norm(i[0], {5}, i[1], i[2]); },
          .reference = [](const Inputs& i) { return layer_norm_ref(i, 5, true); },
      },
      OpCase{
          // Rows of 8 and more: the variance's eight accumulators and a tail.
          .name = "nn.layer_norm/long_rows",
          .make_inputs = [] { return Inputs{uniform({3, 37}, 100, 103)}; },
          .fn = [](const Inputs& i) { return layer_norm(i[0], {37}); },
          .reference = [](const Inputs& i) { return layer_norm_ref(i, 37, false); },
      },
      OpCase{
          .name = "nn.layer_norm/two_dims",
          .make_inputs = [] { return Inputs{uniform({2, 3, 4})}; },
          .fn = [](const Inputs& i) { return layer_norm(i[0], {3, 4}); },
          .reference = [](const Inputs& i) { return layer_norm_ref(i, 12, false); },
      },
      OpCase{
          // The strided input is copied by the kernel.
          .name = "nn.layer_norm/transposed",
          .make_inputs = [] { return Inputs{uniform({4, 3})}; },
          .fn = [](const Inputs& i) { return layer_norm(i[0].t(), {4}); },
          .reference = [](const Inputs& i) { return layer_norm_ref({i[0].t().contiguous()}, 4, false); },
      },
      OpCase{
          // All three outputs of the op, so the gradients through mean and rstd are checked too.
          .name = "nn.layer_norm/stats",
          .make_inputs = [] { return Inputs{uniform({3, 4})}; },
          .fn = [](const Inputs& i) {
            auto out = ops::call_many(*ops::find_op("layer_norm"), {&i[0], 1},
                                      {{"axes", int64_t(1)}, {"eps", 1e-5}}, SourceLoc::current());
            return out[0] + out[1] * 0.3 + out[2] * 0.7;
          },
          .reference = [](const Inputs& i) {
            NormRef r = normalize_ref(i[0], 4, 1e-5);
            for (size_t k = 0; k < r.y.size(); ++k) r.y[k] += 0.3 * r.mean[k / 4] + 0.7 * r.rstd[k / 4];
            return tensor(r.y, {3, 4});
          },
      },
  };
}

// Dropout reseeds inside fn and reference, so every call draws the same mask.
Tensor dropout_ref(const Tensor& x, double p) {
  manual_seed(7);
  auto u = rand(x.shape(), f64).to_vector<double>(), v = x.to_vector<double>();
  for (size_t i = 0; i < v.size(); ++i) v[i] = u[i] >= p ? v[i] / (1 - p) : 0.0;
  return tensor(v, x.shape());
}

std::vector<OpCase> dropout_cases() {
  return {
      OpCase{
          .name = "nn.dropout/train",
          .make_inputs = [] { return Inputs{uniform({4, 6})}; },
          .fn = [](const Inputs& i) {
            manual_seed(7);
            return dropout(i[0], 0.3, true);
          },
          .reference = [](const Inputs& i) { return dropout_ref(i[0], 0.3); },
          .replayable = false,  // fn seeds the generator, which only the trace does
      },
  };
}

BATON_OP_CASES {
  auto all = layer_norm_cases();
  for (auto& c : dropout_cases()) all.push_back(std::move(c));
  return all;
}

// --- layer_norm ---

TEST(LayerNorm, SecondOrderGradientsMatchFiniteDifferences) {
  // fn(x, w) = d/dx sum(layer_norm(x, w) * r), built with create_graph: its own gradient
  // goes through the gradient rule of layer_norm (and of its mean/rstd outputs).
  Tensor r = uniform({2, 4}, 0.5, 1.5, 9);
  OpFn first_grad = [r](const Inputs& in) {
    bool previous = GradMode::enabled();
    GradMode::set_enabled(true);
    Tensor y = layer_norm(in[0], {4}, in[1]);
    Tensor g = grad({(y * r).sum()}, {in[0]}, {}, true, true)[0];
    GradMode::set_enabled(previous);
    return g;
  };
  EXPECT_TRUE(gradients_match(first_grad, {uniform({2, 4}), uniform({4}, 0.5, 1.5, 2)}, {0, 1},
                              1e-5, 1e-4));
}

TEST(LayerNorm, FloatInputWithLargeMeanStaysAccurate) {
  // |mean| >> spread: a one-pass E[x^2] - E[x]^2 variance in f32 would lose every digit.
  Tensor x64 = uniform({4, 256}, -1, 1, 5) + 1e4;
  Tensor y32 = layer_norm(x64.to(f32), {256});
  Tensor y64 = layer_norm(x64, {256});
  EXPECT_EQ(y32.dtype(), f32);
  EXPECT_ALL_CLOSE(y32, y64, 1e-3, 1e-3);
}

TEST(LayerNorm, LargeBatchRunsInParallelAndMatchesReference) {
  Tensor x = uniform({2000, 64}, -3, 3, 11);
  Tensor y = layer_norm(x, {64});
  EXPECT_ALL_CLOSE(y, layer_norm_ref({x}, 64, false), 1e-12, 1e-10);
}

// The gradient in one pass, rows over threads, in f64 and f32 (the sums in double), and a
// gradient that is not contiguous.
TEST(LayerNorm, GradientOpOverManyRowsMatchesReference) {
  const Inputs in{uniform({600, 517}, -1, 1, 12), uniform({600, 517}, -2, 2, 13), uniform({600, 1}, 0.5, 2, 14)};
  const Tensor want = layer_norm_backward_ref(in, 517);
  auto op = [](const Tensor& g, const Tensor& y, const Tensor& r) {
    return ops::call(*ops::find_op("layer_norm_backward"), {g, y, r}, {{"axes", int64_t(1)}}, SourceLoc::current());
  };
  EXPECT_ALL_CLOSE(op(in[0], in[1], in[2]), want, 1e-12, 1e-10);
  EXPECT_ALL_CLOSE(op(in[0].to(f32), in[1].to(f32), in[2].to(f32)), want, 1e-5, 1e-4);
  EXPECT_ALL_CLOSE(op(in[0].t().contiguous().t(), in[1], in[2]), want, 1e-12, 1e-10);
  EXPECT_THROWS_WITH(ShapeError, op(in[0], in[1], in[1]), "[layer_norm_backward]", "rstd");
}

TEST(LayerNorm, IntegerInputBecomesF32) {
  EXPECT_EQ(layer_norm(tensor({{1, 2, 3}}), {3}).dtype(), f32);
}

TEST(LayerNorm, ShapeErrors) {
  Tensor x = zeros({2, 3});
  int line = __LINE__ + 1;
  EXPECT_THROWS_WITH(ShapeError, layer_norm(x, {2}), "[layer_norm]", "[2]", "[2,3]",
                     "nn_misc_test.cpp:" + std::to_string(line));
  EXPECT_THROWS_WITH(ShapeError, layer_norm(x, {3}, zeros({2})), "[layer_norm]", "weight", "[2]");
  EXPECT_THROWS_WITH(ShapeError, layer_norm(x, {}), "[layer_norm]");
}

// --- dropout ---

TEST(Dropout, IdentityWhenNotTrainingOrPZero) {
  Tensor x = uniform({3, 3});
  EXPECT_TRUE(dropout(x, 0.5, false).same(x));
  EXPECT_TRUE(dropout(x, 0.0, true).same(x));
}

TEST(Dropout, InvalidProbability) {
  Tensor x = zeros({2});
  int line = __LINE__ + 1;
  EXPECT_THROWS_WITH(ValueError, dropout(x, 1.0, true), "[dropout]", "[0, 1)",
                     "nn_misc_test.cpp:" + std::to_string(line));
  EXPECT_THROWS_WITH(ValueError, dropout(x, -0.1, true), "[dropout]");
  EXPECT_THROWS_WITH(ValueError, dropout(x, 1.5, false), "[dropout]");
}

TEST(Dropout, DropsAboutPAndKeepsTheMean) {
  manual_seed(3);
  Tensor x = ones({100000});
  Tensor y = dropout(x, 0.25, true);
  auto v = y.to_vector<float>();
  size_t zeros_seen = 0;
  for (float e : v) {
    if (e == 0) ++zeros_seen;
    else EXPECT_FLOAT_EQ(e, 1 / 0.75f);
  }
  EXPECT_NEAR(double(zeros_seen) / double(v.size()), 0.25, 0.01);
  EXPECT_NEAR(y.mean().item<double>(), 1.0, 0.02);
}

TEST(Dropout, ReproducibleAfterManualSeed) {
  Tensor x = ones({64});
  manual_seed(42);
  auto a = dropout(x, 0.5, true).to_vector<float>();
  auto b = dropout(x, 0.5, true).to_vector<float>();
  manual_seed(42);
  auto c = dropout(x, 0.5, true).to_vector<float>();
  EXPECT_EQ(a, c);
  EXPECT_NE(a, b);
}

TEST(Dropout, GradientUsesTheForwardMask) {
  Tensor x = ones({1000}).requires_grad_();
  Tensor y = dropout(x, 0.4, true);
  y.sum().backward();
  EXPECT_EQ(x.grad().to_vector<float>(), y.to_vector<float>());  // x = 1: y is the mask
  EXPECT_EQ(y.grad_fn_name(), "DropoutBackward");
}

}  // namespace
}  // namespace baton::testing
