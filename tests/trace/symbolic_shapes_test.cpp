// Shape rules on symbolic dims. Each op family, built on a symbolic batch (and other
// symbolic dims where they make sense), infers a symbolic shape; a Session run for two
// batch sizes matches eager execution of the same code. Rules that cannot be symbolic
// (a conv's output size from a symbolic height) name the dim that must be static.
#include <gtest/gtest.h>

#include <baton/baton.h>

#include <functional>
#include <limits>

#include "harness/op_harness.h"

namespace baton {
namespace {

using testing::all_close;
using testing::uniform;
using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

constexpr int64_t kToEnd = std::numeric_limits<int64_t>::max();

// A graph input: its declared dims (symbols allowed) and its value in each run.
struct Input {
  std::vector<SymDim> dims;
  std::vector<Tensor> runs;
};

// Deterministic f64 values, one tensor per shape (one per run).
std::vector<Tensor> values(const std::vector<Shape>& shapes, double lo = -1, double hi = 1) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < shapes.size(); ++i) out.push_back(uniform(shapes[i], lo, hi, 7 + i));
  return out;
}
std::vector<Tensor> indices(int64_t high, const std::vector<Shape>& shapes) {
  std::vector<Tensor> out;
  for (const Shape& s : shapes) out.push_back(randint(0, high, s));
  return out;
}

// A [batch, ...rest] input fed with batch sizes 2 and 5.
Input batched(std::vector<SymDim> rest, const Shape& static_rest) {
  std::vector<SymDim> dims{"batch"};
  dims.insert(dims.end(), rest.begin(), rest.end());
  Shape small = static_rest, large = static_rest;
  small.insert(0, 2);
  large.insert(0, 5);
  return {dims, values({small, large})};
}

// The printed form of a shape whose dims may be symbol products ("batch*seq"), the way
// Shape prints it (factors in a canonical order).
std::string shape_str(const std::vector<std::string>& dims) {
  Shape s;
  for (const auto& d : dims) s.push_back(sym::parse(d));
  return str(s);
}

// Builds f on placeholders, expects the inferred shape `shape`, then runs the graph once
// per value set and compares each result with f run eagerly on the same values.
void expect_symbolic(const std::vector<Input>& inputs, const Fn& f, const std::string& shape,
                     double tol = 1e-10) {
  Graph g;
  std::vector<Tensor> xs;
  for (size_t i = 0; i < inputs.size(); ++i)
    xs.push_back(g.placeholder(inputs[i].runs.at(0).dtype(), inputs[i].dims, str("x", i)));
  Tensor y = f(xs);
  ASSERT_TRUE(y.is_symbolic());
  EXPECT_EQ(str(y.shape()), shape);
  Session sess(g);
  for (size_t r = 0; r < inputs[0].runs.size(); ++r) {
    Session::Feeds feeds;
    std::vector<Tensor> concrete;
    for (size_t i = 0; i < inputs.size(); ++i) {
      feeds.push_back({xs[i], inputs[i].runs.at(r)});
      concrete.push_back(inputs[i].runs.at(r));
    }
    Tensor got = sess.run({y}, feeds).at(0);
    EXPECT_TRUE(all_close(got, f(concrete), tol, tol)) << shape << ", run " << r;
  }
}

void expect_symbolic(const Input& x, const std::function<Tensor(const Tensor&)>& f,
                     const std::string& shape, double tol = 1e-10) {
  expect_symbolic({x}, [&](const std::vector<Tensor>& in) { return f(in[0]); }, shape, tol);
}

// The gradient of a scalar loss(x, w) w.r.t. w, built in a graph with x a placeholder and
// w a variable, matches eager autograd for every run of x.
void expect_symbolic_grad(const Input& x, const Tensor& w_init,
                          const std::function<Tensor(const Tensor&, const Tensor&)>& loss) {
  Graph g;
  Tensor px = g.placeholder(x.runs.at(0).dtype(), x.dims, "x");
  Tensor w = g.variable(w_init, "w");
  Tensor dw = grad({loss(px, w)}, {w}).at(0);
  Session sess(g);
  for (const Tensor& value : x.runs) {
    Tensor got = sess.run({dw}, {{px, value}}).at(0);
    Tensor ew = w_init.clone().requires_grad_();
    loss(value, ew).backward();
    EXPECT_TRUE(all_close(got, ew.grad(), 1e-10, 1e-10)) << "batch " << value.size(0);
  }
}

