// compile(): tracing, plan cache per signature, retrace explanations, state by reference,
// gradients and optimizer updates written back.
#include <gtest/gtest.h>

#include <baton/baton.h>

#include "graph/text.h"
#include "harness/op_harness.h"
#include "harness/twin_models.h"

namespace baton {
namespace {

using testing::all_close;
using testing::uniform;
using testing::uniform_f32;

TEST(Compile, TracesOnceAndReplays) {
  int calls = 0;
  auto f = compile([&](Tensor x) {
    ++calls;
    return (x + 1.0f) * 2.0f;
  });
  Tensor a = tensor<float>({1, 2, 3});
  EXPECT_EQ(f(a).to_vector<float>(), (std::vector<float>{4, 6, 8}));
  EXPECT_EQ(f(a * 2.0f).to_vector<float>(), (std::vector<float>{6, 10, 14}));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(f.num_traces(), 1u);
  EXPECT_NE(f.explain().find("first call"), std::string::npos) << f.explain();
  std::string text = f.graph().to_text();
  EXPECT_NE(text.find("add("), std::string::npos) << text;
  EXPECT_NE(text.find("mul("), std::string::npos) << text;
}

TEST(Compile, RetraceExplainsInputDimOldAndNew) {
  auto f = compile([](Tensor x) { return relu(x); });
  f(ones({64, 10}));
  f(ones({32, 10}));
  EXPECT_EQ(f.num_traces(), 2u);
  std::string why = f.explain();
  EXPECT_NE(why.find("input 0 dim 0 changed from 64 to 32"), std::string::npos) << why;
  f(ones({64, 10}));  // still cached
  EXPECT_EQ(f.num_traces(), 2u);
  f(ones({64, 10}, f64));
  EXPECT_NE(f.explain().find("input 0 changed dtype from f32 to f64"), std::string::npos) << f.explain();
}

TEST(Compile, RetraceExplanationListsEveryChangedDim) {
  auto f = compile([](Tensor x, Tensor y) { return x.sum() + y.sum(); });
  f(ones({64, 10}), ones({64}));
  f(ones({32, 10}), ones({32}));
  std::string why = f.explain();
  EXPECT_NE(why.find("input 0 dim 0 changed from 64 to 32"), std::string::npos) << why;
  EXPECT_NE(why.find("input 1 dim 0 changed from 64 to 32"), std::string::npos) << why;
  EXPECT_NE(why.find(".dynamic_dims = {{0, 0}, {1, 0}}"), std::string::npos) << why;
}

TEST(Compile, DynamicDimsShareOnePlan) {
  auto f = compile([](Tensor x, Tensor w) { return relu(matmul(x, w)); },
                   {.dynamic_dims = {{0, 0, "batch"}}});
  Tensor w = randn({10, 4});
  for (int64_t batch : {3, 7, 1}) {
    Tensor x = randn({batch, 10});
    EXPECT_TRUE(all_close(f(x, w), relu(matmul(x, w)), 1e-6, 1e-6));
  }
  EXPECT_EQ(f.num_traces(), 1u);
  EXPECT_NE(f.graph().to_text().find("f32[batch,4]"), std::string::npos) << f.graph().to_text();
}

TEST(Compile, ADynamicDimThatDoesNotExistIsAnError) {
  auto f = compile([](Tensor x) { return x * 2.0f; }, {.dynamic_dims = {{0, 2}}});
  EXPECT_THROWS_WITH(ValueError, f(ones({3, 4})), "dynamic dim {0, 2}", "[3,4]", "compile_test.cpp");
}

// "compile_test.cpp:<line>": where the user's code is, as errors name it.
std::string here(int line) { return "compile_test.cpp:" + std::to_string(line); }

// A call the cached plan cannot serve is an error naming the input or the node and the
// user's line, never a result computed for other sizes.
TEST(Compile, ACallThePlanCannotServeNamesTheInputOrNodeAndTheLine) {
  // One symbol for both batch dims: a call whose batches differ has the signature the plan
  // was traced for (both dims symbolic), but no size of the symbol fits both inputs.
  auto scale = compile([](Tensor x, Tensor y) { return x * y; },
                       {.dynamic_dims = {{0, 0, "batch"}, {1, 0, "batch"}}, .name = "scale"});
  EXPECT_TRUE(all_close(scale(ones({2, 3}), full({2, 3}, 2.0)), full({2, 3}, 2.0), 0, 0));
  const int mismatched = __LINE__ + 1;
  auto call_mismatched = [&] { scale(ones({2, 3}), ones({4, 3})); };
  EXPECT_THROWS_WITH(ShapeError, call_mismatched(), "[scale] input 1 expects f32[batch,3], got f32[4,3]",
                     "dim 0 is 'batch', already 2", here(mismatched));
  EXPECT_EQ(scale.num_traces(), 1u);

  // Two symbols: the trace trusts the add (they may match, or one be 1); a call where they
  // do not breaks the plan's specialization for its sizes, which names the add and the
  // line in the function that built it.
  const int add_line = __LINE__ + 1;
  auto add = compile([](Tensor x, Tensor y) { return x + y; }, {.dynamic_dims = {{0, 0}, {1, 0}}});
  EXPECT_TRUE(all_close(add(ones({2, 3}), ones({1, 3})), full({2, 3}, 2.0), 0, 0));
  EXPECT_THROWS_WITH(ShapeError, add(ones({2, 3}), ones({4, 3})), "[add]",
                     "graph node 'add' built at " + here(add_line));
  EXPECT_EQ(add.num_traces(), 1u);

  // Another rank or dtype retraces: the function's ops reject what they cannot take, at
  // the line of the op; what they take gets a plan of its own.
  const Tensor w = ones({3, 2});
  const int matmul_line = __LINE__ + 1;
  auto project = compile([&](Tensor x) { return matmul(x, w); });
  EXPECT_TRUE(all_close(project(ones({4, 3})), full({4, 2}, 3.0), 0, 0));
  EXPECT_THROWS_WITH(ShapeError, project(ones({2, 4, 5})), "[matmul]", "[2,4,5]", here(matmul_line));
  EXPECT_THROWS_WITH(ShapeError, project(ones({4})), "[matmul]", here(matmul_line));
  EXPECT_EQ(project.num_cached_plans(), 1u);  // the failed traces cached nothing
  const Tensor wide = project(ones({4, 3}, f64));
  EXPECT_EQ(wide.dtype(), matmul(ones({4, 3}, f64), w).dtype());
  EXPECT_TRUE(all_close(wide, full({4, 2}, 3.0), 0, 0));
  EXPECT_EQ(project.num_traces(), 2u);  // a failed trace is not counted
}

TEST(Compile, BackwardThroughACompiledResultSaysItIsNotSupported) {
  Tensor w = ones({3}).requires_grad_();
  auto f = compile([&](Tensor x) { return x * w; });
  Tensor y = f(ones({3}));
  EXPECT_THROWS_WITH(AutogradError, y.sum().backward(), "compiled", "backward() inside");
  auto identity = compile([&](Tensor) { return w; });
  EXPECT_TRUE(identity(ones({1})).is_leaf());  // state returned as it is stays a leaf
}

TEST(Compile, EvictsTheLeastRecentlyUsedPlan) {
  auto f = compile([](Tensor x) { return x * 2.0f; }, {.max_plans = 2});
  f(ones({1}));
  f(ones({2}));
  f(ones({3}));
  EXPECT_EQ(f.num_cached_plans(), 2u);
  f(ones({1}));  // evicted: traced again
  EXPECT_EQ(f.num_traces(), 4u);
}

TEST(Compile, ReadsStateByReference) {
  Tensor w = ones({3});
  auto f = compile([&](Tensor x) { return x * w; });
  EXPECT_EQ(f(full({3}, 2.0)).to_vector<float>(), (std::vector<float>{2, 2, 2}));
  w.fill_(5);
  EXPECT_EQ(f(full({3}, 2.0)).to_vector<float>(), (std::vector<float>{10, 10, 10}));
}

TEST(Compile, ItemInsideATraceExplainsCondAndWhere) {
  auto f = compile([](Tensor x) { return x.sum().item<float>() > 0 ? x : -x; });
  EXPECT_THROWS_WITH(GraphError, f(ones({2})), "symbolic", "cond", "where");
}

TEST(Compile, TrainingStepMatchesEager) {
  testing::TwinMlps twins;  // 0 runs eagerly, 1 compiled
  auto compiled = compile([&](Tensor x, Tensor y) { return twins.step(1, x, y); });
  for (int i = 0; i < 3; ++i) {
    auto [x, y] = testing::TwinMlps::batch(i);
    Tensor eager_loss = twins.step(0, x, y);
    Tensor compiled_loss = compiled(x, y);
    EXPECT_TRUE(all_close(compiled_loss, eager_loss, 1e-5, 1e-5)) << "step " << i;
  }
  EXPECT_EQ(compiled.num_traces(), 1u);
  auto ep = twins.model[0]->parameters(), cp = twins.model[1]->parameters();
  for (size_t i = 0; i < ep.size(); ++i) {
    EXPECT_TRUE(all_close(cp[i], ep[i], 1e-5, 1e-5)) << "parameter " << i;
    EXPECT_TRUE(all_close(cp[i].grad(), ep[i].grad(), 1e-5, 1e-5)) << "grad " << i;
  }
}

std::vector<float> values(const Tensor& t) { return t.defined() ? t.to_vector<float>() : std::vector<float>{}; }

// A compiled step that clears w's gradient first, then backward() of (x * w).sum(): the
// gradient it leaves is x.
auto compiled_fresh_gradient(const Tensor& w) {
  return compile([w](Tensor x) {
    w.zero_grad();
    Tensor loss = (x * w).sum();
    loss.backward();
    return loss;
  });
}

// As eagerly, backward() adds to a gradient the call finds and sets one it does not find: a
// plan traced one way serves the calls that find the gradient that way, and a call that
// finds it the other way traces again, saying why.
TEST(Compile, GradientsAccumulateAcrossCallsAsEagerly) {
  Tensor w = ones({3}).requires_grad_(), e = ones({3}).requires_grad_();
  auto f = compile([&](Tensor x) {
    Tensor loss = (x * w).sum();
    loss.backward();
    return loss;
  });
  for (int call = 1; call <= 3; ++call) {
    f(full({3}, 2.0));
    (full({3}, 2.0) * e).sum().backward();
    EXPECT_EQ(values(w.grad()), values(e.grad())) << "call " << call;
  }
  EXPECT_EQ(f.num_traces(), 2u);  // without a gradient, then adding to one
  EXPECT_NE(f.explain().find("the gradient of a leaf f32[3] was undefined when traced and is defined now"),
            std::string::npos)
      << f.explain();
}

TEST(Compile, TheGradientACallAddsToIsTheOneTheLeafHoldsThen) {
  Tensor w = ones({3}).requires_grad_();
  w.set_grad(full({3}, 10.0));
  auto f = compile([&](Tensor x) {
    Tensor loss = (x * w).sum();
    loss.backward();
    return loss;
  });
  f(full({3}, 2.0));
  EXPECT_EQ(values(w.grad()), (std::vector<float>{12, 12, 12}));
  w.zero_grad();
  f(full({3}, 2.0));
  EXPECT_EQ(values(w.grad()), (std::vector<float>{2, 2, 2}));
  EXPECT_NE(f.explain().find("was defined when traced and is undefined now"), std::string::npos) << f.explain();
  Tensor replaced = full({3}, 100.0);
  w.set_grad(replaced);
  f(full({3}, 2.0));
  EXPECT_EQ(values(w.grad()), (std::vector<float>{102, 102, 102}));
  EXPECT_EQ(values(replaced), (std::vector<float>{100, 100, 100}));  // a new tensor, as eagerly
  EXPECT_EQ(f.num_traces(), 2u);
}

TEST(Compile, AFunctionThatClearsItsGradientsFirstTracesOnceWhateverTheyHold) {
  Tensor w = ones({3}).requires_grad_();
  auto f = compiled_fresh_gradient(w);
  f(full({3}, 2.0));
  Tensor first = w.grad();
  f(full({3}, 3.0));
  w.set_grad(full({3}, 50.0));
  f(full({3}, 4.0));
  EXPECT_EQ(values(w.grad()), (std::vector<float>{4, 4, 4}));
  EXPECT_EQ(values(first), (std::vector<float>{2, 2, 2}));  // the first call's gradient, not written over
  EXPECT_EQ(f.num_traces(), 1u);
}

TEST(Compile, AFunctionThatClearsItsGradientsLastLeavesThemCleared) {
  Tensor w = ones({3}).requires_grad_();
  auto f = compile([&](Tensor x) {
    Tensor loss = (x * w).sum();
    loss.backward();
    w.zero_grad();
    return loss;
  });
  f(full({3}, 2.0));
  EXPECT_FALSE(w.grad().defined());
}

TEST(Compile, ATraceThatFailsLeavesTheGradientsAsTheCallFoundThem) {
  Tensor w = ones({3}).requires_grad_();
  w.set_grad(full({3}, 5.0));
  auto f = compile([&](Tensor x) {
    w.zero_grad();
    Tensor loss = (x * w).sum();
    loss.backward();
    return loss.item<float>() > 0 ? x : -x;
  });
  EXPECT_THROW(f(ones({3})), GraphError);
  EXPECT_EQ(values(w.grad()), (std::vector<float>{5, 5, 5}));
}

// A compiled optimizer step after an eager backward(): each call reads the gradient the
// parameter holds then (a new tensor each time), not the one it held when traced; a
// parameter without one is skipped, as eagerly.
TEST(Compile, AnOptimizerStepReadsTheGradientsOfTheCall) {
  Tensor w = ones({3}).requires_grad_(), e = ones({3}).requires_grad_();
  optim::SGD compiled_opt({w}, {.lr = 0.1}), eager_opt({e}, {.lr = 0.1});
  auto step = compile([&](Tensor) {
    compiled_opt.step();
    return w.sum();
  });
  for (int i = 1; i <= 3; ++i) {
    for (auto [param, opt] : {std::pair{w, &compiled_opt}, {e, &eager_opt}}) {
      opt->zero_grad();
      (full({3}, float(i)) * param).sum().backward();
    }
    step(ones({1}));
    eager_opt.step();
    EXPECT_EQ(values(w), values(e)) << "step " << i;
  }
  compiled_opt.zero_grad(), eager_opt.zero_grad();
  step(ones({1}));
  eager_opt.step();
  EXPECT_EQ(values(w), values(e));
  EXPECT_NE(step.explain().find("the gradient of a leaf f32[3] was defined when traced and is undefined now"),
            std::string::npos)
      << step.explain();
}

// A trace depends on state outside the graph that the function read: a module's training
// flag (dropout, batch norm) and whether the tensors it reads require grad. A call that
// finds that state changed traces again, and says what changed.
TEST(Compile, AModuleSwitchedToEvalTracesAgain) {
  auto model = nn::sequential({std::make_shared<nn::Linear>(4, 4), std::make_shared<nn::Dropout>(0.5)});
  auto f = compile([&](Tensor x) { return model->forward(x); });
  Tensor x = ones({8, 4});
  f(x);
  model->eval();
  EXPECT_TRUE(all_close(f(x), model->forward(x), 0, 0));
  EXPECT_EQ(f.num_traces(), 2u);
  EXPECT_NE(f.explain().find("the training flag of Dropout(p=0.5) was on when traced and differs now"),
            std::string::npos)
      << f.explain();
  model->train();
  f(x);
  EXPECT_EQ(f.num_traces(), 2u);  // the training plan is still cached
}

TEST(Compile, ATensorThatStopsRequiringGradTracesAgain) {
  Tensor w = ones({3}).requires_grad_(), frozen = ones({3}).requires_grad_();
  auto f = compile([&](Tensor x) {
    w.zero_grad();
    frozen.zero_grad();
    Tensor loss = (x * w * frozen).sum();
    loss.backward();
    return loss;
  });
  f(full({3}, 2.0));
  EXPECT_TRUE(frozen.grad().defined());
  frozen.requires_grad_(false);
  f(full({3}, 2.0));
  EXPECT_FALSE(frozen.grad().defined());  // as eagerly: zero_grad() cleared it, backward() left it
  EXPECT_EQ(values(w.grad()), (std::vector<float>{2, 2, 2}));
  EXPECT_NE(f.explain().find("a tensor f32[3] the function reads stopped requiring grad"), std::string::npos)
      << f.explain();
}

// A plan reads the tensors a module's slots held at the trace: one put in their place
// (assigning the member, Module::to()) makes the next call trace again.
TEST(Compile, AParameterReplacedByAnotherTensorTracesAgain) {
  auto linear = std::make_shared<nn::Linear>(3, 2);
  auto f = compile([&](Tensor x) { return linear->forward(x); });
  Tensor x = uniform_f32({4, 3}, 1);
  f(x);
  linear->weight = full({2, 3}, 0.5).requires_grad_();
  EXPECT_TRUE(all_close(f(x), linear->forward(x), 0, 0));
  EXPECT_EQ(f.num_traces(), 2u);
  EXPECT_NE(f.explain().find("Linear(in_features=3, out_features=2, bias=true).weight held a tensor f32[2,3] "
                             "when traced, which the plan reads, and differs now"),
            std::string::npos)
      << f.explain();
  f(x);
  EXPECT_EQ(f.num_traces(), 2u);
}

// The plan keeps the tensors it bound: it serves calls after the module is gone, and its
// guards read nothing of the module then.
TEST(Compile, APlanOutlivesTheModuleItRead) {
  auto linear = std::make_shared<nn::Linear>(3, 2);
  auto f = compile([module = linear.get()](Tensor x) { return module->forward(x); });
  Tensor x = uniform_f32({4, 3}, 2);
  const Tensor want = f(x);
  linear.reset();
  EXPECT_TRUE(all_close(f(x), want, 0, 0));
  EXPECT_EQ(f.num_traces(), 1u);
}

// State read inside a branch of cond guards the whole plan, as state read outside it.
TEST(Compile, ATrainingFlagReadInABranchGuardsThePlan) {
  auto dropout = std::make_shared<nn::Dropout>(0.5);
  auto f = compile([&](Tensor x) {
    return cond(gt(x.sum(), 0), [&] { return dropout->forward(x); }, [&] { return x; });
  });
  Tensor x = ones({64});
  f(x);
  dropout->eval();
  EXPECT_TRUE(all_close(f(x), x, 0, 0));
  EXPECT_EQ(f.num_traces(), 2u);
}

// A gradient read inside a branch is the call's, as outside one; a branch may not change
// one (both branches are traced: the change would be made whichever branch runs).
TEST(Compile, AGradientReadInABranchIsTheCallsGradient) {
  Tensor w = ones({3}).requires_grad_();
  auto f = compile([&](Tensor x) { return cond(gt(x.sum(), 0), [&] { return w.grad() * x; }, [&] { return x; }); });
  w.set_grad(full({3}, 2.0));
  EXPECT_EQ(values(f(ones({3}))), (std::vector<float>{2, 2, 2}));
  w.set_grad(full({3}, 5.0));
  EXPECT_EQ(values(f(ones({3}))), (std::vector<float>{5, 5, 5}));
  EXPECT_EQ(f.num_traces(), 1u);
}

TEST(Compile, ABranchThatChangesAGradientIsAnError) {
  Tensor w = ones({3}).requires_grad_();
  w.set_grad(ones({3}));
  auto f = compile([&](Tensor x) {
    return cond(gt(x.sum(), 0), [&] { w.zero_grad(); return x; }, [&] { return x; });
  });
  EXPECT_THROWS_WITH(GraphError, f(ones({3})), "[then_branch] changes the gradient of a leaf f32[3]",
                     "change gradients outside the branches", "compile_test.cpp");
  EXPECT_EQ(values(w.grad()), (std::vector<float>{1, 1, 1}));
}

// Ops run under NoGradGuard inside the function record no history eagerly: the traced
// backward does not differentiate through them either.
TEST(Compile, NoGradGuardInsideTheFunctionStopsGradientsAsEagerly) {
  Tensor w = full({3}, 2.0).requires_grad_();
  auto step = [&](Tensor x) {
    w.zero_grad();
    Tensor target;
    {
      NoGradGuard no_grad;
      target = x * w;
    }
    Tensor loss = (target * w).sum();
    loss.backward();
    return loss;
  };
  step(ones({3}));
  const std::vector<float> eager = values(w.grad());
  EXPECT_EQ(eager, (std::vector<float>{2, 2, 2}));
  auto f = compile(step);
  for (int call = 0; call < 2; ++call) {
    f(ones({3}));
    EXPECT_EQ(values(w.grad()), eager) << "call " << call;
  }
}

TEST(Compile, BackwardOfALossComputedWithoutGradIsAnErrorAsEagerly) {
  Tensor w = ones({3}).requires_grad_();
  auto step = [&](Tensor x) {
    Tensor loss;
    {
      NoGradGuard no_grad;
      loss = (x * w).sum();
    }
    loss.backward();
    return loss;
  };
  EXPECT_THROWS_WITH(AutogradError, step(ones({3})), "does not require grad");
  auto f = compile(step);
  EXPECT_THROWS_WITH(AutogradError, f(ones({3})), "does not require grad", "compile_test.cpp");
}

// A plan that differentiated serves calls in the grad mode it was traced in: under
// NoGradGuard the function traces again (and, as eagerly, its backward() fails).
TEST(Compile, APlanThatDifferentiatesIsGuardedByGradMode) {
  Tensor w = ones({3}).requires_grad_();
  auto f = compiled_fresh_gradient(w);
  f(ones({3}));
  NoGradGuard no_grad;
  EXPECT_THROWS_WITH(AutogradError, f(ones({3})), "does not require grad");  // not the cached plan
}

// As eagerly, a gradient that would read a value written in place after the op that
// saved it is an error, not a gradient of other numbers; a write the gradient does not
// read is not.
TEST(Compile, AValueSavedForTheGradientAndWrittenLaterIsAnError) {
  Tensor w = full({3}, 2.0).requires_grad_();
  auto step = [&](Tensor x) {
    w.zero_grad();
    Tensor y = x * w;
    Tensor z = (y * y).sum();
    {
      NoGradGuard no_grad;
      slice(y, 0, 0, 2).fill_(1.0);
    }
    z.backward();
    return z;
  };
  EXPECT_THROWS_WITH(AutogradError, step(full({3}, 3.0)), "modified in place after it was saved");
  auto f = compile(step);
  EXPECT_THROWS_WITH(AutogradError, f(full({3}, 3.0)), "[mul] a tensor of shape [3] saved for the gradient (",
                     "modified in place after it was saved", "compile_test.cpp");
}

// Eagerly every recorded op keeps its inputs, so any write into one fails the backward;
// a traced backward fails only where a gradient rule reads what was written, and is
// otherwise the gradient without the write.
TEST(Compile, AWriteTheGradientDoesNotReadLeavesTheGradient) {
  Tensor w = full({3}, 2.0).requires_grad_();
  auto f = compile([&](Tensor x) {
    w.zero_grad();
    Tensor y = x * w;
    Tensor z = (y * 2.0f).sum();  // its gradient reads 2, not y
    {
      NoGradGuard no_grad;
      slice(y, 0, 0, 2).fill_(1.0);
    }
    z.backward();
    return z;
  });
  f(full({3}, 3.0));
  EXPECT_EQ(values(w.grad()), (std::vector<float>{6, 6, 6}));
}

// Code that asks requires_grad() takes the branch it takes eagerly.
TEST(Compile, RequiresGradOfTracedValuesIsEagers) {
  Tensor w = ones({3}).requires_grad_();
  auto f = [&](Tensor x) {
    Tensor with_w = x * w, without = x * 2.0f, under_no_grad;
    {
      NoGradGuard no_grad;
      under_no_grad = x * w;
    }
    auto flag = [](const Tensor& t) { return t.requires_grad() ? 1.0f : 0.0f; };
    return stack({full({}, flag(with_w)), full({}, flag(without)), full({}, flag(under_no_grad))});
  };
  const std::vector<float> eager = values(f(ones({3})));
  EXPECT_EQ(eager, (std::vector<float>{1, 0, 0}));
  EXPECT_EQ(values(compile(f)(ones({3}))), eager);
}

TEST(Compile, TracedTrainingGraphPrintsAndParsesBack) {
  manual_seed(1);
  auto model = nn::mnist_mlp();
  optim::SGD opt(model->parameters(), {.lr = 0.1});
  auto step = compile(
      [&](Tensor x, Tensor y) {
        opt.zero_grad();
        Tensor loss = cross_entropy(model->forward(x.view({x.size(0), -1})), y);
        loss.backward();
        opt.step();
        return loss;
      },
      {.dynamic_dims = {{0, 0, "batch"}, {1, 0, "batch"}}});
  step(randn({8, 28, 28}), randint(0, 10, {8}));
  step(randn({5, 28, 28}), randint(0, 10, {5}));
  EXPECT_EQ(step.num_traces(), 1u);
  step.graph().name_inputs(model->named_parameters(), "mlp.");
  const std::string text = step.graph().to_text();
  EXPECT_NE(text.find("%mlp.1.weight: f32[512,784]"), std::string::npos) << text;
  EXPECT_NE(text.find("linear(%1, %mlp.1.weight, %mlp.1.bias)"), std::string::npos) << text;
  EXPECT_NE(text.find("f32[batch,28,28]"), std::string::npos) << text;
  EXPECT_NE(text.find("shape=[batch,-1]"), std::string::npos) << text;
  EXPECT_NE(text.find("sgd_update("), std::string::npos) << text;
  EXPECT_EQ(graph::to_text(graph::parse_graph(text)), text);
}

}  // namespace
}  // namespace baton
