// Steps side by side (SessionOptions::inter_op_threads): the same bits as one step after
// another, arena buffers that may be in use at the same time never share bytes, effects
// keep their order, a failing step is reported as the sequential executor reports it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "baton/baton.h"
#include "harness/op_harness.h"
#include "harness/twin_models.h"
#include "runtime/plan.h"
#include "runtime/step_assignment.h"

namespace baton {
namespace {

Tensor uniform(const Shape& shape, uint64_t seed) { return testing::uniform(shape, -1, 1, seed).to(f32); }

std::vector<uint8_t> bytes_of(const Tensor& t) {
  Tensor c = t.contiguous();
  const auto* p = static_cast<const uint8_t*>(c.raw_data());
  return {p, p + c.nbytes()};
}

// A random program: branches from a few placeholders and variables through elementwise
// math, views, reductions and small matmuls, values reused across branches (shared
// subexpressions), assignments to variables (effects, read before and after), dropout
// (random draws, whose order must not change) and control flow (a barrier).
struct RandomProgram {
  Graph g{"random"};
  std::vector<Tensor> variables;
  std::vector<Tensor> fetches;
  Session::Feeds feeds;

  explicit RandomProgram(uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<Tensor> pool;
    for (int i = 0; i < 3; ++i) {
      Tensor p = g.placeholder(f32, {8, 16}, "p" + std::to_string(i));
      feeds.push_back({p, uniform({8, 16}, seed * 10 + uint64_t(i))});
      pool.push_back(p);
    }
    for (int i = 0; i < 2; ++i) {
      variables.push_back(g.variable(uniform({8, 16}, seed * 10 + 5 + uint64_t(i)), "v" + std::to_string(i)));
      pool.push_back(variables.back());
    }
    auto pick = [&] { return pool[rng() % pool.size()]; };
    const int ops = 20 + int(rng() % 30);
    for (int k = 0; k < ops; ++k) pool.push_back(random_op(rng, pick));
    for (int k = 0; k < 4; ++k) fetches.push_back(pick());
    fetches.push_back(pool.back());
  }

  template <class Pick>
  Tensor random_op(std::mt19937_64& rng, Pick& pick) {
    switch (rng() % 11) {
      case 0: return tanh(pick());
      case 1: return sigmoid(pick()) * pick();
      case 2: return pick() + pick();
      case 3: return pick() - pick() * 0.5;
      case 4: return matmul(matmul(pick(), pick().transpose(0, 1)), pick()) * 0.05;
      case 5: return pick() + sum(pick(), {1}, true) * 0.1;
      case 6: return pick().reshape({16, 8}).transpose(0, 1).reshape({8, 16}) * 0.9;  // views
      case 7: return relu(pick()) + pick();
      case 8: return dropout(pick(), 0.3, true);
      case 9: {
        Tensor a = pick(), b = pick();
        return cond(sum(pick()) > 0.0, [&] { return tanh(a) * b; }, [&] { return a - b; });
      }
      default: {  // an effect; later reads of the variable see the new value
        Tensor& v = variables[rng() % variables.size()];
        return assign(v, tanh(pick() + v));
      }
    }
  }
};

// The cost model with hand-offs between cores for free and steps that take long: the
// random programs' small steps are then spread over the workers as big ones would be
// (runtime/step_assignment.h), so that the tests run them side by side.
class FreeHandoffs {
 public:
  FreeHandoffs() {
    runtime::CoreCosts free = saved_;
    free.step_us = 10, free.handoff_us = 0, free.join_us = 0, free.remote_bytes_per_us = 1e30;
    runtime::set_core_costs(free);
  }
  ~FreeHandoffs() { runtime::set_core_costs(saved_); }
  FreeHandoffs(const FreeHandoffs&) = delete;
  FreeHandoffs& operator=(const FreeHandoffs&) = delete;