// --- views ---

TEST(SymbolicShapes, FlattenAndReshapeInferFromTheElementCount) {
  Input x = batched({28, 28}, {28, 28});
  expect_symbolic(x, [](const Tensor& t) { return flatten(t, 1); }, "[batch,784]");
  expect_symbolic(x, [](const Tensor& t) { return flatten(t); }, "[784*batch]");
  expect_symbolic(x, [](const Tensor& t) { return flatten(t, 0, 1); }, "[28*batch,28]");
  expect_symbolic(x, [](const Tensor& t) { return reshape(t, {-1, 784}); }, "[batch,784]");
  expect_symbolic(x, [](const Tensor& t) { return reshape(t, {-1}); }, "[784*batch]");
  expect_symbolic(x, [](const Tensor& t) { return reshape(t, {-1, 28, 4, 7}); }, "[batch,28,4,7]");
  expect_symbolic(x, [](const Tensor& t) { return reshape(flatten(t), {-1, 14}); }, "[56*batch,14]");
}

TEST(SymbolicShapes, ViewWithTheInputsOwnBatchSize) {
  // x.size(0) is the symbol: the attribute holds it and each run resolves it.
  Input x = batched({28, 28}, {28, 28});
  expect_symbolic(x, [](const Tensor& t) { return t.view({t.size(0), -1}); }, "[batch,784]");
  expect_symbolic(x, [](const Tensor& t) { return t.view({t.size(0), 4, -1}); }, "[batch,4,196]");
  expect_symbolic(x, [](const Tensor& t) { return t.reshape({t.size(0), 784}); }, "[batch,784]");
}

TEST(SymbolicShapes, ViewsOfASymbolicSequence) {
  Input x{{"batch", "seq", 8}, values({{2, 3, 8}, {5, 4, 8}})};
  expect_symbolic(x, [](const Tensor& t) { return reshape(t, {-1, 8}); },
                  shape_str({"batch*seq", "8"}));
  expect_symbolic(x, [](const Tensor& t) { return flatten(t, 1); }, shape_str({"batch", "8*seq"}));
  expect_symbolic(x, [](const Tensor& t) { return t.view({t.size(0), t.size(1), 2, 4}); },
                  "[batch,seq,2,4]");
  expect_symbolic(x, [](const Tensor& t) { return unsqueeze(t, 1).reshape({-1, 8}); },
                  shape_str({"batch*seq", "8"}));
}

TEST(SymbolicShapes, AViewThatDoesNotDivideTheElementCountIsAnError) {
  Graph g;
  Tensor x = g.placeholder(f32, {"batch", 3}, "x");
  EXPECT_THROWS_WITH(ShapeError, reshape(x, {-1, 2}), "view", "[-1,2]", "3*batch elements");
  EXPECT_THROWS_WITH(ShapeError, reshape(x, {4, 3}), "view", "[4,3]", "3*batch elements");
}

TEST(SymbolicShapes, PermuteTransposeAndUnsqueeze) {
  Input x = batched({3, 4}, {3, 4});
  expect_symbolic(x, [](const Tensor& t) { return transpose(t, 1, 2); }, "[batch,4,3]");
  expect_symbolic(x, [](const Tensor& t) { return permute(t, {2, 0, 1}); }, "[4,batch,3]");
  expect_symbolic(x, [](const Tensor& t) { return transpose(t, 0, 1).reshape({3, -1}); },
                  "[3,4*batch]");
  expect_symbolic(x, [](const Tensor& t) { return unsqueeze(t, 1); }, "[batch,1,3,4]");
  expect_symbolic(x, [](const Tensor& t) { return unsqueeze(transpose(t, 0, 2), 0).contiguous(); },
                  "[1,4,3,batch]");
  expect_symbolic(x, [](const Tensor& t) { return squeeze(unsqueeze(t, 3), 3); }, "[batch,3,4]");
  expect_symbolic(batched({3}, {3}), [](const Tensor& t) { return t.t(); }, "[3,batch]");
}

TEST(SymbolicShapes, SqueezingASymbolicDimIsAnError) {
  // batch may be 1 in one run and not in another: the output rank would change.
  Graph g;
  Tensor x = g.placeholder(f32, {"batch", 3}, "x");
  EXPECT_THROWS_WITH(ShapeError, squeeze(x, 0), "squeeze", "symbolic (batch)", "must be static");
}

