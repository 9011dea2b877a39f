// Rank-2 layout planning: at O2 a plan stores a matrix product's output column-major where
// its kernel writes it clearly faster so (measured; forced here by ColumnMajorOverride) and
// every reader takes that layout: products, transposing views, bias-gradient sums and
// element-wise kernels, whose outputs follow. The values equal the plain plan's within 1e-5:
// a column-major product is computed as its transpose, whose sums oneDNN may order
// differently (f32 rounding of sums of a few dozen terms of magnitude ~1, a few ulp).
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>

#include "baton/baton.h"
#include "harness/op_harness.h"
#include "kernels/cpu/matmul.h"

namespace baton {
namespace {

Tensor uniform(const Shape& shape, uint64_t seed) { return testing::uniform(shape, -1, 1, seed).to(f32); }

// An empty [rows, cols] matrix stored column-major.
Tensor empty_column_major(int64_t rows, int64_t cols) { return zeros({cols, rows}, f32).t(); }

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// The product kernel writes a column-major result as the transpose of a row-major one, the
// bias added after the product, the accumulated result into what out holds.
TEST(ColumnMajor, ProductKernelWritesEitherLayout) {
  const Tensor a = uniform({6, 5}, 1), b = uniform({5, 7}, 2), bias = uniform({7}, 3), held = uniform({6, 7}, 4);
  for (bool with_bias : {false, true})
    for (bool accumulate : {false, true}) {
      Tensor row = accumulate ? held.contiguous() : zeros({6, 7}, f32);
      Tensor column = empty_column_major(6, 7);
      if (accumulate) column.copy_(held);
      kernels::matmul_kernel(a, b, with_bias ? &bias : nullptr, row, nullptr, accumulate);
      kernels::matmul_kernel(a, b, with_bias ? &bias : nullptr, column, nullptr, accumulate);
      ASSERT_EQ(column.strides(), (Shape{1, 6}));
      EXPECT_ALL_CLOSE(column, row, 1e-6, 1e-6) << "bias " << with_bias << ", accumulate " << accumulate;
      // Transposed operands too (the weight of a linear layer, a transposing view).
      Tensor again = empty_column_major(6, 7);
      kernels::matmul_kernel(a.t().contiguous().t(), b.t().contiguous().t(), with_bias ? &bias : nullptr, again,
                             nullptr, false);
      Tensor plain = zeros({6, 7}, f32);
      kernels::matmul_kernel(a, b, with_bias ? &bias : nullptr, plain, nullptr, false);
      EXPECT_ALL_CLOSE(again, plain, 1e-6, 1e-6);
    }
}

// Products too small to be worth timing are never asked to change layout.
TEST(ColumnMajor, SmallProductsKeepTheirLayout) {
  const Tensor a = uniform({4, 8}, 1), b = uniform({8, 16}, 2);
  EXPECT_FALSE(kernels::column_major_result_is_faster(a, b, true, {4, 16}));
  EXPECT_FALSE(kernels::column_major_result_is_faster(a, b, true, {1, 16}));  // one row: both layouts
}

// A two-layer perceptron's training gradients, as a graph.
struct Perceptron {
  Graph g{"perceptron"};
  Tensor x = g.placeholder(f32, {8, 24}, "x");
  Tensor w1 = g.variable(uniform({32, 24}, 1), "w1"), b1 = g.variable(uniform({32}, 2), "b1");
  Tensor w2 = g.variable(uniform({16, 32}, 3), "w2"), b2 = g.variable(uniform({16}, 4), "b2");
  Tensor w3 = g.variable(uniform({4, 16}, 5), "w3");
  Tensor h1 = relu(linear(x, w1, b1));   // [8, 32]
  Tensor h2 = relu(linear(h1, w2, b2));  // [8, 16]
  Tensor out = linear(h2, w3, Tensor());
  Tensor loss = (out * out).sum();
  std::vector<Tensor> grads = grad(loss, {w1, b1, w2, b2, w3});
};

std::vector<Tensor> fetches(const Perceptron& net) {
  std::vector<Tensor> f = net.grads;
  f.push_back(net.loss);
  return f;
}

// With the layout forced on, the hidden activations, their gradients and the element-wise
// steps between them are stored column-major (explain() says so), and every gradient
// equals the plain plan's. Forced off, nothing is.
TEST(ColumnMajor, TrainingGradientsMatchThePlainPlan) {
  Perceptron net;
  const Tensor value = uniform({8, 24}, 6);
  Session plain(net.g, {.level = OptLevel::O1});
  const std::vector<Tensor> want = plain.run(fetches(net), {{net.x, value}});
  std::string report;
  {
    kernels::ColumnMajorOverride on(true);
    Session planned(net.g, {.level = OptLevel::O2});
    const std::vector<Tensor> got = planned.run(fetches(net), {{net.x, value}});
    for (size_t i = 0; i < want.size(); ++i) EXPECT_ALL_CLOSE(got[i], want[i], 1e-5, 1e-5) << "fetch " << i;
    report = planned.explain();
  }
  // Forward: h1 and h2 (linear_fused with relu), the logits and their square (the loss's
  // element-wise steps read any layout); backward: the gradients reaching h2 and h1
  // (products) and the two relu backwards beside them.
  EXPECT_EQ(count(report, "column-major)"), 8u) << report;
  EXPECT_EQ(count(report, "relu_backward"), 2u) << report;
  for (const char* step : {"linear_fused", "relu_backward"}) {
    size_t at = report.find(std::string(step) + " ");
    ASSERT_NE(at, std::string::npos) << report;
    EXPECT_NE(report.substr(at, report.find('\n', at) - at).find("column-major"), std::string::npos) << report;
  }
  kernels::ColumnMajorOverride off(false);
  Session row_major(net.g, {.level = OptLevel::O2});
  const std::vector<Tensor> got = row_major.run(fetches(net), {{net.x, value}});
  for (size_t i = 0; i < want.size(); ++i) EXPECT_ALL_CLOSE(got[i], want[i], 1e-5, 1e-5) << "fetch " << i;
  EXPECT_EQ(count(row_major.explain(), "column-major"), 0u) << row_major.explain();
}

// Steps side by side (two inter-op workers, one intra-op thread each) give the sequential
// plan's bits with column-major values too: each product's kernel is the same.
TEST(ColumnMajor, ParallelStepsGiveTheSequentialBits) {
  Perceptron net;
  const Tensor value = uniform({8, 24}, 6);
  kernels::ColumnMajorOverride on(true);
  Session sequential(net.g), side_by_side(net.g, {.inter_op_threads = 2, .intra_op_threads = 1});
  const std::vector<Tensor> want = sequential.run(fetches(net), {{net.x, value}});
  const std::vector<Tensor> got = side_by_side.run(fetches(net), {{net.x, value}});
  for (size_t i = 0; i < want.size(); ++i) EXPECT_ALL_CLOSE(got[i], want[i], 0, 0) << "fetch " << i;
}

// A compiled function made again for a second batch size chooses the layout per shape.
TEST(ColumnMajor, EachBatchSizeGetsItsOwnPlan) {
  const Tensor w1 = uniform({32, 24}, 1), b1 = uniform({32}, 2), w2 = uniform({16, 32}, 3);
  auto forward = [&](Tensor x) { return softmax(linear(relu(linear(x, w1, b1)), w2, Tensor()), 1); };
  kernels::ColumnMajorOverride on(true);
  auto compiled = compile(forward);
  for (int64_t batch : {8, 3, 8}) {
    const Tensor x = uniform({batch, 24}, uint64_t(10 + batch));
    EXPECT_ALL_CLOSE(compiled(x), forward(x), 1e-5, 1e-5) << "batch " << batch;
    EXPECT_EQ(count(compiled.explain(), "B, column-major)"), 1u) << compiled.explain();  // the hidden layer
  }
}

// A fetched activation goes back to the caller in its own, plain buffer; a value some
// other op reads (softmax here) stays row-major.
TEST(ColumnMajor, FetchedValuesAndOtherReadersStayRowMajor) {
  Graph g("fetched");
  Tensor x = g.placeholder(f32, {8, 24}, "x");
  Tensor h = relu(linear(x, uniform({32, 24}, 1), uniform({32}, 2)));
  Tensor s = softmax(linear(x, uniform({32, 24}, 3), Tensor()), 1);
  kernels::ColumnMajorOverride on(true);
  Session planned(g, {.level = OptLevel::O2});
  const Tensor value = uniform({8, 24}, 4);
  const std::vector<Tensor> got = planned.run({h, s}, {{x, value}});
  EXPECT_TRUE(got[0].is_contiguous());
  EXPECT_EQ(count(planned.explain(), "column-major"), 0u) << planned.explain();
  Session plain(g, {.level = OptLevel::O1});
  const std::vector<Tensor> want = plain.run({h, s}, {{x, value}});
  EXPECT_ALL_CLOSE(got[0], want[0], 1e-6, 1e-6);
  EXPECT_ALL_CLOSE(got[1], want[1], 1e-6, 1e-6);
}

// A view that transposes a product's result reads it column-major (it then shows a
// row-major matrix); one that reshapes it does not, and the product stays row-major.
TEST(ColumnMajor, OnlyTransposingViewsTakeTheLayout) {
  Graph g("views");
  Tensor x = g.placeholder(f32, {8, 24}, "x");
  Tensor w = uniform({32, 24}, 1);
  Tensor transposed = exp(matmul(x, w.t()).t());            // the transpose: plain [32, 8]
  Tensor reshaped = exp(matmul(x, w.t()).reshape({16, 16}));  // a reshape of [8, 32]
  kernels::ColumnMajorOverride on(true);
  Session planned(g, {.level = OptLevel::O2}), plain(g, {.level = OptLevel::O1});
  const Tensor value = uniform({8, 24}, 2);
  const std::vector<Tensor> got = planned.run({transposed, reshaped}, {{x, value}});
  const std::vector<Tensor> want = plain.run({transposed, reshaped}, {{x, value}});
  EXPECT_ALL_CLOSE(got[0], want[0], 1e-5, 1e-5);
  EXPECT_ALL_CLOSE(got[1], want[1], 1e-5, 1e-5);
  const std::string report = planned.explain();
  EXPECT_EQ(count(report, "B, column-major)"), 1u) << report;  // the first product
}

// A column sliced out of a product's transpose and viewed as a vector (a stacked input's
// gradient, as graph autodiff writes it): with the product column-major the transpose is
// row-major and the column no longer contiguous, so the view could not be made; the
// product stays row-major. (A random program, seed 78892, found it.)
TEST(ColumnMajor, AProductWhoseViewsNeedItsLayoutKeepsIt) {
  Graph g("sliced");
  Tensor a = g.placeholder(f32, {8, 24}, "a");
  Tensor p = matmul(a, uniform({24, 6}, 1));                      // [8, 6]
  Tensor column = exp(slice(p.t(), 1, 0, 1).view({6}));           // the transpose's first column, contiguous as built
  Tensor transposed = exp(matmul(a, uniform({24, 32}, 2)).t());  // beside it, one that may change
  kernels::ColumnMajorOverride on(true);
  Session planned(g, {.level = OptLevel::O2}), plain(g, {.level = OptLevel::O1});
  const Tensor value = uniform({8, 24}, 3);
  const std::vector<Tensor> got = planned.run({column, transposed}, {{a, value}});
  const std::vector<Tensor> want = plain.run({column, transposed}, {{a, value}});
  EXPECT_ALL_CLOSE(got[0], want[0], 1e-5, 1e-5);
  EXPECT_ALL_CLOSE(got[1], want[1], 1e-5, 1e-5);
  const std::string report = planned.explain();
  EXPECT_EQ(count(report, "column-major)"), 1u) << report;  // the second product only
}

// Element-wise steps between two products (SiLU as h * sigmoid(h), which no product
// epilogue computes), fused or not, keep their layout: they read the hidden activation
// column-major and write their results so for the next product, forward and backward.
TEST(ColumnMajor, FusedElementwiseStepsFollowTheLayout) {
  Graph g("silu");
  Tensor x = g.placeholder(f32, {8, 24}, "x");
  Tensor w1 = g.variable(uniform({32, 24}, 1), "w1"), w2 = g.variable(uniform({4, 32}, 2), "w2");
  Tensor h = linear(x, w1, Tensor());
  Tensor out = linear(h * sigmoid(h), w2, Tensor());
  std::vector<Tensor> fetched = grad((out * out).sum(), {w1, w2});
  const Tensor value = uniform({8, 24}, 3);
  Session plain(g, {.level = OptLevel::O1});
  const std::vector<Tensor> want = plain.run(fetched, {{x, value}});
  kernels::ColumnMajorOverride on(true);
  Session planned(g, {.level = OptLevel::O2});
  const std::vector<Tensor> got = planned.run(fetched, {{x, value}});
  for (size_t i = 0; i < want.size(); ++i) EXPECT_ALL_CLOSE(got[i], want[i], 1e-5, 1e-5) << "fetch " << i;
  const std::string report = planned.explain();
  auto lines_with = [&](std::initializer_list<const char*> parts) {
    std::istringstream lines(report);
    size_t n = 0;
    for (std::string line; std::getline(lines, line);)
      n += std::all_of(parts.begin(), parts.end(), [&](const char* p) { return line.find(p) != std::string::npos; });
    return n;
  };
  // Forward: the hidden activation, its sigmoid and their product (not fused: the sigmoid
  // is kept for the backward); backward: the gradient reaching SiLU's result (a product)
  // and the fused step that takes it through SiLU.
  EXPECT_EQ(lines_with({"f32[8,32]", "column-major"}), 5u) << report;
  EXPECT_EQ(lines_with({"fused_elementwise ", "f32[8,32]", "column-major"}), 1u) << report;
}

// A compiled training step with SGD, as the MLP benchmark runs it: the parameters after
// three steps equal eager's.
TEST(ColumnMajor, CompiledTrainingStepMatchesEager) {
  auto train = [](bool compiled) {
    manual_seed(7);
    auto model = nn::mnist_mlp();
    optim::SGD opt(model->parameters(), {.lr = 0.01, .momentum = 0.9});
    const Tensor x = uniform({16, 784}, 8);
    const Tensor y = randint(0, 10, {16});
    auto step = [&](Tensor xx, Tensor yy) {
      opt.zero_grad();
      Tensor loss = cross_entropy(model->forward(xx), yy);
      loss.backward();
      opt.step();
      return loss;
    };
    auto fast = compile(step);
    for (int i = 0; i < 3; ++i) compiled ? fast(x, y) : step(x, y);
    return model->parameters();
  };
  kernels::ColumnMajorOverride on(true);
  const std::vector<Tensor> want = train(false), got = train(true);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_ALL_CLOSE(got[i], want[i], 1e-5, 1e-5) << "parameter " << i;
}

}  // namespace
}  // namespace baton