 private:
  runtime::CoreCosts saved_ = runtime::core_costs();
};

// Runs a random program three times per setting and returns, per run, the bytes of every
// fetched value and variable; `workers_used` gets how many workers the plan spread it over.
std::vector<std::vector<uint8_t>> run_program(uint64_t seed, size_t inter_op_threads, size_t* workers_used = nullptr) {
  RandomProgram p(seed);
  FreeHandoffs spread;
  Session session(p.g, {.inter_op_threads = inter_op_threads});
  std::vector<std::vector<uint8_t>> out;
  for (int run = 0; run < 3; ++run) {
    manual_seed(uint64_t(run) + 1);
    for (const Tensor& t : session.run(p.fetches, p.feeds, {.run_updates = true})) out.push_back(bytes_of(t));
    for (const Tensor& v : p.variables) out.push_back(bytes_of(p.g.value_of(v)));
  }
  if (workers_used) {
    const std::string explained = session.explain();
    const size_t at = explained.find("side by side: ");
    *workers_used = at == std::string::npos ? 1 : size_t(std::max(1, std::atoi(explained.c_str() + at + 14)));
  }
  return out;
}

TEST(Parallel, RandomGraphsGiveTheSameBitsOnOneTwoAndFourWorkers) {
  size_t spread = 0;
  for (uint64_t seed = 1; seed <= 25; ++seed) {
    const auto sequential = run_program(seed, 1);
    for (size_t workers : {2, 4}) {
      size_t used = 1;
      const auto parallel = run_program(seed, workers, &used);
      spread += used > 1;
      ASSERT_EQ(parallel.size(), sequential.size());
      for (size_t k = 0; k < sequential.size(); ++k)
        EXPECT_EQ(parallel[k], sequential[k]) << "seed " << seed << ", " << workers << " workers, value " << k;
    }
  }
  EXPECT_GE(spread, 40u);  // of 50 plans: most ran on several workers
}

// The buffers of fetched values are made by the calling thread before the workers start
// (runtime/executor.cpp): each run still returns buffers of its own, which later runs
// leave alone.
TEST(Parallel, EachRunReturnsBuffersOfItsOwn) {
  Graph g("two_branches");
  Tensor a = g.placeholder(f32, {64}, "a"), b = g.placeholder(f32, {64}, "b");
  Tensor left = tanh(a * 2.0) + a, right = sigmoid(b) * b;
  FreeHandoffs spread;
  Session session(g, {.inter_op_threads = 2});
  auto run = [&](float x) {
    return session.run({left, right}, {{a, full({64}, x)}, {b, full({64}, x + 1)}});
  };
  const std::vector<Tensor> first = run(0.5f);
  ASSERT_NE(session.explain().find("side by side: 2 workers"), std::string::npos) << session.explain();
  const std::vector<uint8_t> left_bytes = bytes_of(first[0]), right_bytes = bytes_of(first[1]);
  const std::vector<Tensor> second = run(-3.0f);
  EXPECT_NE(first[0].raw_data(), second[0].raw_data());
  EXPECT_NE(first[1].raw_data(), second[1].raw_data());
  EXPECT_EQ(bytes_of(first[0]), left_bytes);
  EXPECT_EQ(bytes_of(first[1]), right_bytes);
  EXPECT_FLOAT_EQ(second[0].data<float>()[63], std::tanh(-6.0f) - 3.0f);
  EXPECT_FLOAT_EQ(second[1].data<float>()[63], -2.0f / (1.0f + std::exp(2.0f)));
}

// The plan of a random program, specialized (its shapes are static) for side by side.
struct Planned {
  runtime::Plan plan;
  std::shared_ptr<const runtime::Specialization> spec;
};
Planned plan_program(const RandomProgram& p, size_t inter_op_threads) {
  FreeHandoffs spread;
  trace::Builder& b = GraphAccess::builder(p.g);
  std::vector<graph::Value*> fetches;
  for (const Tensor& t : p.fetches) fetches.push_back(t.impl()->symbolic->value);
  Planned out{runtime::make_plan(b.ir(), fetches, b.effects(), {.inter_op_threads = inter_op_threads}), nullptr};
  out.spec = out.plan.specialize(sym::Bindings{});
  return out;
}

// Per root slot, the steps that read or write its storage (itself or a view of it).
std::vector<std::vector<int>> accessors(const runtime::Plan& plan, const runtime::Specialization& spec) {
  std::vector<std::vector<int>> out(size_t(plan.num_slots));
  for (size_t i = 0; i < plan.steps.size(); ++i)
    for (const std::vector<int>* slots : {&plan.steps[i].inputs, &plan.steps[i].outputs})
      for (int s : *slots) out[size_t(spec.root[size_t(s)])].push_back(int(i));
  return out;
}

// Every step touching `a` is done before the producer of `b` starts (or is that producer:
// an elementwise step writing over its input).
bool done_before(const runtime::StepGraph& g, const std::vector<int>& touch_a, int producer_b) {
  for (int s : touch_a)
    if (s != producer_b && !g.reaches(s, producer_b)) return false;
  return true;
}

TEST(Parallel, BuffersThatMayBeInUseTogetherNeverShareBytes) {
  size_t shared_pairs = 0;
  for (uint64_t seed = 1; seed <= 25; ++seed) {
    RandomProgram p(seed);
    Planned planned = plan_program(p, 2);
    const runtime::Specialization& spec = *planned.spec;
    ASSERT_TRUE(spec.parallel) << "seed " << seed << ": independent branches, yet no schedule";
    const runtime::StepGraph& g = spec.parallel->graph;
    const auto touch = accessors(planned.plan, spec);
    std::vector<int> producer(size_t(planned.plan.num_slots), -1);
    for (size_t i = 0; i < planned.plan.steps.size(); ++i)
      for (int o : planned.plan.steps[i].outputs) producer[size_t(o)] = int(i);
    for (int a = 0; a < planned.plan.num_slots; ++a)
      for (int b = a + 1; b < planned.plan.num_slots; ++b) {
        const runtime::ValueInfo &va = spec.values[size_t(a)], &vb = spec.values[size_t(b)];
        if (va.placement != runtime::Placement::Arena || vb.placement != runtime::Placement::Arena) continue;
        if (!va.bytes || !vb.bytes) continue;
        const bool same_bytes = va.offset < vb.offset + vb.bytes && vb.offset < va.offset + va.bytes;
        if (!same_bytes) continue;
        ++shared_pairs;
        EXPECT_TRUE(done_before(g, touch[size_t(a)], producer[size_t(b)]) ||
                    done_before(g, touch[size_t(b)], producer[size_t(a)]))
            << "seed " << seed << ": slots " << a << " and " << b << " share bytes and may be in use together";
      }
  }
  EXPECT_GT(shared_pairs, 0u);  // the check had something to check
}

TEST(Parallel, OneWorkerKeepsTheSequentialLayout) {
  RandomProgram p(3);
  Planned sequential = plan_program(p, 1);
  EXPECT_FALSE(sequential.spec->parallel);
  // A chain has one step per stage: nothing to run side by side, so the plan-order layout.
  Graph g("chain");
  Tensor x = g.placeholder(f32, {64}, "x");
  Tensor y = tanh(tanh(x) * 2.0);
  trace::Builder& b = GraphAccess::builder(g);
  graph::Value* fetch = y.impl()->symbolic->value;
  runtime::Plan plan = runtime::make_plan(b.ir(), {&fetch, 1}, {}, {.inter_op_threads = 2});
  EXPECT_FALSE(plan.specialize(sym::Bindings{})->parallel);
}

TEST(Parallel, StagesFollowTheLongestChainOfWaits) {
  // 0 and 1 independent; 2 waits for both; 3 waits for 0 only.
  runtime::StepGraph g = runtime::StepGraph::from_preds({{}, {}, {0, 1, 1}, {0}});
  EXPECT_EQ(g.stage, (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(g.num_preds, (std::vector<uint32_t>{0, 0, 2, 1}));
  EXPECT_TRUE(g.reaches(1, 2));
  EXPECT_FALSE(g.reaches(1, 3));
}

// A variable read through a view before an assign and read again after it.
struct ReadWriteRead {
  Graph g{"effects"};
  Tensor v = g.variable(uniform({4, 4}, 1), "v");
  Tensor x = g.placeholder(f32, {4, 4}, "x");
  Tensor before = v.transpose(0, 1) * 2.0;
  Tensor written = assign(v, x + 1.0);
  Tensor after = v * 3.0;  // reads the new value
};

TEST(Parallel, AnEffectKeepsItsPlaceAmongTheReadsOfItsVariable) {
  FreeHandoffs spread;
  ReadWriteRead p;
  trace::Builder& b = GraphAccess::builder(p.g);
  std::vector<graph::Value*> fetches{p.before.impl()->symbolic->value, p.after.impl()->symbolic->value,
                                     p.written.impl()->symbolic->value};
  runtime::Plan plan = runtime::make_plan(b.ir(), fetches, b.effects(), {.level = passes::Level::O0, .inter_op_threads = 2});
  auto spec = plan.specialize(sym::Bindings{});
  ASSERT_TRUE(spec->parallel);
  auto step_named = [&](const std::string& op, int nth) {
    for (size_t i = 0; i < plan.steps.size(); ++i)
      if (plan.steps[i].node->op_name() == op && nth-- == 0) return int(i);
    return -1;
  };
  const int assign_step = step_named("assign", 0), read_before = step_named("mul", 0), read_after = step_named("mul", 1);
  ASSERT_GE(assign_step, 0);
  ASSERT_GE(read_after, 0);
  const runtime::StepGraph& sg = spec->parallel->graph;
  EXPECT_TRUE(sg.reaches(read_before, assign_step));
  EXPECT_TRUE(sg.reaches(assign_step, read_after));

  ReadWriteRead q;  // the same program with a variable of its own
  Session one(p.g), two(q.g, {.inter_op_threads = 2});
  Tensor fed = uniform({4, 4}, 2);
  for (int run = 0; run < 2; ++run) {
    auto a = one.run({p.before, p.after}, {{p.x, fed}}, {.run_updates = true});
    auto c = two.run({q.before, q.after}, {{q.x, fed}}, {.run_updates = true});
    EXPECT_EQ(bytes_of(a[0]), bytes_of(c[0])) << "run " << run;
    EXPECT_EQ(bytes_of(a[1]), bytes_of(c[1])) << "run " << run;
  }
}

// Inputs that share storage with one the plan writes defeat the slot-based ordering: such
// a run keeps plan order (and its own layout), and still gives the sequential bits.
TEST(Parallel, AWrittenInputSharingStorageWithAnotherRunsInPlanOrder) {
  FreeHandoffs spread;
  auto step = [](Tensor acc, Tensor x) {
    Tensor before = x * 2.0;
    Tensor t = x;
    for (int k = 0; k < 200; ++k) t = tanh(t);
    acc.copy_(acc + t);  // an effect on argument 0, late in its stage order
    return std::vector<Tensor>{before, x * 3.0 + acc};  // x * 3 has no reason to wait for it
  };
  auto seq = compile(step);
  auto par = compile(step, {.inter_op_threads = 2});
  Tensor a1 = uniform({32}, 1), a2 = a1.clone();
  std::vector<std::vector<Tensor>> r1, r2;
  for (int run = 0; run < 5; ++run) par(uniform({32}, 2), uniform({32}, 3));  // the helpers started
  for (int run = 0; run < 20; ++run) r2.push_back(par(a2, a2));  // back to back: the helpers stay awake
  for (int run = 0; run < 20; ++run) r1.push_back(seq(a1, a1));  // the same tensor as both arguments
  for (int run = 0; run < 20; ++run)
    for (size_t k = 0; k < r1[size_t(run)].size(); ++k)
      EXPECT_EQ(bytes_of(r1[size_t(run)][k]), bytes_of(r2[size_t(run)][k])) << "run " << run << ", result " << k;
  EXPECT_EQ(bytes_of(a1), bytes_of(a2));
}

TEST(Parallel, ARunWhoseInputsShareAWrittenStorageUsesThePlanOrderLayout) {
  FreeHandoffs spread;
  Graph g("aliasing");
  Tensor acc = g.placeholder(f32, {16}, "acc"), x = g.placeholder(f32, {16}, "x");
  Tensor before = x * 2.0;
  Tensor written = assign(acc, acc + tanh(x));
  Tensor after = x * 3.0 + acc;
  trace::Builder& b = GraphAccess::builder(g);
  std::vector<graph::Value*> fetches{before.impl()->symbolic->value, after.impl()->symbolic->value,
                                     written.impl()->symbolic->value};
  auto run = [&](runtime::Plan& plan, Tensor fed_acc, Tensor fed_x) {
    std::vector<Tensor> inputs;
    for (auto& [value, slot] : plan.inputs) {
      if (b.kind(value) != trace::InputKind::Placeholder) inputs.push_back(b.binding(value).tensor);
      else inputs.push_back(value->name() == "acc" ? fed_acc : fed_x);
    }
    return runtime::execute(plan, inputs, sym::Bindings{});
  };
  runtime::Plan one = runtime::make_plan(b.ir(), fetches, b.effects(), {.inter_op_threads = 1});
  runtime::Plan two = runtime::make_plan(b.ir(), fetches, b.effects(), {.inter_op_threads = 2});
  Tensor t1 = uniform({16}, 1), t2 = t1.clone();
  auto r1 = run(one, t1, t1), r2 = run(two, t2, t2);  // one tensor for both
  auto spec = two.specialize(sym::Bindings{});
  ASSERT_TRUE(spec->parallel);
  EXPECT_EQ(spec->runs_in_plan_order.load(), 1u);
  for (size_t k = 0; k < r1.size(); ++k) EXPECT_EQ(bytes_of(r1[k]), bytes_of(r2[k])) << "result " << k;
  run(two, uniform({16}, 2), uniform({16}, 3));  // a tensor each: the schedule
  EXPECT_EQ(spec->runs_in_plan_order.load(), 1u);
}

// Branches where one looks up an index out of range; `bad` picks which branches fail.
struct FailingBranches {
  Graph g{"failing"};
  Tensor x = g.placeholder(f32, {64, 8}, "x");
  Tensor i1 = g.placeholder(i64, {4}, "i1"), i2 = g.placeholder(i64, {4}, "i2");
  Tensor table = uniform({10, 8}, 3);
  std::vector<Tensor> outs;
  FailingBranches() {
    Tensor a = x;
    for (int k = 0; k < 30; ++k) a = tanh(a * 1.1);
    outs.push_back(a);
    outs.push_back(embedding(table, i1) * 2.0);  // line of the first failing node
    outs.push_back(embedding(table, i2) + 1.0);
  }
  Session::Feeds feeds(int64_t first, int64_t second) {
    return {{x, uniform({64, 8}, 4)},
            {i1, tensor(std::vector<int64_t>{1, 2, first, 3}, {4})},
            {i2, tensor(std::vector<int64_t>{0, second, 5, 6}, {4})}};
  }
};

std::string error_of(Session& s, const FailingBranches& f, Session::Feeds feeds) {
  try {
    s.run(f.outs, feeds);
  } catch (const IndexError& e) {
    return e.what();
  }
  return "no error";
}

TEST(Parallel, AFailingStepIsReportedAsTheSequentialExecutorReportsIt) {
  FreeHandoffs spread;
  FailingBranches f;
  Session one(f.g), two(f.g, {.inter_op_threads = 2});
  for (auto [first, second] : {std::pair<int64_t, int64_t>{42, 1}, {1, 43}, {42, 43}}) {
    const std::string want = error_of(one, f, f.feeds(first, second));
    EXPECT_NE(want.find("in graph node 'embedding' built at"), std::string::npos) << want;
    EXPECT_NE(want.find("parallel_test.cpp"), std::string::npos) << want;
    for (int repeat = 0; repeat < 5; ++repeat) EXPECT_EQ(error_of(two, f, f.feeds(first, second)), want);
  }
  // Both still run, with the same results.
  auto a = one.run(f.outs, f.feeds(1, 2)), b = two.run(f.outs, f.feeds(1, 2));
  for (size_t k = 0; k < a.size(); ++k) EXPECT_EQ(bytes_of(a[k]), bytes_of(b[k])) << "output " << k;
}

TEST(Parallel, CompiledTrainingStepGivesTheSameBits) {
  FreeHandoffs spread;
  testing::TwinMlps twins;  // 0 on one thread, 1 with two steps side by side
  auto one = compile([&](Tensor x, Tensor y) { return twins.step(0, x, y); });
  auto two = compile([&](Tensor x, Tensor y) { return twins.step(1, x, y); }, {.inter_op_threads = 2});
  for (int i = 0; i < 3; ++i) {
    auto [x, y] = testing::TwinMlps::batch(i);
    EXPECT_EQ(bytes_of(one(x, y)), bytes_of(two(x, y))) << "loss of step " << i;
  }
  auto p1 = twins.model[0]->parameters(), p2 = twins.model[1]->parameters();
  for (size_t i = 0; i < p1.size(); ++i) {
    EXPECT_EQ(bytes_of(p1[i]), bytes_of(p2[i])) << "parameter " << i;
    EXPECT_EQ(bytes_of(p1[i].grad()), bytes_of(p2[i].grad())) << "grad " << i;
  }
}

}  // namespace
}  // namespace baton