TEST(SymbolicShapes, ExpandToASymbolicSize) {
  Input x = batched({1}, {1});
  Input row{{1, 5}, {uniform({1, 5}), uniform({1, 5})}};
  Input vec{{5}, {uniform({5}), uniform({5})}};
  expect_symbolic(x, [](const Tensor& t) { return t.expand({-1, 5}); }, "[batch,5]");
  expect_symbolic({x, row}, [](const std::vector<Tensor>& in) {
    return in[1].expand({in[0].size(0), 5});
  }, "[batch,5]");
  expect_symbolic({x, vec}, [](const std::vector<Tensor>& in) {
    return in[1].expand({in[0].size(0), 2, 5}).contiguous();
  }, "[batch,2,5]");
}

// --- slice, cat, pad ---

TEST(SymbolicShapes, SliceAlongStaticAndSymbolicDims) {
  Input x = batched({10}, {10});
  expect_symbolic(x, [](const Tensor& t) { return slice(t, 1, 2, 9, 2); }, "[batch,4]");
  expect_symbolic(x, [](const Tensor& t) { return slice(t, 1, -3, kToEnd); }, "[batch,3]");
  expect_symbolic(x, [](const Tensor& t) { return slice(t, 0, 0, t.size(0)); }, "[batch,10]");
  expect_symbolic(x, [](const Tensor& t) { return slice(t, 0, 0, kToEnd); }, "[batch,10]");
  // Static bounds are taken to lie inside the symbolic dim (every run here has 2 or more).
  expect_symbolic(x, [](const Tensor& t) { return slice(t, 0, -2, kToEnd); }, "[2,10]");
  expect_symbolic(x, [](const Tensor& t) { return slice(t, 0, 0, 2); }, "[2,10]");
  expect_symbolic(x, [](const Tensor& t) { return slice(t, 0, -1, t.size(0)); }, "[1,10]");
}

TEST(SymbolicShapes, ASliceOfNoSymbolicSizeIsAnError) {
  Graph g;
  Tensor x = g.placeholder(f32, {"batch", 10}, "x");
  // batch - 1 and batch / 2 are no single symbol.
  EXPECT_THROWS_WITH(ShapeError, slice(x, 0, 1, kToEnd), "slice", "[1, end) of dim 0", "(size batch)",
                     "make that dim and the bounds static");
  EXPECT_THROWS_WITH(ShapeError, slice(x, 0, 0, -1), "slice", "[0, -1) of dim 0");
  EXPECT_THROWS_WITH(ShapeError, slice(x, 0, 0, x.size(0), 2), "slice", "(size batch)");
}

TEST(SymbolicShapes, CatAndStackAddSymbolicSizes) {
  Input x = batched({10}, {10});
  Input y{{"batch", 5}, values({{2, 5}, {5, 5}})};
  expect_symbolic({x, y}, [](const std::vector<Tensor>& in) { return cat({in[0], in[1]}, 1); },
                  "[batch,15]");
  expect_symbolic(x, [](const Tensor& t) { return cat({t, t * 2.0, t}, 0); }, "[3*batch,10]");
  expect_symbolic(x, [](const Tensor& t) { return cat({t, cat({t, t}, 0)}, 0); }, "[3*batch,10]");
  expect_symbolic(x, [](const Tensor& t) { return stack({t, t}, 1); }, "[batch,2,10]");
  expect_symbolic(x, [](const Tensor& t) { return stack({t, -t}, 0); }, "[2,batch,10]");
  expect_symbolic(x, [](const Tensor& t) { return split(t, 4, 1).at(2); }, "[batch,2]");
}

TEST(SymbolicShapes, CatOfTwoSymbolsAlongTheirDimIsAnError) {
  Graph g;
  Tensor a = g.placeholder(f32, {"batch", 10}, "a");
  Tensor b = g.placeholder(f32, {"other", 10}, "b");
  EXPECT_THROWS_WITH(ShapeError, cat({a, b}, 0), "cat", "batch + other", "make these dims static");
  EXPECT_THROWS_WITH(ShapeError, cat({a, g.placeholder(f32, {3, 10}, "c")}, 0), "cat", "batch + 3");
  EXPECT_THROWS_WITH(ShapeError, split(a, 2, 0), "split", "symbolic (batch)", "must be static");
  // Outside the cat dim an unknown size is trusted; the run checks it.
  Tensor c = cat({a, b}, 1);
  EXPECT_EQ(str(c.shape()), "[batch,20]");
  Session sess(g);
  EXPECT_THROWS_WITH(ShapeError, sess.run({c}, {{a, ones({2, 10})}, {b, ones({3, 10})}}), "cat");
}

