// Anomaly mode: a NaN or Inf made by any op, forward or backward, eager or planned, is an
// error naming the op and the user's line; off, nothing is checked.
#include <gtest/gtest.h>

#include <cmath>

#include <baton/baton.h>

#include "harness/op_harness.h"

namespace baton {
namespace {

TEST(Anomaly, OffByDefaultNaNsFlowThrough) {
  EXPECT_FALSE(anomaly_detection_enabled());
  Tensor y = log(tensor({-1.0f, 1.0f}));
  EXPECT_TRUE(std::isnan(y.to_vector<float>()[0]));
}

TEST(Anomaly, TheGuardRestoresWhatItFound) {
  {
    const DetectAnomalyGuard outer;
    {
      const DetectAnomalyGuard inner;
      EXPECT_TRUE(anomaly_detection_enabled());
    }
    EXPECT_TRUE(anomaly_detection_enabled());  // still the outer guard's
  }
  EXPECT_FALSE(anomaly_detection_enabled());
}

TEST(Anomaly, ForwardNaNNamesTheOpAndTheLine) {
  DetectAnomalyGuard on;
  EXPECT_THROWS_WITH(RuntimeError, log(tensor({1.0f, -1.0f})),
                     "[log] anomaly detected: output 0 (f32[2]) holds NaN at flat index 1", "anomaly_test.cpp");
  EXPECT_THROWS_WITH(RuntimeError, (void)(tensor({1.0, 2.0}) / tensor({1.0, 0.0})), "[div]", "holds Inf");
}

TEST(Anomaly, BackwardNaNNamesTheForwardCall) {
  DetectAnomalyGuard on;
  // sqrt(0) is fine forward; its gradient 0.5/sqrt(0) is Inf, and times 0 it is NaN.
  Tensor x = tensor({0.0f, 4.0f}).requires_grad_();
  Tensor y = (sqrt(x) * tensor({0.0f, 1.0f})).sum();  const int forward_line = __LINE__;
  EXPECT_THROWS_WITH(RuntimeError, y.backward(),
                     "in the backward of 'sqrt' (forward called at anomaly_test.cpp:" + std::to_string(forward_line) + ")");
}

TEST(Anomaly, PlannedRunsNameTheNodeAndItsLine) {
  DetectAnomalyGuard on;
  Graph g;
  Tensor x = g.placeholder(f32, {2}, "x");
  Tensor y = log(x) * 2.0f;  const int line = __LINE__;
  Session s(g);
  EXPECT_NO_THROW(s.run({y}, {{x, tensor({1.0f, 2.0f})}}));
  EXPECT_THROWS_WITH(RuntimeError, s.run({y}, {{x, tensor({1.0f, -2.0f})}}), "[log] anomaly detected",
                     "built at anomaly_test.cpp:" + std::to_string(line));
}

TEST(Anomaly, CompiledRunsToo) {
  DetectAnomalyGuard on;
  auto f = compile([](const Tensor& x) { return sqrt(x) + 1.0f; });
  EXPECT_NO_THROW(f(ones({3})));
  EXPECT_THROWS_WITH(RuntimeError, f(-ones({3})), "[sqrt] anomaly detected");
}

TEST(Anomaly, OptimizerUpdatesWritingInfAreCaught) {
  DetectAnomalyGuard on;
  Tensor w = ones({3}).requires_grad_();
  optim::SGD opt({w}, {.lr = 1e38});
  (w * 1e30f).sum().backward();
  EXPECT_THROWS_WITH(RuntimeError, opt.step(), "updated in place");
}

}  // namespace
}  // namespace baton
