// The vectorizable f32 math of kernels/cpu/vmath.h against f64 libm.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <functional>
#include <limits>

#include "kernels/cpu/element_fns.h"
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

float vsin(float x) { return vm::sin(x); }
float vcos(float x) { return vm::cos(x); }
double dsin(double x) { return std::sin(x); }
double dcos(double x) { return std::cos(x); }

// Both reductions: moderate arguments (around the zeros of both, where the reduction's
// precision shows), the step to the large one at 2^20, and the largest floats.
TEST(VMath, SinAndCosRelativeError) {
  for (auto [lo, hi] : {std::pair{-10.0f, 10.0f}, {-1e-3f, 1e-3f}, {3.1415f, 3.1417f}, {1.5707f, 1.5709f},
                        {1e4f, 1.1e4f}, {1.04e6f, 1.06e6f}, {-1e9f, -0.9e9f}, {1e30f, 3e38f}}) {
    EXPECT_LT(max_relative_error(vsin, dsin, lo, hi), 1e-6) << lo << " .. " << hi;
    EXPECT_LT(max_relative_error(vcos, dcos, lo, hi), 1e-6) << lo << " .. " << hi;
  }
}

// Every exponent: random bit patterns of finite floats.
TEST(VMath, SinAndCosOfRandomFloats) {
  double worst = 0;
  uint32_t state = 12345;
  for (int i = 0; i < 2000000; ++i) {
    state = state * 1664525u + 1013904223u;
    const float x = std::bit_cast<float>(state & 0xff7fffffu);  // exponent field below 255
    for (auto [f, ref] : {std::pair{&vsin, &dsin}, {&vcos, &dcos}}) {
      const double want = ref(double(x)), got = double(f(x));
      worst = std::max(worst, want == 0 ? std::abs(got) : std::abs(got - want) / std::abs(want));
    }
  }
  EXPECT_LT(worst, 1e-6);
}

TEST(VMath, SinAndCosEdges) {
  EXPECT_EQ(std::bit_cast<uint32_t>(vm::sin(-0.0f)), std::bit_cast<uint32_t>(-0.0f));
  EXPECT_EQ(vm::sin(std::numeric_limits<float>::denorm_min()), std::numeric_limits<float>::denorm_min());
  EXPECT_EQ(vm::cos(0.0f), 1.0f);
  EXPECT_EQ(vm::cos(-0.0f), 1.0f);
  for (float x : {INFINITY, -INFINITY, NAN}) {
    EXPECT_TRUE(std::isnan(vm::sin(x))) << x;
    EXPECT_TRUE(std::isnan(vm::cos(x))) << x;
  }
}

// The block forms of the ops' kernels and fused programs: sin_moderate's loop, then the
// full function where |x| >= 2^20 (or inf, NaN), over lengths around the 256-element
// chunks, into a separate output and in place: the element function's bits.
TEST(VMath, SinAndCosBlocksGiveTheElementFunctionsBits) {
  std::vector<float> x;
  uint32_t state = 7;
  for (int i = 0; i < 1000; ++i) {
    state = state * 1664525u + 1013904223u;
    x.push_back(i % 97 == 5 ? std::bit_cast<float>(state & 0xff7fffffu) : float(int32_t(state)) * 1e-8f);
  }
  x[300] = INFINITY;
  x[301] = NAN;
  x[302] = 1048576.0f;
  x[303] = -1048575.9f;
  auto check = [&](auto f, const char* name) {
    for (int64_t n : {1, 255, 256, 257, 1000}) {
      std::vector<float> out(size_t(n), 0.0f), in_place(x.begin(), x.begin() + n);
      f.block(out.data(), x.data(), n);
      f.block(in_place.data(), in_place.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        const uint32_t want = std::bit_cast<uint32_t>(f(x[size_t(i)]));
        EXPECT_EQ(std::bit_cast<uint32_t>(out[size_t(i)]), want) << name << " of " << x[size_t(i)];
        EXPECT_EQ(std::bit_cast<uint32_t>(in_place[size_t(i)]), want) << name << " in place of " << x[size_t(i)];
      }
    }
  };
  check(kernels::ew::Sin{}, "sin");
  check(kernels::ew::Cos{}, "cos");
}

}  // namespace
}  // namespace baton
