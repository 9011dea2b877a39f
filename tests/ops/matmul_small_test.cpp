// f32 products of at most kSmallProductMacs multiply-adds run on baton's loops
// (kernels/cpu/matmul_small.cpp): row tiles where b's rows are contiguous, dot products
// where its columns are and a has at most four rows, b copied row-major otherwise. Every
// path and every tail of the tiles (rows past a multiple of 4, columns past 16, 8 and 4,
// k past 8) against the product in f64; bias, accumulation and batches as matmul_kernel
// takes them. Tolerance: K terms of f32 rounding, each below 2^-24 of the largest partial
// sum, so 1e-5 relative for K <= 70 and values in [-1, 1).
#include <gtest/gtest.h>

#include <cmath>

#include "baton/ops.h"
#include "harness/op_harness.h"
#include "kernels/cpu/matmul.h"

namespace baton::testing {
namespace {

// a @ b (+ bias) (+ base) in f64, as the reference.
Tensor reference(const Tensor& a, const Tensor& b, const Tensor* bias, const Tensor* base) {
  Tensor r = matmul(a.to(f64), b.to(f64));
  if (bias) r = r + bias->to(f64);
  if (base) r = r + base->to(f64);
  return r;
}

void expect_close_to(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  const std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i)
    ASSERT_NEAR(g[i], w[i], 1e-5 * std::max(1.0, std::abs(w[i]))) << what << " element " << i;
}

TEST(SmallMatmul, EveryTileAndTailOfEachLayoutAgreesWithF64) {
  uint64_t seed = 1;
  for (int64_t M : {1, 2, 3, 4, 5, 7}) {
    for (int64_t N : {1, 4, 7, 8, 9, 17, 33}) {
      for (int64_t K : {1, 7, 8, 9, 64}) {
        const Tensor a = uniform({M, K}, -1, 1, seed++).to(f32);
        const Tensor w = uniform({N, K}, -1, 1, seed++).to(f32);
        const Tensor bias = uniform({N}, -1, 1, seed++).to(f32);
        const std::string shape = str(M, "x", K, " @ ", K, "x", N);
        // b's rows contiguous; b's columns (linear's weight); neither (a column slice of a wider b)
        const Tensor wide = uniform({K, 2 * N}, -1, 1, seed++).to(f32);
        for (const Tensor& b : {w.t().contiguous(), w.t(), slice(wide, 1, 0, 2 * N, 2)}) {
          ASSERT_TRUE(kernels::small_product(a, b, {M, N})) << shape;
          Tensor out = zeros({M, N});
          kernels::small_matmul_f32(a, b, &bias, out, false);
          expect_close_to(out, reference(a, b, &bias, nullptr), shape + str(" b strides ", b.strides()));
        }
        // a transposed in memory (its columns contiguous)
        const Tensor at = a.t().contiguous().t();
        Tensor out = zeros({M, N});
        kernels::small_matmul_f32(at, w.t(), nullptr, out, false);
        expect_close_to(out, reference(at, w.t(), nullptr, nullptr), shape + " a transposed");
      }
    }
  }
}

// accumulate: out += product + bias, the sum added to what out held (a residual).
TEST(SmallMatmul, AccumulatesIntoTheOutputAfterTheBias) {
  const Tensor a = uniform({3, 20}, -1, 1, 5).to(f32), b = uniform({20, 19}, -1, 1, 6).to(f32);
  const Tensor bias = uniform({19}, -1, 1, 7).to(f32), base = uniform({3, 19}, -1, 1, 8).to(f32);
  for (const Tensor& operand : {b, b.t().contiguous().t()}) {
    Tensor out = base.clone();
    kernels::small_matmul_f32(a, operand, &bias, out, true);
    expect_close_to(out, reference(a, operand, &bias, &base), "accumulated");
  }
}

// Batches (attention's heads), one operand broadcast over them, into a strided output.
TEST(SmallMatmul, BatchesBroadcastAndStridedOutputs) {
  const Tensor q = uniform({8, 16, 32}, -1, 1, 11).to(f32), k = uniform({8, 32, 16}, -1, 1, 12).to(f32);
  Tensor out = zeros({8, 16, 16});
  kernels::small_matmul_f32(q, k, nullptr, out, false);
  expect_close_to(out, reference(q, k, nullptr, nullptr), "batched");
  const Tensor shared = uniform({32, 16}, -1, 1, 13).to(f32);  // [32, 16] for every batch
  kernels::small_matmul_f32(q, shared, nullptr, out, false);
  expect_close_to(out, reference(q, shared, nullptr, nullptr), "broadcast b");
  const Tensor q1 = squeeze(slice(q, 0, 1, 2), 0);  // the second head, [16, 32]
  Tensor wide = zeros({16, 40});
  const Tensor columns = slice(wide, 1, 0, 32, 2);  // out's rows not contiguous
  kernels::small_matmul_f32(q1, shared, nullptr, columns, false);
  expect_close_to(columns, reference(q1, shared, nullptr, nullptr), "strided output");
}

// A layer's weight at batch 1 or 2 (rows of a against b's contiguous columns) takes the
// dot products up to 2^20 multiply-adds; more rows, or b's rows contiguous, oneDNN.
TEST(SmallMatmul, MatrixVectorShapesTakeTheDotProducts) {
  const Tensor w = uniform({1000, 512}, -1, 1, 30).to(f32), bias = uniform({1000}, -1, 1, 31).to(f32);
  for (int64_t M : {1, 2, 3}) {
    const Tensor x = uniform({M, 512}, -1, 1, 32).to(f32);
    EXPECT_EQ(kernels::small_product(x, w.t(), {M, 1000}), M <= 2) << M;
    EXPECT_FALSE(kernels::small_product(x, w.t().contiguous(), {M, 1000})) << M;
    const std::vector<double> got = linear(x, w, bias).to_vector<double>();
    const std::vector<double> want = reference(x, w.t(), &bias, nullptr).to_vector<double>();
    for (size_t i = 0; i < got.size(); ++i)  // 512 terms: 1e-4 of their spread
      ASSERT_NEAR(got[i], want[i], 1e-4 * std::max(1.0, std::abs(want[i]))) << M << " rows, element " << i;
  }
  EXPECT_FALSE(kernels::small_product(uniform({2, 1024}, -1, 1, 33).to(f32), uniform({1024, 1024}, -1, 1, 34).to(f32).t(),
                                      {2, 1024}));  // 2^21 multiply-adds
}

// The ops take the loops for small products and oneDNN past the threshold; both agree
// with f64, NaN and infinity propagate as IEEE arithmetic says.
TEST(SmallMatmul, OpsOnEitherSideOfTheThresholdAndSpecialValues) {
  for (int64_t M : {16, 17}) {  // 16 x 64 x 64 = 2^16 multiply-adds: loops; 17 rows: oneDNN
    const Tensor x = uniform({M, 64}, -1, 1, 20).to(f32), w = uniform({64, 64}, -1, 1, 21).to(f32);
    const Tensor bias = uniform({64}, -1, 1, 22).to(f32);
    EXPECT_EQ(kernels::small_product(x, w.t(), {M, 64}), M == 16);
    expect_close_to(linear(x, w, bias), reference(x, w.t(), &bias, nullptr), str("linear, ", M, " rows"));
  }
  Tensor a = tensor(std::vector<float>{1.0f, NAN, 2.0f, 3.0f}, {2, 2});
  const Tensor b = tensor(std::vector<float>{1.0f, 0.0f, INFINITY, 1.0f}, {2, 2});
  const std::vector<float> y = matmul(a, b).to_vector<float>();
  EXPECT_TRUE(std::isnan(y[0]) && std::isnan(y[1]));  // 1 * 1 + NaN * inf, 1 * 0 + NaN * 1
  EXPECT_EQ(y[2], INFINITY);                          // 2 * 1 + 3 * inf
  EXPECT_EQ(y[3], 3.0f);                              // 2 * 0 + 3 * 1
}

}  // namespace
}  // namespace baton::testing
