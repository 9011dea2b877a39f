// Session::run and compiled functions called from many threads at once give the
// single-threaded results; feeds that repeat or hold nothing are errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include <baton/baton.h>

#include "harness/op_harness.h"

namespace baton {
namespace {

using testing::all_close;

constexpr int kThreads = 8;
constexpr int kIterations = 40;

// Runs body(thread, iteration) on kThreads threads; rethrows the first failure here.
template <class Body>
void on_threads(Body body) {
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(kThreads);
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      try {
        for (int i = 0; i < kIterations; ++i) body(t, i);
      } catch (...) {
        errors[size_t(t)] = std::current_exception();
      }
    });
  for (auto& th : threads) th.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

TEST(Concurrency, SessionRunsDifferentFetchSetsFromManyThreads) {
  Graph g;
  Tensor x = g.placeholder(f32, {-1, 16}, "x");
  Tensor w = g.placeholder(f32, {16, 8}, "w");
  Tensor h = relu(matmul(x, w));
  Tensor s = h.sum();
  Tensor m = softmax(h, 1);
  std::vector<std::vector<Tensor>> fetch_sets = {{h}, {s}, {m}, {h, s}, {m, s, h}};
  manual_seed(3);
  Tensor tw = randn({16, 8});
  std::vector<Tensor> inputs;
  for (int t = 0; t < kThreads; ++t) inputs.push_back(randn({t + 1, 16}));
  // Single-threaded references, then every thread runs every fetch set many times.
  Session reference_session(g);
  std::vector<std::vector<std::vector<Tensor>>> expected(kThreads);
  for (int t = 0; t < kThreads; ++t)
    for (auto& fetches : fetch_sets)
      expected[size_t(t)].push_back(reference_session.run(fetches, {{x, inputs[size_t(t)]}, {w, tw}}));
  Session session(g);
  on_threads([&](int t, int i) {
    size_t k = size_t(t + i) % fetch_sets.size();
    std::vector<Tensor> out = session.run(fetch_sets[k], {{x, inputs[size_t(t)]}, {w, tw}});
    for (size_t j = 0; j < out.size(); ++j)
      if (!all_close(out[j], expected[size_t(t)][k][j], 0, 0)) throw std::runtime_error("wrong value");
  });
}

TEST(Concurrency, CompiledFunctionCalledWithDifferentShapesFromManyThreads) {
  auto f = compile([](const Tensor& a, const Tensor& b) { return tanh(matmul(a, b)) * 2.0f + a.sum(); },
                   {.max_plans = 3});  // fewer plans than shapes: evictions race with runs
  manual_seed(4);
  Tensor b = randn({6, 5});
  std::vector<Tensor> inputs, expected;
  for (int t = 0; t < kThreads; ++t) {
    inputs.push_back(randn({t % 5 + 1, 6}));
    expected.push_back(tanh(matmul(inputs.back(), b)) * 2.0f + inputs.back().sum());
  }
  on_threads([&](int t, int) {
    Tensor out = f(inputs[size_t(t)], b);
    if (!all_close(out, expected[size_t(t)], 1e-6, 1e-6)) throw std::runtime_error("wrong value");
  });
  EXPECT_LE(f.num_cached_plans(), 3u);
}

TEST(Concurrency, CompiledTrainingStepsFromManyThreadsAreSerialized) {
  // Each call adds 1 to the state in place; concurrent calls must not lose updates.
  Tensor counter = zeros({4});
  auto step = compile([&](const Tensor& x) {
    counter.copy_(counter + x);
    return counter.sum();
  });
  on_threads([&](int, int) { step(ones({4})); });
  EXPECT_TRUE(all_close(counter, full({4}, double(kThreads * kIterations)), 0, 0)) << counter;
}

TEST(Concurrency, RandomTensorsDrawnAtOnceShareOneUnbrokenSequence) {
  // Each tensor draws one run of the generator's sequence: threads drawing at once get the
  // same values as drawing one after another, in some order of whole tensors.
  auto draw_all = [](bool threaded) {
    manual_seed(7);
    std::vector<Tensor> drawn(kThreads);
    if (threaded) on_threads([&](int t, int i) { if (i == 0) drawn[size_t(t)] = rand({4096}, f64); });
    else for (auto& d : drawn) d = rand({4096}, f64);
    std::vector<double> all;
    for (auto& d : drawn) for (double v : d.to_vector<double>()) all.push_back(v);
    std::sort(all.begin(), all.end());
    return all;
  };
  EXPECT_EQ(draw_all(true), draw_all(false));
}

TEST(Feeds, RepeatedFeedsAreErrors) {
  Graph g;
  Tensor x = g.placeholder(f32, {2}, "x");
  Tensor y = x * 2.0f;
  Session s(g);
  EXPECT_THROWS_WITH(ValueError, s.run({y}, {{x, ones({2})}, {x, zeros({2})}}),
                     "placeholder 'x' is fed twice (feeds 0 and 1)", "concurrency_test.cpp");
}

TEST(Feeds, UndefinedFeedValuesAreErrors) {
  Graph g;
  Tensor x = g.placeholder(f32, {2}, "x");
  Tensor y = x * 2.0f;
  Session s(g);
  EXPECT_THROWS_WITH(ValueError, s.run({y}, {{x, Tensor()}}), "placeholder 'x' (feed 0) is an undefined tensor",
                     "concurrency_test.cpp");
  EXPECT_THROW(s.run({y}, {{Tensor(), ones({2})}}), ValueError);
  EXPECT_THROW(s.run({Tensor()}, {{x, ones({2})}}), GraphError);
}

}  // namespace
}  // namespace baton
