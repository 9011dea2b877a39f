// batch_norm: training (batch statistics, running-stat updates) and inference.
#include <cmath>

#include "harness/op_harness.h"
#include "kernels/cpu/onednn.h"

namespace baton::testing {
namespace {

struct Stats {
  std::vector<double> mean, var;  // biased var
};
Stats channel_stats(const Tensor& x) {
  const int64_t N = x.size(0), C = x.size(1), inner = x.numel() / (N * C);
  auto v = x.contiguous().to_vector<double>();
  Stats s{std::vector<double>(size_t(C)), std::vector<double>(size_t(C))};
  for (int64_t c = 0; c < C; ++c) {
    std::vector<double> vals;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < inner; ++k) vals.push_back(v[size_t((n * C + c) * inner + k)]);
    double m = 0, q = 0;
    for (double e : vals) m += e;
    m /= double(vals.size());
    for (double e : vals) q += (e - m) * (e - m);
    s.mean[size_t(c)] = m;
    s.var[size_t(c)] = q / double(vals.size());
  }
  return s;
}

// Inputs: x, running_mean, running_var, weight, bias.
Tensor ref_bn(const Inputs& in, bool training, double eps = 1e-5) {
  const Tensor& x = in[0];
  const int64_t N = x.size(0), C = x.size(1), inner = x.numel() / (N * C);
  Stats s = training ? channel_stats(x) : Stats{in[1].to_vector<double>(), in[2].to_vector<double>()};
  auto v = x.contiguous().to_vector<double>(), w = in[3].to_vector<double>(), b = in[4].to_vector<double>();
  for (size_t i = 0; i < v.size(); ++i) {
    size_t c = size_t((int64_t(i) / inner) % C);
    v[i] = (v[i] - s.mean[c]) / std::sqrt(s.var[c] + eps) * w[c] + b[c];
  }
  return tensor(v, x.shape());
}

OpCase bn_case(std::string name, Shape x, bool training) {
  const int64_t C = x[1];
  return OpCase{
      .name = "nn.batch_norm/" + name,
      .make_inputs =
          [=] {
            return Inputs{uniform(x, -2, 2, 1), uniform({C}, -0.5, 0.5, 2), uniform({C}, 0.5, 1.5, 3),
                          uniform({C}, 0.5, 1.5, 4), uniform({C}, -1, 1, 5)};
          },
      .fn = [training](const Inputs& i) {
        return batch_norm(i[0], i[1].clone(), i[2].clone(), i[3], i[4], training);
      },
      .reference = [training](const Inputs& i) { return ref_bn(i, training); },
      .grad_inputs = {0, 3, 4},
      .covers = {"batch_norm_backward"},
  };
}

BATON_OP_CASES {
  return {
      bn_case("training_4d", {3, 2, 3, 2}, true),
      bn_case("training_2d", {5, 3}, true),
      bn_case("inference_4d", {2, 3, 2, 2}, false),
  };
}

TEST(BatchNorm, TrainingUpdatesRunningStatsLikePyTorch) {
  for (DType t : {f64, f32}) {
    Tensor x = uniform({4, 3, 2, 2}, -2, 2, 9).to(t);
    Tensor rm = zeros({3}, t), rv = ones({3}, t);
    Stats s = channel_stats(x);
    (void)batch_norm(x, rm, rv, ones({3}, t), zeros({3}, t), true, 0.1);
    const double n = 16;
    for (size_t c = 0; c < 3; ++c) {
      EXPECT_NEAR(rm.to_vector<double>()[c], 0.1 * s.mean[c], 1e-6);
      EXPECT_NEAR(rv.to_vector<double>()[c], 0.9 + 0.1 * s.var[c] * n / (n - 1), 1e-6);
    }
  }
}

TEST(BatchNorm, MissingAffineAndStatsAreOptional) {
  Tensor x = uniform({4, 2, 3}, -1, 1, 2);
  Tensor y = batch_norm(x, {}, {}, {}, {}, false);  // no running stats: batch statistics
  Inputs in{x, zeros({2}, f64), ones({2}, f64), ones({2}, f64), zeros({2}, f64)};
  EXPECT_ALL_CLOSE(y, ref_bn(in, true), 1e-10, 1e-8);
}

// y, then the gradients of sum(y * gy) for x, weight and bias, all computed in dtype t;
// the running statistics after the update come last.
std::vector<Tensor> bn_run(const Tensor& x, const Tensor& gy, bool training, DType t) {
  const int64_t C = x.size(1);
  Tensor xt = x.to(t).detach().requires_grad_();
  Tensor w = uniform({C}, 0.5, 1.5, 11).to(t).requires_grad_(), b = uniform({C}, -1, 1, 12).to(t).requires_grad_();
  Tensor rm = uniform({C}, -0.5, 0.5, 13).to(t), rv = uniform({C}, 0.5, 1.5, 14).to(t);
  Tensor y = batch_norm(xt, rm, rv, w, b, training, 0.1);
  (y * gy.to(t)).sum().backward();
  return {y, xt.grad(), w.grad(), b.grad(), rm, rv};
}

// f32 takes oneDNN where that pays ([N, C] always, images for the training forward),
// f64 the loops: both must agree, channel counts off the 8/16 block included.
TEST(BatchNorm, F32AgreesWithF64) {
  for (Shape s : {Shape{4, 3, 5, 7}, Shape{8, 13, 6, 6}, Shape{2, 16, 3, 3}, Shape{6, 5, 9}, Shape{16, 20},
                  Shape{7, 3}}) {
    for (bool training : {true, false}) {
      SCOPED_TRACE(str(s, training ? " training" : " inference"));
      Tensor x = uniform(s, -2, 3, 1), gy = uniform(s, -1, 1, 2);
      auto r32 = bn_run(x, gy, training, f32), r64 = bn_run(x, gy, training, f64);
      const char* what[] = {"y", "gx", "gweight", "gbias", "running_mean", "running_var"};
      for (size_t i = 0; i < r32.size(); ++i) EXPECT_ALL_CLOSE(r32[i], r64[i], 1e-4, 1e-4) << what[i];
    }
  }
}

// The ResNet-like batch norm must get optimized oneDNN kernels and agree with f64.
TEST(BatchNorm, ResNetShapeUsesOptimizedKernels) {
  kernels::onednn::clear_reference_impls();
  for (Shape s : {Shape{8, 64, 56, 56}, Shape{64, 512}}) {
    Tensor x = uniform(s, -2, 3, 1), gy = uniform(s, -1, 1, 2);
    auto r32 = bn_run(x, gy, true, f32), r64 = bn_run(x, gy, true, f64);
    for (size_t i = 0; i < r32.size(); ++i) EXPECT_ALL_CLOSE(r32[i], r64[i], 1e-3, 1e-3) << i;
    (void)bn_run(x, gy, false, f32);
  }
  std::string refs, created;
  for (auto& r : kernels::onednn::reference_impls()) refs += r + "\n";
  EXPECT_EQ(refs, "");
  for (auto& c : kernels::onednn::created_impls()) created += c + "\n";
  for (const char* what : {"batch_norm forward [8,64,56,56] -> bnorm_jit", "batch_norm forward [64,512] -> bnorm",
                           "batch_norm backward [64,512] -> bnorm", "batch_norm inference [64,512] -> bnorm"})
    EXPECT_NE(created.find(what), std::string::npos) << what << "\n" << created;
}

TEST(BatchNorm, ErrorsNameOpShapesAndLine) {
  int line = __LINE__ + 1;
  EXPECT_THROWS_WITH(ShapeError, batch_norm(zeros({2, 3, 4}), zeros({4}), ones({4}), ones({3}), zeros({3}), true),
                     "[batch_norm]", "[2,3,4]", "[4]", "batch_norm_test.cpp:" + std::to_string(line));
  EXPECT_THROWS_WITH(ValueError, batch_norm(zeros({1, 3}), zeros({3}), ones({3}), ones({3}), zeros({3}), true),
                     "[batch_norm]", "more than one value");
}

}  // namespace
}  // namespace baton::testing
