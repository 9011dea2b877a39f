// Static mode: placeholders, Session::run with feeds, variables and assign, errors.
#include <gtest/gtest.h>

#include <baton/baton.h>

#include "harness/op_harness.h"

namespace baton {
namespace {

using testing::all_close;
using testing::uniform;

TEST(StaticMode, AddsTwoFedPlaceholders) {
  Graph g;
  Tensor a = g.placeholder(f32, {-1, 3}, "a");
  Tensor b = g.placeholder(f32, {-1, 3}, "b");
  Tensor c = relu(a + b) * 2.0f;
  EXPECT_TRUE(c.is_symbolic());
  EXPECT_EQ(str(c.shape()), "[a_0,3]");
  Session sess(g);
  Tensor ta = tensor<float>({{1, -2, 3}, {4, 5, -6}});
  Tensor tb = ones({2, 3});
  std::vector<Tensor> out = sess.run({c}, {{a, ta}, {b, tb}});
  EXPECT_TRUE(all_close(out[0], relu(ta + tb) * 2.0f, 0, 0));
  // Another batch size reuses the same graph.
  Tensor big = randn({5, 3});
  out = sess.run({c}, {{a, big}, {b, big}});
  EXPECT_TRUE(all_close(out[0], relu(big + big) * 2.0f, 0, 0));
}

TEST(StaticMode, PrintsTheGraph) {
  Graph g("f");
  Tensor x = g.placeholder(f32, {"batch", 784}, "x");
  Tensor w = g.placeholder(f32, {784, 512}, "w");
  Tensor y = relu(matmul(x, w));
  std::string text = g.to_text();
  EXPECT_NE(text.find("graph @f(%x: f32[batch,784], %w: f32[784,512])"), std::string::npos) << text;
  EXPECT_NE(text.find("matmul(%x, %w) : f32[batch,512]"), std::string::npos) << text;
  EXPECT_NE(text.find("static_mode_test.cpp:"), std::string::npos) << text;
  (void)y;
}

TEST(StaticMode, ShapeErrorsAtBuildTimeNameOpShapesAndLine) {
  Graph g;
  Tensor x = g.placeholder(f32, {"batch", 784}, "x");
  Tensor w = g.placeholder(f32, {10, 512}, "w");
  try {
    matmul(x, w);
    FAIL() << "no error";
  } catch (const ShapeError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("matmul"), std::string::npos) << m;
    EXPECT_NE(m.find("[batch,784]"), std::string::npos) << m;
    EXPECT_NE(m.find("[10,512]"), std::string::npos) << m;
    EXPECT_NE(m.find("static_mode_test.cpp"), std::string::npos) << m;
  }
}

// "static_mode_test.cpp:<line>": where the user's code is, as errors name it.
std::string here(int line) { return "static_mode_test.cpp:" + std::to_string(line); }

// Each error names the placeholder or node and the user's line: the run call whose feeds
// are wrong, or where the node the feeds break was built.
TEST(StaticMode, MissingAndMisshapedFeedsNameThePlaceholder) {
  Graph g;
  Tensor a = g.placeholder(f32, {-1, 3}, "a");
  Tensor b = g.placeholder(f32, {-1, 3}, "b");
  const int add_line = __LINE__ + 1;
  Tensor c = a + b;
  Session sess(g);
  const int missing = __LINE__ + 1;
  auto run_missing = [&] { sess.run({c}, {{a, ones({2, 3})}}); };
  EXPECT_THROWS_WITH(ValueError, run_missing(), "placeholder 'b'", "not fed", here(missing));
  const int misshaped = __LINE__ + 1;
  auto run_misshaped = [&] { sess.run({c}, {{a, ones({2, 4})}, {b, ones({2, 3})}}); };
  EXPECT_THROWS_WITH(ShapeError, run_misshaped(), "placeholder 'a'", "[2,4]", "dim 1 must be 3", here(misshaped));
  const int wrong_dtype = __LINE__ + 1;
  auto run_wrong_dtype = [&] { sess.run({c}, {{a, ones({2, 3}, f64)}, {b, ones({2, 3})}}); };
  EXPECT_THROWS_WITH(ShapeError, run_wrong_dtype(), "placeholder 'a'", "f64[2,3]", "dtypes differ", here(wrong_dtype));
  const int wrong_rank = __LINE__ + 1;
  auto run_wrong_rank = [&] { sess.run({c}, {{a, ones({2, 3})}, {b, ones({3})}}); };
  EXPECT_THROWS_WITH(ShapeError, run_wrong_rank(), "placeholder 'b'", "ranks differ", here(wrong_rank));
  // a and b share no symbol, but c = a + b needs equal batches: the plan's specialization
  // for these sizes says so, naming the add and the line that built it.
  EXPECT_THROWS_WITH(ShapeError, sess.run({c}, {{a, ones({2, 3})}, {b, ones({3, 3})}}), "add",
                     "graph node 'add' built at " + here(add_line));
  // The plan still serves feeds that fit.
  EXPECT_TRUE(all_close(sess.run({c}, {{a, ones({2, 3})}, {b, ones({2, 3})}})[0], full({2, 3}, 2.0f), 0, 0));
}

TEST(StaticMode, VariablesKeepStateAcrossRuns) {
  Graph g;
  Tensor counter = g.variable(zeros({2}), "counter");
  Tensor step = g.placeholder(f32, {2}, "step");
  Tensor next = assign(counter, counter + step);
  Session sess(g);
  sess.run({next}, {{step, ones({2})}});
  std::vector<Tensor> out = sess.run({next}, {{step, full({2}, 3.0)}});
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{4, 4}));
  EXPECT_EQ(g.value_of(counter).to_vector<float>(), (std::vector<float>{4, 4}));
  // Fetching something else does not run the assign.
  sess.run({counter * 2.0f}, {});
  EXPECT_EQ(g.value_of(counter).to_vector<float>(), (std::vector<float>{4, 4}));
}

