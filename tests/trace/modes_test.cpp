// One op, three modes: every op-harness case (tests/harness) runs eagerly, as a static
// graph through Session, and compiled, with the same results; and its graph gradient
// (built from the same gradient rules) matches eager autograd.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "harness/attribute_reads.h"
#include "harness/op_harness.h"

namespace baton::testing {
namespace {

class OpModes : public ::testing::TestWithParam<OpCase> {};

// Ops whose plan steps still read attributes by name on every run. Each is sized by its
// values (OpDef::value_sized): a step of it ends a stage of the plan and makes its outputs
// when it runs, from its inputs' values and with eager ops (reshape, sum, cast...), so it
// allocates and infers shapes on every run anyway, and its node's attributes hold symbols
// that only the run binds, so the plan makes no parameters for it. (nonzero, sized by
// values too, reads none.) Every other op's kernel or view rule reads its parameters
// (OpDef::params).
const std::set<std::string>& ops_reading_attributes_per_run() {
  static const std::set<std::string> ops{"expand_to", "non_max_suppression", "range_of", "remove_words",
                                         "reshape_to", "resize_by_values", "squeeze_at", "sum_over",
                                         "topk_by_values", "unique", "unsqueeze_at"};
  return ops;
}

TEST(OpModesList, OpsReadingAttributesPerRunAreSizedByValues) {
  for (const std::string& name : ops_reading_attributes_per_run()) {
    const ops::OpDef* op = ops::find_op(name);
    ASSERT_NE(op, nullptr) << name;
    EXPECT_TRUE(op->sized_by_values) << name;
  }
}

// Inputs are made twice so that in-place ops (optimizer updates) start from equal state.
TEST_P(OpModes, StaticGraphMatchesEager) {
  const OpCase& c = GetParam();
  Tensor expected = c.fn(c.make_inputs());
  Inputs in = c.make_inputs();
  Graph g("op");
  Inputs placeholders;
  Session::Feeds feeds;
  for (size_t i = 0; i < in.size(); ++i) {
    std::vector<SymDim> dims(in[i].shape().begin(), in[i].shape().end());
    placeholders.push_back(g.placeholder(in[i].dtype(), dims, str("in", i)));
    feeds.emplace_back(placeholders.back(), in[i]);
  }
  Tensor out = c.fn(placeholders);
  ASSERT_TRUE(out.is_symbolic()) << "the op ran instead of building a node";
  Session sess(g);
  EXPECT_ALL_CLOSE(sess.run({out}, feeds, {.run_updates = true})[0], expected, c.atol, c.rtol);
  // A second run of the plan (O2) reads no attribute by name.
  AttributeReadWatch watch;
  sess.run({out}, feeds, {.run_updates = true});
  uint64_t in_calls = 0;
  for (auto& [op, reads] : watch.readers()) {
    in_calls += reads;
    EXPECT_TRUE(ops_reading_attributes_per_run().count(op)) << op << "'s step read " << reads << " attributes";
  }
  EXPECT_EQ(watch.reads(), in_calls) << "attributes read outside any step";
}

TEST_P(OpModes, CompiledMatchesEager) {
  const OpCase& c = GetParam();
  CompiledFunction compiled({.name = "op"});
  CompiledFunction::Fn fn = [&](const Inputs& in) { return Inputs{c.fn(in)}; };
  for (int call = 0; call < (c.replayable ? 2 : 1); ++call) {  // the trace, then a replay
    Tensor expected = c.fn(c.make_inputs());
    Tensor out = compiled.call(c.make_inputs(), fn, SourceLoc::current()).at(0);
    EXPECT_ALL_CLOSE(out, expected, c.atol, c.rtol) << "call " << call;
  }
  EXPECT_EQ(compiled.num_traces(), 1u);
}

// d/d inputs of sum(fn(inputs) * r), by eager autograd and by graph autodiff.
TEST_P(OpModes, GraphGradientMatchesEager) {
  const OpCase& c = GetParam();
  if (!c.check_grad) GTEST_SKIP() << "not differentiable";
  Inputs in = c.make_inputs();
  std::vector<size_t> which;
  for (size_t i = 0; i < in.size(); ++i) {
    bool listed = c.grad_inputs.empty() ? in[i].dtype() == f64
                                        : std::count(c.grad_inputs.begin(), c.grad_inputs.end(), int(i)) > 0;
    if (listed) which.push_back(i);
  }
  Tensor r = uniform(c.fn(c.make_inputs()).shape(), -1, 1, 7);

  Inputs leaves = c.make_inputs();
  for (size_t i : which) leaves[i].requires_grad_();
  Tensor eager_loss = (c.fn(leaves) * r).sum();
  Inputs wrt;
  for (size_t i : which) wrt.push_back(leaves[i]);
  Inputs expected = grad({eager_loss}, wrt);

  CompiledFunction compiled({.name = "grad"});
  CompiledFunction::Fn fn = [&](const Inputs& sym) {
    Inputs sym_wrt;
    for (size_t i : which) sym_wrt.push_back(sym[i]);
    return grad({(c.fn(sym) * r).sum()}, sym_wrt);
  };
  Inputs got = compiled.call(c.make_inputs(), fn, SourceLoc::current());
  ASSERT_EQ(got.size(), expected.size());
  for (size_t k = 0; k < got.size(); ++k)
    EXPECT_ALL_CLOSE(got[k], expected[k], 1e-9, 1e-7) << "input " << which[k];
}

INSTANTIATE_TEST_SUITE_P(AllOps, OpModes, ::testing::ValuesIn(all_cases()), case_name);

}  // namespace
}  // namespace baton::testing