TEST(SymbolicShapes, CatGradientSlicesAtSymbolicOffsets) {
  // The gradient of cat slices its output at 0, batch, 2*batch and 3*batch.
  expect_symbolic_grad(batched({4}, {4}), uniform({4}), [](const Tensor& x, const Tensor& w) {
    Tensor joined = cat({x, x * 2.0, x * w}, 0);
    return (joined * joined).sum();
  });
}

TEST(SymbolicShapes, PadKeepsASymbolicBatch) {
  Input x = batched({10}, {10});
  expect_symbolic(x, [](const Tensor& t) { return pad(t, {1, 2}, 0.5); }, "[batch,13]");
  expect_symbolic_grad(x, uniform({10}), [](const Tensor& t, const Tensor& w) {
    Tensor p = pad(t * w, {1, 2});
    return (p * p).sum();
  });
  Graph g;
  Tensor xs = g.placeholder(f32, {"batch", 10}, "x");
  EXPECT_THROWS_WITH(ShapeError, pad(xs, {0, 0, 1, 0}), "pad", "a padded dim (dim 0 of [batch,10])",
                     "symbolic (batch)", "must be static");
}

// --- indexing ---

TEST(SymbolicShapes, GatherIndexSelectAndEmbedding) {
  Tensor table = uniform({20, 8});
  Input idx{{"batch", 5}, indices(20, {{2, 5}, {5, 5}})};
  expect_symbolic(idx, [&](const Tensor& i) { return embedding(table, i); }, "[batch,5,8]");

  Input x = batched({10}, {10});
  Tensor cols = tensor<int64_t>({3, 0, 7});
  expect_symbolic(x, [&](const Tensor& t) { return index_select(t, 1, cols); }, "[batch,3]");

  Input rows{{"k"}, {randint(0, 2, {3}), randint(0, 5, {4})}};
  expect_symbolic({x, rows}, [](const std::vector<Tensor>& in) {
    return index_select(in[0], 0, in[1]);
  }, "[k,10]");

  Input picks{{"batch", 4}, indices(10, {{2, 4}, {5, 4}})};
  expect_symbolic({x, picks}, [](const std::vector<Tensor>& in) { return gather(in[0], 1, in[1]); },
                  "[batch,4]");
}

TEST(SymbolicShapes, EmbeddingGradientWithASymbolicBatch) {
  Graph g;
  Tensor idx = g.placeholder(i64, {"batch", 3}, "idx");
  Tensor w = g.variable(uniform({6, 4}), "w");
  Tensor e = embedding(w, idx);
  Tensor dw = grad({(e * e).sum()}, {w}).at(0);
  Session sess(g);
  for (int64_t n : {2, 5}) {
    Tensor value = randint(0, 6, {n, 3});
    Tensor ew = g.value_of(w).clone().requires_grad_();
    Tensor ee = embedding(ew, value);
    (ee * ee).sum().backward();
    EXPECT_TRUE(all_close(sess.run({dw}, {{idx, value}}).at(0), ew.grad(), 1e-12, 1e-12));
  }
}

// --- matmul, linear, conv, pooling ---

TEST(SymbolicShapes, MatmulAndLinear) {
  Tensor w = uniform({8, 3}), v = uniform({8}), weight = uniform({3, 8}), bias = uniform({3});
  Input x = batched({8}, {8});
  expect_symbolic(x, [&](const Tensor& t) { return matmul(t, w); }, "[batch,3]");
  expect_symbolic(x, [&](const Tensor& t) { return matmul(t, v); }, "[batch]");
  expect_symbolic(batched({2, 8}, {2, 8}), [&](const Tensor& t) { return matmul(t, w); },
                  "[batch,2,3]");
  expect_symbolic(x, [&](const Tensor& t) { return matmul(t, t.t()); }, "[batch,batch]");
  Input seq{{"batch", "seq", 8}, values({{2, 3, 8}, {5, 1, 8}})};
  expect_symbolic(seq, [&](const Tensor& t) { return linear(t, weight, bias); }, "[batch,seq,3]");
  expect_symbolic_grad(x, weight, [&](const Tensor& t, const Tensor& wt) {
    return linear(t, wt, bias).sum();
  });
  // The weight gradient flattens [batch, seq] into rows: reshape(-1) on two symbols.
  expect_symbolic_grad(seq, weight, [&](const Tensor& t, const Tensor& wt) {
    Tensor y = linear(t, wt, bias);
    return (y * y).sum();
  });
}