TEST(StaticMode, ItemOnASymbolicTensorPointsToCondAndWhere) {
  Graph g;
  Tensor x = g.placeholder(f32, {3}, "x");
  EXPECT_THROWS_WITH(GraphError, x.sum().item<float>(), "symbolic", "cond", "where",
                     "static_mode_test.cpp");
}

TEST(StaticMode, GraphGradMatchesEagerAutograd) {
  Graph g;
  Tensor x = g.placeholder(f64, {-1, 4}, "x");
  Tensor w = g.variable(uniform({4, 3}), "w");
  Tensor loss = (tanh(matmul(x, w)) * 2.0).sum();
  std::vector<Tensor> grads = grad({loss}, {w});
  Session sess(g);
  Tensor tx = uniform({5, 4});
  std::vector<Tensor> out = sess.run({loss, grads[0]}, {{x, tx}});

  Tensor ew = g.value_of(w).clone().requires_grad_();
  Tensor eloss = (tanh(matmul(tx, ew)) * 2.0).sum();
  eloss.backward();
  EXPECT_TRUE(all_close(out[0], eloss, 1e-12, 1e-12));
  EXPECT_TRUE(all_close(out[1], ew.grad(), 1e-12, 1e-12));
}

// As eagerly, a value of a dtype that is no floating one (a bf16 or u8 copy, a comparison)
// carries no gradient: none flows back through the casts that stored and read it.
TEST(StaticMode, NoGradientFlowsThroughCopiesOfOtherDtypes) {
  Graph g;
  Tensor x = g.placeholder(f32, {4}, "x");
  Tensor w = g.variable(uniform({4}, -2, 2, 1).to(f32), "w");
  Tensor stored = cast(cast(w, DType::bf16), f32) + cast(cast(w, DType::u8), f32) + cast(w > 0.0f, f32);
  Tensor loss = (stored * w * x).sum();
  std::vector<Tensor> grads = grad({loss}, {w});
  Session sess(g);
  const Tensor tx = uniform({4}, -1, 1, 2).to(f32);
  const Tensor got = sess.run({grads[0]}, {{x, tx}}).at(0);

  Tensor ew = g.value_of(w).clone().requires_grad_();
  Tensor estored = cast(cast(ew, DType::bf16), f32) + cast(cast(ew, DType::u8), f32) + cast(ew > 0.0f, f32);
  EXPECT_FALSE(estored.requires_grad());
  (estored * ew * tx).sum().backward();
  EXPECT_TRUE(all_close(got, ew.grad(), 0, 0)) << got << ew.grad();
  EXPECT_TRUE(all_close(got, estored.detach() * tx, 0, 0));  // only the factor w's gradient
}

