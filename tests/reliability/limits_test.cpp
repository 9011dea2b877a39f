// Sizes that overflow, allocations that cannot be made, undefined tensors, thread counts:
// each is a baton::Error through the public API, never a crash or a wrong size.
#include <gtest/gtest.h>

#include <baton/baton.h>

#include "harness/op_harness.h"

namespace baton {
namespace {

TEST(Limits, ElementCountsThatOverflowAreShapeErrors) {
  EXPECT_THROWS_WITH(ShapeError, zeros({int64_t(1) << 62, 4}), "[4611686018427387904,4]", "int64");
  EXPECT_THROWS_WITH(ShapeError, ones({int64_t(1) << 32, int64_t(1) << 32}), "[4294967296,4294967296]");
  EXPECT_THROWS_WITH(ShapeError, zeros({2}).expand({int64_t(1) << 62, 8, 2}).sum(), "int64");
  // A zero dim makes any product empty, whatever comes before it.
  EXPECT_EQ(zeros({int64_t(1) << 62, 4, 0}).numel(), 0);
}

TEST(Limits, ByteCountsThatOverflowAreErrors) {
  // 2^62 doubles: the element count fits in int64, the byte count (2^65) not in size_t.
  EXPECT_THROWS_WITH(ShapeError, zeros({int64_t(1) << 62}, f64), "[4611686018427387904]", "bytes");
  // 2^62 - 16 floats is 2^64 - 64 bytes: it fits, and the allocator refuses it, where its
  // size-class rounding used to wrap around.
  EXPECT_THROWS_WITH(OutOfMemoryError, zeros({(int64_t(1) << 62) - 16}), "18446744073709551552 bytes");
}

TEST(Limits, AllocationsThatCannotBeMadeSayHowManyBytes) {
  EXPECT_THROWS_WITH(OutOfMemoryError, zeros({int64_t(1) << 40}), "cannot allocate 4398046511104 bytes");
  // Right below the refusal threshold the allocator asks the system, which says no.
  EXPECT_THROWS_WITH(OutOfMemoryError, empty({int64_t(1) << 45}, f64), "cannot allocate 281474976710656 bytes");
  EXPECT_NO_THROW(zeros({16}));  // and the allocator still works afterwards
}

TEST(Limits, SymbolicDimProductsThatOverflowAreShapeErrors) {
  EXPECT_THROW(
      {
        Graph g;
        Tensor x = g.placeholder(f32, {"b", int64_t(1) << 32, int64_t(1) << 32}, "x");
        x.flatten();
      },
      ShapeError);
  // Each step multiplies one more factor of b into the flattened dim; past sixteen factors
  // a symbolic dim is refused rather than grown without bound.
  Graph g;
  Tensor x = g.placeholder(f32, {"b", 2}, "x");
  Tensor y = x.flatten();
  int factors = 1;
  try {
    for (; factors < 100; ++factors) y = matmul(y.unsqueeze(1), x.flatten().unsqueeze(0)).flatten();
  } catch (const ShapeError&) {
  }
  EXPECT_EQ(factors, 16);
}

TEST(Limits, NegativeSizesAreValueErrors) {
  EXPECT_THROWS_WITH(ValueError, zeros({-3, 2}), "negative size in shape [-3,2]");
  float data[4] = {};
  EXPECT_THROWS_WITH(ValueError, from_blob(data, f32, {-1, 4}), "[-1,4]");
}

TEST(Limits, UndefinedTensorsAreRejectedEverywhere) {
  Tensor u;
  EXPECT_THROWS_WITH(ValueError, (void)(u + 1.0f), "undefined", "limits_test.cpp");  // the caller's line
  EXPECT_THROWS_WITH(ValueError, (void)(1.0f * u), "undefined");
  EXPECT_THROWS_WITH(ValueError, add(ones({2}), u), "undefined");
  EXPECT_THROWS_WITH(ValueError, relu(u), "undefined");
  EXPECT_THROWS_WITH(ValueError, matmul(u, ones({2, 2})), "undefined");
  EXPECT_THROWS_WITH(ValueError, u.sum(), "undefined");
  EXPECT_THROWS_WITH(ValueError, (void)u.shape(), "undefined");
  EXPECT_THROWS_WITH(ValueError, (void)u.numel(), "undefined");
  EXPECT_THROWS_WITH(ValueError, u.data<float>(), "undefined");
  EXPECT_THROWS_WITH(ValueError, u.backward(), "undefined");
  EXPECT_THROWS_WITH(ValueError, (void)u.item<float>(), "undefined");
  EXPECT_THROWS_WITH(ValueError, optim::SGD opt({u}), "undefined");
  EXPECT_THROWS_WITH(GraphError, Graph g; g.variable(u, "v"), "concrete tensor");
  EXPECT_THROWS_WITH(ValueError, ones({2}).copy_(u), "undefined");
  EXPECT_THROWS_WITH(ValueError, io::save_tensors("/tmp/baton_undefined.ckpt", {{"u", u}}), "undefined");
  auto f = compile([](const Tensor& a) { return a * 2.0f; });
  EXPECT_THROWS_WITH(GraphError, f(u), "input 0 must be a concrete tensor");
  Tensor x = ones({2});
  Tensor moved = std::move(x);
  EXPECT_THROWS_WITH(ValueError, (void)(x * 2.0f), "undefined");  // NOLINT: use after move is the point
}

TEST(Limits, ThreadCountsOutsideTheRangeAreValueErrors) {
  const int before = get_num_threads();
  EXPECT_THROWS_WITH(ValueError, set_num_threads(0), "[set_num_threads]", "1 to 1024", "got 0");
  EXPECT_THROWS_WITH(ValueError, set_num_threads(-4), "got -4");
  EXPECT_THROWS_WITH(ValueError, set_num_threads(100000), "got 100000");
  EXPECT_EQ(get_num_threads(), before);
}

}  // namespace
}  // namespace baton
