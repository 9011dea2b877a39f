// cross_entropy, nll_loss and mse_loss against PyTorch values and naive loops in double.
#include <cmath>

#include "harness/op_harness.h"

namespace baton::testing {
namespace {

// Per-row losses of x [N, C] against targets, reduced as `reduction` says.
Tensor class_loss_ref(const Tensor& x, const Tensor& target, const std::string& reduction, bool softmax) {
  const int64_t n = x.shape()[0], c = x.shape()[1];
  auto v = x.to_vector<double>();
  auto t = target.to_vector<int64_t>();
  std::vector<double> rows;
  for (int64_t i = 0; i < n; ++i) {
    double lse = 0;
    for (int64_t j = 0; j < c; ++j) lse += std::exp(v[size_t(i * c + j)]);
    double picked = v[size_t(i * c + t[size_t(i)])];
    rows.push_back(softmax ? std::log(lse) - picked : -picked);
  }
  if (reduction == "none") return tensor(rows, {n});
  double total = 0;
  for (double r : rows) total += r;
  return scalar_tensor(reduction == "mean" ? total / double(n) : total);
}

OpCase class_case(std::string name, bool softmax, std::string reduction) {
  return OpCase{
      .name = name,
      .make_inputs = [] { return Inputs{uniform({5, 4}, -3, 3, 31), tensor<int64_t>({3, 0, 1, 3, 2})}; },
      .fn = [softmax, reduction](const Inputs& in) {
        return softmax ? cross_entropy(in[0], in[1], reduction) : nll_loss(in[0], in[1], reduction);
      },
      .reference = [softmax, reduction](const Inputs& in) {
        return class_loss_ref(in[0], in[1], reduction, softmax);
      },
  };
}

OpCase mse_case(std::string name, std::string reduction) {
  return OpCase{
      .name = name,
      .make_inputs = [] { return Inputs{uniform({2, 3, 2}, -1, 1, 41), uniform({2, 3, 2}, -1, 1, 42)}; },
      .fn = [reduction](const Inputs& in) { return mse_loss(in[0], in[1], reduction); },
      .reference = [reduction](const Inputs& in) {
        auto a = in[0].to_vector<double>(), b = in[1].to_vector<double>();
        double total = 0;
        for (size_t i = 0; i < a.size(); ++i) total += (a[i] - b[i]) * (a[i] - b[i]);
        return scalar_tensor(reduction == "mean" ? total / double(a.size()) : total);
      },
  };
}

BATON_OP_CASES {
  return {
      torch_case("loss.cross_entropy/torch_mean", "cross_entropy_mean",
                 [](const Inputs& in) { return cross_entropy(in[0], in[1]); }),
      torch_case("loss.cross_entropy/torch_none", "cross_entropy_none",
                 [](const Inputs& in) { return cross_entropy(in[0], in[1], "none"); }),
      class_case("loss.cross_entropy/sum", true, "sum"),
      class_case("loss.cross_entropy/none", true, "none"),
      torch_case("loss.nll_loss/torch_sum", "nll_loss_sum",
                 [](const Inputs& in) { return nll_loss(in[0], in[1], "sum"); }),
      class_case("loss.nll_loss/mean", false, "mean"),
      class_case("loss.nll_loss/none", false, "none"),
      torch_case("loss.mse_loss/torch_mean", "mse_loss_mean",
                 [](const Inputs& in) { return mse_loss(in[0], in[1]); }),
      mse_case("loss.mse_loss/sum", "sum"),
  };
}

TEST(Loss, CrossEntropyIsNllOfLogSoftmaxWithTheSameGradient) {
  Tensor x = uniform({4, 6}, -2, 2, 5).to(f32).requires_grad_();
  Tensor t = tensor<int64_t>({5, 0, 2, 2});
  Tensor a = cross_entropy(x, t);
  a.backward();
  Tensor ga = x.grad();
  x.zero_grad();
  Tensor b = nll_loss(log_softmax(x, 1), t);
  b.backward();
  EXPECT_NEAR(a.item<float>(), b.item<float>(), 1e-6);
  EXPECT_ALL_CLOSE(ga, x.grad(), 1e-7, 1e-6);
  EXPECT_EQ(a.dtype(), f32);
  EXPECT_EQ(a.shape(), Shape({}));
}

TEST(Loss, CrossEntropyIsStableForLargeLogits) {
  Tensor x = tensor({{1000.0f, 0.0f}, {0.0f, -1000.0f}});
  Tensor t = tensor<int64_t>({1, 0});
  auto v = cross_entropy(x, t, "none").to_vector<float>();
  EXPECT_NEAR(v[0], 1000.0, 1e-3);
  EXPECT_NEAR(v[1], 0.0, 1e-6);
}

// The kernel takes rows a block of ~4096 elements at a time (several blocks of 409 rows of
// ten classes; rows longer than a block one at a time), in f32 and f64.
TEST(Loss, CrossEntropyOverManyRowsOrLongRowsMatchesTheF64Loops) {
  for (auto [rows, classes] : {std::pair<int64_t, int64_t>{1000, 10}, {3, 5000}})
    for (DType dtype : {f32, f64}) {
      Tensor x = uniform({rows, classes}, -8, 8, 7).to(dtype);
      Tensor t = randint(0, classes, {rows});
      const double tolerance = dtype == f32 ? 1e-5 : 1e-12;
      for (const char* reduction : {"none", "mean"})
        EXPECT_ALL_CLOSE(cross_entropy(x, t, reduction), class_loss_ref(x, t, reduction, true).to(dtype), tolerance,
                         tolerance)
            << rows << "x" << classes << " " << dtype << " " << reduction;
    }
}

TEST(Loss, I32TargetsAreAccepted) {
  Tensor x = zeros({2, 4});
  EXPECT_NEAR(cross_entropy(x, tensor({1, 3})).item<float>(), std::log(4.0), 1e-6);
}

TEST(Loss, TargetOutOfRangeNamesOpValueAndLine) {
  Tensor x = zeros({3, 4});
  int line = __LINE__ + 1;
  EXPECT_THROWS_WITH(IndexError, cross_entropy(x, tensor<int64_t>({0, 4, 1})), "[cross_entropy]",
                     "target 4", "[0, 4)", "loss_test.cpp:" + std::to_string(line));
  line = __LINE__ + 1;
  EXPECT_THROWS_WITH(IndexError, nll_loss(x, tensor<int64_t>({-1, 0, 1})), "[nll_loss]", "target -1",
                     "loss_test.cpp:" + std::to_string(line));
}

TEST(Loss, BadShapesDtypesAndReductions) {
  Tensor x = zeros({3, 4});
  EXPECT_THROWS_WITH(ShapeError, cross_entropy(x, tensor<int64_t>({0, 1})), "[cross_entropy]",
                     "[3,4]", "[2]", "loss_test.cpp:");
  EXPECT_THROWS_WITH(ShapeError, nll_loss(zeros({4}), tensor<int64_t>({0})), "[nll_loss]", "[N, C]",
                     "loss_test.cpp:");
  EXPECT_THROWS_WITH(DTypeError, cross_entropy(x, zeros({3})), "[cross_entropy]", "i64", "loss_test.cpp:");
  EXPECT_THROWS_WITH(DTypeError, cross_entropy(tensor({{1, 2}}), tensor<int64_t>({0})), "[cross_entropy]",
                     "loss_test.cpp:");
  EXPECT_THROWS_WITH(ValueError, cross_entropy(x, tensor<int64_t>({0, 1, 2}), "avg"), "[cross_entropy]",
                     "avg", "loss_test.cpp:");
  EXPECT_THROWS_WITH(ShapeError, mse_loss(x, zeros({4})), "[mse_loss]", "[3,4]", "[4]", "loss_test.cpp:");
  EXPECT_THROWS_WITH(ValueError, mse_loss(x, x, "max"), "[mse_loss]", "loss_test.cpp:");
}

TEST(Loss, MseNoneKeepsTheShape) {
  Tensor a = tensor({{1.0f, 2.0f}}), b = tensor({{0.0f, 4.0f}});
  EXPECT_EQ(mse_loss(a, b, "none").to_vector<float>(), (std::vector<float>{1, 4}));
}

}  // namespace
}  // namespace baton::testing