// A whole training step -- forward, backward, update -- as one graph and one run per step.
TEST(StaticMode, TrainingStepWithVariablesMatchesEagerSgd) {
  Tensor w0 = uniform({4, 3}), b0 = uniform({3}, -1, 1, 5);
  Graph g;
  Tensor x = g.placeholder(f64, {"batch", 4}, "x");
  Tensor t = g.placeholder(f64, {"batch", 3}, "t");
  Tensor w = g.variable(w0, "w"), b = g.variable(b0, "b");
  Tensor loss = mse_loss(tanh(matmul(x, w) + b), t);
  std::vector<Tensor> grads = grad(loss, {w, b});
  Tensor new_w = assign(w, w - grads[0] * 0.5);
  Tensor new_b = assign(b, b - grads[1] * 0.5);
  Session sess(g);

  Tensor ew = w0.clone().requires_grad_(), eb = b0.clone().requires_grad_();
  optim::SGD opt({ew, eb}, {.lr = 0.5});
  for (int step = 0; step < 3; ++step) {
    Tensor bx = uniform({int64_t(5 + step), 4}, -1, 1, uint64_t(10 + step));
    Tensor bt = uniform({int64_t(5 + step), 3}, -1, 1, uint64_t(20 + step));
    Tensor l = sess.run({loss, new_w, new_b}, {{x, bx}, {t, bt}})[0];
    opt.zero_grad();
    Tensor el = mse_loss(tanh(matmul(bx, ew) + eb), bt);
    el.backward();
    opt.step();
    EXPECT_TRUE(all_close(l, el, 1e-12, 1e-12)) << "step " << step;
  }
  EXPECT_TRUE(all_close(g.value_of(w), ew, 1e-12, 1e-12));
  EXPECT_TRUE(all_close(g.value_of(b), eb, 1e-12, 1e-12));
}

TEST(StaticMode, AGraphReadFromTextRuns) {
  Graph g = Graph::from_text(R"(graph @f(%x: f32[batch,3], %w: f32[3,2]) {
  %0 = matmul(%x, %w) : f32[batch,2]
  %1 = relu(%0) : f32[batch,2]
  return %1
})");
  std::vector<Tensor> in = g.inputs();
  ASSERT_EQ(in.size(), 2u);
  Tensor x = randn({4, 3}), w = randn({3, 2});
  Session sess(g);
  Tensor y = sess.run(g.outputs(), {{in[0], x}, {in[1], w}})[0];
  EXPECT_TRUE(all_close(y, relu(matmul(x, w)), 1e-6, 1e-6));
  EXPECT_THROWS_WITH(ValueError, Graph::from_text("graph @f(%x: f32[3]) {\n  %0 = frob(%x) : f32[3]\n  return %0\n}"),
                     "frob");
}

// The running statistics are module buffers (concrete tensors bound by reference): each
// run must start from their current values, as eager calls do.
TEST(StaticMode, BatchNormRunningStatsAccumulateAcrossRuns) {
  Tensor x = tensor<float>({{1, 2}, {3, 6}, {5, 4}});
  Tensor eager_mean = zeros({2}), eager_var = ones({2});
  for (int i = 0; i < 3; ++i) batch_norm(x, eager_mean, eager_var, {}, {}, true);

  Tensor mean = zeros({2}), var = ones({2});
  Graph g;
  Tensor px = g.placeholder(f32, {-1, 2}, "x");
  Tensor y = batch_norm(px, mean, var, {}, {}, true);
  Session sess(g);
  for (int i = 0; i < 3; ++i) sess.run({y}, {{px, x}}, {.run_updates = true});
  EXPECT_TRUE(all_close(mean, eager_mean, 1e-6, 1e-6));
  EXPECT_TRUE(all_close(var, eager_var, 1e-6, 1e-6));
  sess.run({y}, {{px, x}});  // updates run only when asked for
  EXPECT_TRUE(all_close(mean, eager_mean, 1e-6, 1e-6));
}

}  // namespace
}  // namespace baton
