// Sizes that overflow, allocations that cannot be made, undefined tensors, thread counts:
// each is a baton::Error through the public API, never a crash or a wrong size.
#include <gtest/gtest.h>

#include <baton/baton.h>

namespace baton {
namespace {

template <class E, class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

TEST(Limits, ElementCountsThatOverflowAreShapeErrors) {
  std::string m = error_of<ShapeError>([] { zeros({int64_t(1) << 62, 4}); });
  EXPECT_NE(m.find("[4611686018427387904,4]"), std::string::npos) << m;
  error_of<ShapeError>([] { ones({int64_t(1) << 32, int64_t(1) << 32}); });
  error_of<ShapeError>([] { Tensor x = zeros({2}); x.expand({int64_t(1) << 62, 8, 2}).sum(); });
  // A zero dim makes any product empty, whatever comes before it.
  EXPECT_EQ(zeros({int64_t(1) << 62, 4, 0}).numel(), 0);
}

TEST(Limits, ByteCountsThatOverflowAreErrors) {
  // 2^62 doubles: the element count fits in int64, the byte count (2^65) not in size_t.
  std::string m = error_of<ShapeError>([] { zeros({int64_t(1) << 62}, f64); });
  EXPECT_NE(m.find("bytes"), std::string::npos) << m;
  // 2^62 - 16 floats is 2^64 - 64 bytes: it fits, and the allocator refuses it, where its
  // size-class rounding used to wrap around.
  m = error_of<OutOfMemoryError>([] { zeros({(int64_t(1) << 62) - 16}); });
  EXPECT_NE(m.find("18446744073709551552 bytes"), std::string::npos) << m;
}

TEST(Limits, AllocationsThatCannotBeMadeSayHowManyBytes) {
  std::string m = error_of<OutOfMemoryError>([] { zeros({int64_t(1) << 40}); });
  EXPECT_NE(m.find("4398046511104 bytes"), std::string::npos) << m;
  // Right below the refusal threshold the allocator asks the system, which says no.
  m = error_of<OutOfMemoryError>([] { empty({int64_t(1) << 45}, f64); });
  EXPECT_NE(m.find("281474976710656 bytes"), std::string::npos) << m;
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
  error_of<ValueError>([] { zeros({-3, 2}); });
  float data[4] = {};
  error_of<ValueError>([&] { from_blob(data, f32, {-1, 4}); });
}

TEST(Limits, UndefinedTensorsAreRejectedEverywhere) {
  Tensor u;
  std::string m = error_of<ValueError>([&] { (void)(u + 1.0f); });
  EXPECT_NE(m.find("undefined"), std::string::npos) << m;
  EXPECT_NE(m.find("limits_test.cpp"), std::string::npos) << m;  // the caller's line
  error_of<ValueError>([&] { (void)(1.0f * u); });
  error_of<ValueError>([&] { add(ones({2}), u); });
  error_of<ValueError>([&] { relu(u); });
  error_of<ValueError>([&] { matmul(u, ones({2, 2})); });
  error_of<ValueError>([&] { u.sum(); });
  error_of<ValueError>([&] { (void)u.shape(); });
  error_of<ValueError>([&] { (void)u.numel(); });
  error_of<ValueError>([&] { u.data<float>(); });
  error_of<ValueError>([&] { u.backward(); });
  error_of<ValueError>([&] { (void)u.item<float>(); });
  error_of<ValueError>([&] { optim::SGD opt({u}); });
  error_of<GraphError>([&] { Graph g; g.variable(u, "v"); });
  error_of<ValueError>([&] { ones({2}).copy_(u); });
  error_of<ValueError>([&] { io::save_tensors("/tmp/baton_undefined.ckpt", {{"u", u}}); });
  auto f = compile([](const Tensor& a) { return a * 2.0f; });
  error_of<GraphError>([&] { f(u); });
  Tensor x = ones({2});
  Tensor moved = std::move(x);
  error_of<ValueError>([&] { (void)(x * 2.0f); });  // NOLINT: use after move is the point
}

TEST(Limits, ThreadCountsOutsideTheRangeAreValueErrors) {
  const int before = get_num_threads();
  std::string m = error_of<ValueError>([] { set_num_threads(0); });
  EXPECT_NE(m.find("got 0"), std::string::npos) << m;
  error_of<ValueError>([] { set_num_threads(-4); });
  error_of<ValueError>([] { set_num_threads(100000); });
  EXPECT_EQ(get_num_threads(), before);
}

}  // namespace
}  // namespace baton