TEST(SymbolicShapes, ConvAndPoolingKeepASymbolicBatch) {
  Tensor w = uniform({4, 3, 3, 3}), b = uniform({4});
  Input x = batched({3, 8, 8}, {3, 8, 8});
  Conv2dOptions same{{1, 1}, {1, 1}};
  expect_symbolic(x, [&](const Tensor& t) { return conv2d(t, w, b, same); }, "[batch,4,8,8]");
  expect_symbolic(x, [&](const Tensor& t) { return conv2d(t, w, b, {{2, 2}}); }, "[batch,4,3,3]");
  expect_symbolic(x, [&](const Tensor& t) { return max_pool2d(conv2d(t, w, b, same), {}); },
                  "[batch,4,4,4]");
  expect_symbolic(x, [&](const Tensor& t) { return avg_pool2d(t, {{3, 3}, {1, 1}, {1, 1}}); },
                  "[batch,3,8,8]");
  expect_symbolic(x, [&](const Tensor& t) { return adaptive_avg_pool2d(t, {3, 3}); }, "[batch,3,3,3]");
  expect_symbolic(x, [&](const Tensor& t) { return flatten(adaptive_avg_pool2d(t, {1, 1}), 1); },
                  "[batch,3]");
  expect_symbolic_grad(x, w, [&](const Tensor& t, const Tensor& wt) {
    Tensor y = max_pool2d(relu(conv2d(t, wt, b, same)), {});
    return (flatten(y, 1) * 0.5).sum();
  });
  // A scale before the conv: its gradient goes through the backward ops whose input_shape
  // attribute holds the symbolic batch.
  expect_symbolic_grad(x, uniform({3, 1, 1}), [&](const Tensor& t, const Tensor& scale) {
    Tensor y = conv2d(t * scale, w, b, same);
    Tensor pooled = avg_pool2d(y, {}) + adaptive_avg_pool2d(y, {3, 3}).sum();
    return (pooled * pooled).sum();
  });
}

TEST(SymbolicShapes, AdaptivePoolingTakesSymbolicSpatialSizes) {
  // Its output size is static whatever the input's; the windows come from each run's size.
  Input x{{"batch", 3, "h", "w"}, values({{2, 3, 6, 4}, {5, 3, 3, 7}})};
  expect_symbolic(x, [](const Tensor& t) { return adaptive_avg_pool2d(t, {1, 1}); }, "[batch,3,1,1]");
  expect_symbolic(x, [](const Tensor& t) { return adaptive_avg_pool2d(t, {2, 3}); }, "[batch,3,2,3]");
}

TEST(SymbolicShapes, ConvAndPoolingOnASymbolicImageSizeSayItMustBeStatic) {
  Graph g;
  Tensor x = g.placeholder(f32, {"batch", 3, "h", 8}, "x");
  Tensor w = ones({4, 3, 3, 3});
  EXPECT_THROWS_WITH(ShapeError, conv2d(x, w), "conv2d", "the input height (dim 2 of [batch,3,h,8])",
                     "symbolic (h)", "must be static", "output size");
  Tensor y = g.placeholder(f32, {"batch", 3, 8, "w"}, "y");
  EXPECT_THROWS_WITH(ShapeError, max_pool2d(y, {}), "max_pool2d", "the input width", "symbolic (w)",
                     "must be static");
  EXPECT_THROWS_WITH(ShapeError, avg_pool2d(y, {}), "avg_pool2d", "symbolic (w)");
  // Grouped channels are split arithmetically, so they must be static too.
  Tensor z = g.placeholder(f32, {"batch", "c", 8, 8}, "z");
  EXPECT_THROWS_WITH(ShapeError, conv2d(z, ones({4, 1, 3, 3}), {}, {.groups = 2}), "conv2d",
                     "the input channel count", "symbolic (c)");
}

// --- reductions, softmax, losses, normalization ---

