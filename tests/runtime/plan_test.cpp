// Plans as users see them: levels give the same values, intermediates share an arena,
// fetched results are the caller's, symbolic plans specialize per size, and explain()
// links source lines to steps and buffers.
#include <gtest/gtest.h>

#include <cmath>

#include "baton/baton.h"
#include "baton/memory.h"
#include "harness/op_harness.h"
#include "kernels/cpu/onednn.h"

namespace baton {
namespace {

// Uniform f32 values (the harness makes f64).
Tensor uniform(const Shape& shape, double lo = -1, double hi = 1, uint64_t seed = 1) {
  return testing::uniform(shape, lo, hi, seed).to(f32);
}

struct Mlp {
  Graph g{"mlp"};
  Tensor x = g.placeholder(f32, {"batch", 64}, "x");
  Tensor w1 = uniform({32, 64}, -0.3, 0.3, 1), b1 = uniform({32}, -0.1, 0.1, 2);
  Tensor w2 = uniform({10, 32}, -0.3, 0.3, 3);
  Tensor h = relu(linear(x, w1, b1));
  Tensor y = softmax(linear(h, w2) * 2.0 + 1.0, 1);
};

TEST(Plan, LevelsGiveTheSameValues) {
  Mlp m;
  Tensor x = uniform({5, 64}, -1, 1, 9);
  std::vector<Tensor> got;
  for (OptLevel level : {OptLevel::O0, OptLevel::O1, OptLevel::O2}) {
    Session sess(m.g, {.level = level});
    got.push_back(sess.run({m.y}, {{m.x, x}}).at(0));
  }
  // Cleanup passes do not change the order of any arithmetic: exact equality.
  EXPECT_ALL_CLOSE(got[1], got[0], 0, 0);
  EXPECT_ALL_CLOSE(got[2], got[0], 0, 0);
}

TEST(Plan, IntermediatesShareOneArena) {
  Graph g("chain");
  Tensor x = g.placeholder(f32, {256}, "x");
  Tensor y = x;
  for (int i = 0; i < 10; ++i) y = tanh(y * 1.5 + 0.25);
  Session sess(g, {.level = OptLevel::O1});  // O2 would fuse the chain into one step
  sess.run({y}, {{x, uniform({256})}});
  MemoryPlan m = sess.memory_plan();
  EXPECT_EQ(m.steps, 30u);
  EXPECT_EQ(m.naive_bytes, 29u * 1024);       // the fetched result has its own buffer
  EXPECT_LE(m.arena_bytes, m.naive_bytes / 2);  // pointwise steps write over their input
  EXPECT_GE(m.arena_bytes, m.lower_bound_bytes);
}

// exp(x) dies at the subtraction, but the subtraction also reads it transposed: writing
// the difference over exp(x) would change what the transposed operand reads mid-way.
TEST(Plan, NoInPlaceWriteOverAnOperandAnotherOperandViews) {
  Graph g("transposed");
  Tensor x = g.placeholder(f32, {3, 3}, "x");
  Tensor e = exp(x);
  Tensor d = relu(e.t() - e);  // the difference is not fetched, so it is an arena buffer
  Tensor value = uniform({3, 3});
  Tensor want = relu(exp(value).t() - exp(value));
  for (OptLevel level : {OptLevel::O0, OptLevel::O2})
    EXPECT_ALL_CLOSE(Session(g, {.level = level}).run({d}, {{x, value}}).at(0), want, 0, 0);
}

TEST(Plan, OptimizedGraphIsWhatThePlanRuns) {
  Graph g("block");
  Tensor x = g.placeholder(f32, {1, 2, 5, 5}, "x");
  Tensor w = uniform({2, 2, 3, 3});
  Tensor y = relu(conv2d(x, w, {}, {.padding = {1, 1}}) + x);
  g.set_outputs({y});
  Graph o1 = g.optimized(OptLevel::O1), o2 = g.optimized();
  EXPECT_EQ(o1.num_nodes(), 3u);
  EXPECT_EQ(o2.num_nodes(), 1u);
  EXPECT_NE(o2.to_text().find("conv2d_fused"), std::string::npos) << o2.to_text();
  EXPECT_NE(o2.to_dot().find("label=\"fused: conv2d + add + relu\";"), std::string::npos) << o2.to_dot();
  EXPECT_EQ(g.num_nodes(), 3u);  // the user's graph is left as it was
}

TEST(Plan, FetchedResultsAreNeverReused) {
  Mlp m;
  Session sess(m.g);
  Tensor first = sess.run({m.y}, {{m.x, uniform({4, 64}, -1, 1, 1)}}).at(0);
  Tensor copy = first.clone();
  Tensor second = sess.run({m.y}, {{m.x, uniform({4, 64}, -1, 1, 2)}}).at(0);
  EXPECT_ALL_CLOSE(first, copy, 0, 0);
  EXPECT_FALSE(first.shares_storage_with(second));
}

TEST(Plan, EachBatchSizeGetsItsSpecialization) {
  Mlp m;
  Session sess(m.g);
  for (int64_t batch : {1, 3, 7, 3, 12, 2, 5, 6, 9, 10, 11, 1}) {  // more than are kept
    Tensor x = uniform({batch, 64}, -1, 1, uint64_t(batch));
    Tensor got = sess.run({m.y}, {{m.x, x}}).at(0);
    Tensor want = softmax(linear(relu(linear(x, m.w1, m.b1)), m.w2) * 2.0 + 1.0, 1);
    EXPECT_ALL_CLOSE(got, want, 1e-6, 1e-5) << "batch " << batch;
  }
}

TEST(Plan, ExplainLinksSourceLinesToStepsAndBuffers) {
  Mlp m;
  Session sess(m.g);
  EXPECT_EQ(sess.explain(), "");
  sess.run({m.y}, {{m.x, uniform({4, 64})}});
  const std::string report = sess.explain();
  EXPECT_NE(report.find("memory: arena"), std::string::npos) << report;
  EXPECT_NE(report.find("plan_test.cpp:"), std::string::npos) << report;
  EXPECT_NE(report.find("relu"), std::string::npos) << report;
  EXPECT_NE(report.find("arena +"), std::string::npos) << report;
  EXPECT_NE(report.find("own buffer"), std::string::npos) << report;  // the fetched softmax
}

// The products' oneDNN primitives are made with the plan (a run looks none up), the relu
// after the first linear applied as its post-op; explain() names each one's kernel.
TEST(Plan, ProductStepsHoldTheirPrimitives) {
  Mlp m;
  Session sess(m.g);
  Tensor x = uniform({4, 64}, -1, 1, 5);
  EXPECT_ALL_CLOSE(sess.run({m.y}, {{m.x, x}}).at(0),
                   softmax(linear(relu(linear(x, m.w1, m.b1)), m.w2) * 2.0 + 1.0, 1), 1e-6, 1e-6);
  const std::string report = sess.explain();
  EXPECT_NE(report.find("fused into %0 = linear("), std::string::npos) << report;
  EXPECT_NE(report.find("linear_fused"), std::string::npos) << report;
  EXPECT_EQ(report.find("[ref"), std::string::npos) << report;
  // Both product steps name oneDNN's kernel ("brg:avx512_core", "gemm:jit", ...).
  size_t prepared = 0;
  for (const char* step : {"  linear_fused ", "  linear "}) {
    const size_t at = report.find(step);
    ASSERT_NE(at, std::string::npos) << report;
    const std::string line = report.substr(at, report.find('\n', at) - at);
    prepared += line.find("  [") != std::string::npos;
  }
  EXPECT_EQ(prepared, 2u) << report;
}

// A plan times oneDNN's implementations of each product large enough to be worth it and
// runs the fastest (eager calls take oneDNN's first pick); explain() shows the times. The
// choice is forced here, so that it is the same on every machine.
TEST(Plan, LargeProductsRunTheImplementationThatMeasuredFastest) {
  Graph g("products");
  Tensor a = g.placeholder(f32, {128, 256}, "a"), b = g.placeholder(f32, {256, 64}, "b"),
         c = g.placeholder(f32, {256, 4}, "c");
  Tensor large = matmul(a, b), small = matmul(a, c);  // 2^21 and 2^17 multiply-adds
  const Tensor av = uniform({128, 256}, -1, 1, 3), bv = uniform({256, 64}, -1, 1, 4), cv = uniform({256, 4}, -1, 1, 5);
  kernels::onednn::ImplementationOverride gemm("gemm:jit");
  Session sess(g);
  const std::vector<Tensor> got = sess.run({large, small}, {{a, av}, {b, bv}, {c, cv}});
  EXPECT_ALL_CLOSE(got[0], matmul(av, bv), 1e-5, 1e-5);
  EXPECT_ALL_CLOSE(got[1], matmul(av, cv), 1e-5, 1e-5);
  const std::string report = sess.explain();
  auto step_line = [&](const std::string& shape) {
    const size_t at = report.find("  matmul  ");
    const size_t line = report.find(shape, at);
    EXPECT_NE(line, std::string::npos) << report;
    return line == std::string::npos ? "" : report.substr(line, report.find('\n', line) - line);
  };
  EXPECT_NE(step_line("f32[128,64]").find("[gemm:jit (measured: gemm:jit (forced))]"), std::string::npos) << report;
  EXPECT_EQ(step_line("f32[128,4]").find("measured"), std::string::npos) << report;
}

// A run's only allocation is its fetched result: intermediates live in the arena, and so
// do the products' scratchpads (explain() shows where), which oneDNN would otherwise get
// from the allocator on every run.
TEST(Plan, ARunAllocatesOnlyItsFetchedResult) {
  Mlp m;
  Session sess(m.g);
  Tensor x = uniform({4, 64});
  sess.run({m.y}, {{m.x, x}});
  const uint64_t before = memory_stats().allocations;
  sess.run({m.y}, {{m.x, x}});
  EXPECT_EQ(memory_stats().allocations - before, 1u) << sess.explain();
}

// Batch norm's forward and backward primitives ([N, C] inputs take oneDNN both ways) are
// made with the plan too.
TEST(Plan, BatchNormStepsHoldTheirPrimitives) {
  Graph g("bn");
  Tensor x = g.placeholder(f32, {16, 8}, "x");
  Tensor w = g.variable(uniform({8}, 0.5, 1.5, 2), "w"), b = g.variable(uniform({8}, -1, 1, 3), "b");
  Tensor y = batch_norm(x, Tensor{}, Tensor{}, w, b, /*training=*/true, 0.1, 1e-5);
  std::vector<Tensor> grads = grad((y * y * y).sum(), {w, b});
  Session planned(g), plain(g, {.level = OptLevel::O0});
  Tensor value = uniform({16, 8}, -1, 1, 4);
  std::vector<Tensor> fetches{y, grads[0], grads[1]};
  std::vector<Tensor> want = plain.run(fetches, {{x, value}}), got = planned.run(fetches, {{x, value}});
  for (size_t i = 0; i < want.size(); ++i) EXPECT_ALL_CLOSE(got[i], want[i], 1e-5, 1e-5) << i;
  const std::string report = planned.explain();
  for (const char* step : {"  batch_norm ", "  batch_norm_backward "}) {
    const size_t at = report.find(step);
    ASSERT_NE(at, std::string::npos) << report;
    EXPECT_NE(report.substr(at, report.find('\n', at) - at).find("  ["), std::string::npos) << step << report;
  }
}

TEST(Plan, FoldsConstantsOnlyTheGraphHolds) {
  Graph g("fold");
  Tensor x = g.placeholder(f32, {4}, "x");
  Tensor scale = exp(full({4}, 0.5));  // concrete: computed while building, a constant
  Tensor y = x * (scale * 2.0);        // scale * 2.0 is concrete too; both are constants
  Session sess(g, {.level = OptLevel::O1});
  Tensor got = sess.run({y}, {{x, ones({4})}}).at(0);
  EXPECT_ALL_CLOSE(got, full({4}, 2 * std::exp(0.5)), 1e-6, 1e-6);
}

TEST(Plan, ASizeThatBreaksTheGraphNamesTheNode) {
  Graph g("bad");
  Tensor a = g.placeholder(f32, {"n"}, "a");
  Tensor b = g.placeholder(f32, {"m"}, "b");
  int line = __LINE__ + 1;
  Tensor c = a + b;  // trusted at build time: n and m may match or be 1
  Session sess(g);
  EXPECT_ALL_CLOSE(sess.run({c}, {{a, ones({3})}, {b, ones({3})}}).at(0), full({3}, 2.0), 0, 0);
  EXPECT_THROWS_WITH(ShapeError, sess.run({c}, {{a, ones({3})}, {b, ones({4})}}), "[add]", "[3]", "[4]",
                     "plan_test.cpp:" + std::to_string(line));
}

// A placeholder's dim may be a product (2*batch rows, h*w pixels): a feed sizes the one
// symbol of it nothing else sizes (batch = rows / 2; w once h is known from another dim),
// and one that is no multiple, or disagrees with sizes known, is a ShapeError naming it.
TEST(Plan, ProductDimsOfAPlaceholderSizeTheirSymbol) {
  Graph g("products");
  const int64_t batch = sym::named("batch"), h = sym::named("h"), w = sym::named("w");
  Tensor x = g.placeholder(f32, {sym::mul(batch, 2), 3}, "x");
  Tensor pixels = g.placeholder(f32, {h, sym::mul(h, w)}, "pixels");
  Tensor y = x.reshape({batch, 6}) * 2.0f;
  Tensor z = sum(pixels.reshape({h, h, w}), {1});
  Session sess(g);
  const Tensor rows = uniform({4, 3}, -1, 1, 1), image = uniform({2, 10}, -1, 1, 2);
  const std::vector<Tensor> got = sess.run({y, z}, {{x, rows}, {pixels, image}});
  EXPECT_ALL_CLOSE(got[0], rows.reshape({2, 6}) * 2.0f, 0, 0);
  EXPECT_ALL_CLOSE(got[1], sum(image.reshape({2, 2, 5}), {1}), 1e-6, 1e-6);
  EXPECT_THROWS_WITH(ShapeError, sess.run({y}, {{x, ones({5, 3})}}), "placeholder 'x'", "dim 0 is '2*batch'",
                     "5 is no multiple of 2");
  EXPECT_THROWS_WITH(ShapeError, sess.run({z}, {{pixels, ones({2, 9})}}), "dim 1 is 'h*w'", "9 is no multiple of 2");
}

// A step whose output is larger than set_memory_limit allows fails when its plan is made,
// naming the node and the bytes, before any kernel is prepared or anything allocated.
TEST(Plan, AnOutputPastTheMemoryLimitFailsWhenThePlanIsMade) {
  Graph g;
  Tensor x = g.placeholder(f32, {"n", 1024}, "x");
  Tensor y = x * 2.0f;
  const Tensor big = ones({1024, 1024});  // 4 MiB
  const size_t before = memory_stats().bytes_in_use;
  set_memory_limit(before + (size_t(1) << 20));
  Session sess(g);
  EXPECT_THROWS_WITH(OutOfMemoryError, sess.run({y}, {{x, big}}), "mul", "4194304 bytes", "set_memory_limit");
  set_memory_limit(0);
  EXPECT_ALL_CLOSE(sess.run({y}, {{x, big}})[0], big * 2.0f, 0, 0);
}

}  // namespace
}  // namespace baton
