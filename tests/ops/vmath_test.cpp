// The vectorizable f32 math of kernels/cpu/vmath.h against f64 libm.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "kernels/cpu/vmath.h"

namespace baton {
namespace {

// Largest relative error of f over n points evenly spread on [lo, hi] (f32 inputs).
double max_relative_error(float (*f)(float), double (*ref)(double), float lo, float hi,
                          int n = 200001) {
  double worst = 0;
  for (int i = 0; i < n; ++i) {
    float x = lo + (hi - lo) * float(i) / float(n - 1);
    double want = ref(double(x));
    double got = double(f(x));
    double err = want == 0 ? std::abs(got) : std::abs(got - want) / std::abs(want);
    worst = std::max(worst, err);
  }
  return worst;
}

float vexp(float x) { return vm::exp(x); }
float vtanh(float x) { return vm::tanh(x); }
float verf(float x) { return vm::erf(x); }
float vsigmoid(float x) { return vm::sigmoid(x); }
double dexp(double x) { return std::exp(x); }
double dtanh(double x) { return std::tanh(x); }
double derf(double x) { return std::erf(x); }
double dsigmoid(double x) { return 1 / (1 + std::exp(-x)); }

TEST(VMath, ExpRelativeError) {
  EXPECT_LT(max_relative_error(vexp, dexp, -87.3f, 88.7f), 1e-6);
  EXPECT_LT(max_relative_error(vexp, dexp, -1e-3f, 1e-3f), 1e-6);
}

TEST(VMath, ExpEdges) {
  EXPECT_EQ(vm::exp(0.0f), 1.0f);
  EXPECT_EQ(vm::exp(100.0f), INFINITY);
  EXPECT_EQ(vm::exp(INFINITY), INFINITY);
  EXPECT_EQ(vm::exp(-100.0f), 0.0f);
  EXPECT_EQ(vm::exp(-INFINITY), 0.0f);
  EXPECT_TRUE(std::isnan(vm::exp(NAN)));
  EXPECT_TRUE(std::isfinite(vm::exp(88.72f)));
}

TEST(VMath, TanhRelativeError) {
  EXPECT_LT(max_relative_error(vtanh, dtanh, -10, 10), 1e-6);
  EXPECT_LT(max_relative_error(vtanh, dtanh, -1e-3f, 1e-3f), 1e-6);
  EXPECT_EQ(vm::tanh(50.0f), 1.0f);
  EXPECT_EQ(vm::tanh(-INFINITY), -1.0f);
  EXPECT_TRUE(std::isnan(vm::tanh(NAN)));
}

TEST(VMath, ErfRelativeError) {
  EXPECT_LT(max_relative_error(verf, derf, -6, 6), 1e-6);
  EXPECT_LT(max_relative_error(verf, derf, -1e-3f, 1e-3f), 1e-6);
  EXPECT_EQ(vm::erf(INFINITY), 1.0f);
  EXPECT_TRUE(std::isnan(vm::erf(NAN)));
}

TEST(VMath, SigmoidRelativeError) {
  EXPECT_LT(max_relative_error(vsigmoid, dsigmoid, -80, 30), 1e-6);
  EXPECT_EQ(vm::sigmoid(100.0f), 1.0f);
  EXPECT_EQ(vm::sigmoid(-100.0f), 0.0f);
}

float vlog(float x) { return vm::log(x); }
double dlog(double x) { return std::log(x); }

// Across the normal range in pieces (each spans its own octaves), around 1, and denormals.
TEST(VMath, LogRelativeError) {
  EXPECT_LT(max_relative_error(vlog, dlog, 1e-3f, 10), 1e-6);
  EXPECT_LT(max_relative_error(vlog, dlog, 10, 1e6f), 1e-6);
  EXPECT_LT(max_relative_error(vlog, dlog, 1e30f, 3e38f), 1e-6);
  EXPECT_LT(max_relative_error(vlog, dlog, 1e-30f, 1e-25f), 1e-6);
  EXPECT_LT(max_relative_error(vlog, dlog, 0.999f, 1.001f), 1e-6);
  EXPECT_LT(max_relative_error(vlog, dlog, 1e-44f, 1e-38f), 1e-6);
  EXPECT_EQ(vm::log(1.0f), 0.0f);
  EXPECT_EQ(vm::log(0.0f), -INFINITY);
  EXPECT_EQ(vm::log(-0.0f), -INFINITY);
  EXPECT_EQ(vm::log(INFINITY), INFINITY);
  EXPECT_TRUE(std::isnan(vm::log(-1.0f)));
  EXPECT_TRUE(std::isnan(vm::log(-INFINITY)));
  EXPECT_TRUE(std::isnan(vm::log(NAN)));
  EXPECT_EQ(vm::log(std::numeric_limits<float>::denorm_min()), float(std::log(double(std::numeric_limits<float>::denorm_min()))));
}

float vlog1p(float x) { return vm::log1p_unit(x); }
double dlog1p(double x) { return std::log1p(x); }

TEST(VMath, Log1pOnTheUnitInterval) {
  EXPECT_LT(max_relative_error(vlog1p, dlog1p, 0, 1), 1e-6);
  EXPECT_LT(max_relative_error(vlog1p, dlog1p, 0, 1e-4f), 1e-6);
  EXPECT_EQ(vm::log1p_unit(0.0f), 0.0f);
}

}  // namespace
}  // namespace baton