TEST(SymbolicShapes, ReductionsAndSoftmax) {
  Input x = batched({10}, {10});
  expect_symbolic(x, [](const Tensor& t) { return sum(t, {1}); }, "[batch]");
  expect_symbolic(x, [](const Tensor& t) { return sum(t, {0}, true); }, "[1,10]");
  expect_symbolic(x, [](const Tensor& t) { return max(t, {1}, true); }, "[batch,1]");
  expect_symbolic(x, [](const Tensor& t) { return argmax(t, 1); }, "[batch]");
  expect_symbolic(x, [](const Tensor& t) { return logsumexp(t, {1}); }, "[batch]");
  expect_symbolic(x, [](const Tensor& t) { return softmax(t, 1); }, "[batch,10]");
  expect_symbolic(x, [](const Tensor& t) { return log_softmax(t, 0); }, "[batch,10]");
  // Means over the batch divide by a count each run computes.
  expect_symbolic(x, [](const Tensor& t) { return mean(t, {0}); }, "[10]");
  expect_symbolic(x, [](const Tensor& t) { return mean(t); }, "[]");
  expect_symbolic(x, [](const Tensor& t) { return var(t, {0}); }, "[10]");
}

TEST(SymbolicShapes, Losses) {
  Input logits = batched({10}, {10});
  Input target{{"batch"}, indices(10, {{2}, {5}})};
  for (std::string reduction : {"mean", "sum", "none"}) {
    const std::string shape = reduction == "none" ? "[batch]" : "[]";
    expect_symbolic({logits, target}, [&](const std::vector<Tensor>& in) {
      return cross_entropy(in[0], in[1], reduction);
    }, shape);
    expect_symbolic({logits, target}, [&](const std::vector<Tensor>& in) {
      return nll_loss(log_softmax(in[0], 1), in[1], reduction);
    }, shape);
  }
  Input other{{"batch", 10}, values({{2, 10}, {5, 10}}, 0, 2)};
  expect_symbolic({logits, other}, [](const std::vector<Tensor>& in) {
    return mse_loss(in[0], in[1]);
  }, "[]");
}

TEST(SymbolicShapes, Normalization) {
  Input x = batched({4, 3, 3}, {4, 3, 3});
  Tensor running_mean = uniform({4}), running_var = uniform({4}, 0.5, 2);
  Tensor weight = uniform({4}), bias = uniform({4});
  expect_symbolic(x, [&](const Tensor& t) {
    return batch_norm(t, running_mean, running_var, weight, bias, false);
  }, "[batch,4,3,3]");
  // Training mode normalizes with the statistics of each run's batch. (Each call updates
  // its running statistics; the graph's update only runs when fetched, so copies.)
  expect_symbolic(x, [&](const Tensor& t) {
    return batch_norm(t, running_mean.clone(), running_var.clone(), weight, bias, true);
  }, "[batch,4,3,3]");
  Input seq{{"batch", "seq", 8}, values({{2, 3, 8}, {5, 1, 8}})};
  expect_symbolic(seq, [](const Tensor& t) { return layer_norm(t, {8}); }, "[batch,seq,8]");
}

// --- element-wise ops ---

TEST(SymbolicShapes, ElementwiseOpsBroadcastAgainstStaticSizes) {
  Input x = batched({10}, {10});
  Input col = batched({1}, {1});
  Tensor row = uniform({10});
  expect_symbolic(x, [](const Tensor& t) { return sigmoid(relu(t) + 1.0) * exp(t); }, "[batch,10]");
  expect_symbolic(x, [&](const Tensor& t) { return where(t > 0.0, t * row, clamp(t, -0.5, 0.5)); },
                  "[batch,10]");
  expect_symbolic(x, [](const Tensor& t) { return cast(t, f32); }, "[batch,10]", 1e-6);
  expect_symbolic({col, x}, [](const std::vector<Tensor>& in) { return in[0] - in[1]; }, "[batch,10]");
  expect_symbolic({col, x}, [](const std::vector<Tensor>& in) { return cast(eq(in[0], in[1]), f64); },
                  "[batch,10]");
}

TEST(SymbolicShapes, DropoutDrawsItsMaskForEachRunsShape) {
  Graph g;
  Tensor x = g.placeholder(f64, {"batch", 10}, "x");
  Tensor y = dropout(x, 0.5, true);
  EXPECT_EQ(str(y.shape()), "[batch,10]");
  Session sess(g);
  for (int64_t n : {2, 5}) {
    Tensor value = uniform({n, 10});
    manual_seed(11);
    Tensor got = sess.run({y}, {{x, value}}).at(0);
    manual_seed(11);
    EXPECT_TRUE(all_close(got, dropout(value, 0.5, true), 0, 0)) << "batch " << n;
  }
}

}  // namespace
}  // namespace baton
