// Shared by the pass tests: a graph read from text with a value for each input, some of
// them fixed (constants the passes may read), a pass run by name, and a check that the
// rewritten graph computes what the original did, through the real executor.
//
// Why exact equality: these passes never change the order of arithmetic. Dead code and
// merged nodes compute nothing that reaches an output; a folded node runs the very kernel
// a run would, on the same values and shapes; a simplification removes an operation
// whose result equals its operand (x * 1 is x bit for bit; x + 0 turns -0.0 into +0.0,
// which compares equal). So values are compared with ==, NaN matching NaN.
#pragma once
#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <string>

#include "baton/autograd.h"
#include "graph/text.h"
#include "harness/op_harness.h"
#include "passes/analysis.h"
#include "passes/pass.h"
#include "runtime/plan.h"
#include "trace/verify.h"

namespace baton::passes::testing {

// One pass case: the graph, its input values (graph order; folded constants are
// appended as the passes add them, named k0, k1...) and the context the passes see.
class PassCase {
 public:
  explicit PassCase(std::string_view text, std::map<std::string, Tensor> fixed = {})
      : g(graph::parse_graph(text)), original_(g.clone()) {
    for (const graph::Value* in : g.inputs()) {
      auto it = fixed.find(in->name());
      fixed_.push_back(it != fixed.end());
      values_.push_back(it != fixed.end() ? it->second : random_feed(*in, values_.size()));
    }
    ctx.inputs.fixed_value = [this](const graph::Value* v) -> const Tensor* {
      size_t i = size_t(v->output_index());
      return !v->producer() && i < fixed_.size() && fixed_[i] ? &values_[i] : nullptr;
    };
    ctx.inputs.add_constant = [this](Tensor value, const std::string&) {
      graph::Value* v = g.add_input(str("k", constants_++), trace::type_of(value.dtype(), value.shape()));
      values_.push_back(std::move(value));
      fixed_.push_back(true);
      return v;
    };
  }
  PassCase(const PassCase&) = delete;  // the context points into this object
  PassCase& operator=(const PassCase&) = delete;

  // Runs the pass called `name` once (checking the result still verifies).
  Effect run_pass(const std::string& name) {
    for (const Pass& p : all_passes()) {
      if (name != p.name) continue;
      Effect effect{p.name, g.num_nodes(), 0, {}};
      bool changed = p.run(g, ctx, effect);
      effect.nodes_after = g.num_nodes();
      EXPECT_EQ(changed, !effect.details.empty()) << name << " says it changed the graph iff it reports a rewrite";
      trace::verify(g);
      return effect;
    }
    ADD_FAILURE() << "no pass named " << name;
    return {};
  }

  std::vector<Effect> optimize(Level level) {
    std::vector<Effect> log = passes::optimize(g, level, ctx);
    trace::verify(g);
    return log;
  }

  // Runs the graph as read and as rewritten on the same inputs and expects the same
  // outputs and the same state written by effects (see the top of this file for why ==).
  // With `runs` > 1 each plan runs that many times in a row, its effects (optimizer
  // updates) carrying over: a step that chooses its way by timing the runs
  // (kernels/cpu/measured_choice.h) tries each way in its first two.
  void expect_same_values(int runs = 1) {
    Run expected = run(original_, original_.inputs().size(), runs);
    Run actual = run(g, values_.size(), runs);
    ASSERT_EQ(expected.outputs.size(), actual.outputs.size());
    for (size_t i = 0; i < expected.outputs.size(); ++i)
      expect_identical(actual.outputs[i], expected.outputs[i], str("output ", i));
    for (size_t i = 0; i < expected.inputs.size(); ++i)
      expect_identical(actual.inputs[i], expected.inputs[i], str("input ", i, " after the run"));
  }

  // The same, within a tolerance: for fusion passes, which change the order of arithmetic
  // (folded weights, a kernel's epilogue instead of separate ops). Each caller says why.
  void expect_close_values(double atol, double rtol) {
    Run expected = run(original_, original_.inputs().size());
    Run actual = run(g, values_.size());
    ASSERT_EQ(expected.outputs.size(), actual.outputs.size());
    for (size_t i = 0; i < expected.outputs.size(); ++i)
      EXPECT_TRUE(baton::testing::all_close(actual.outputs[i], expected.outputs[i], atol, rtol)) << "output " << i;
  }
  const Tensor& value(size_t input) const { return values_.at(input); }

  graph::Graph g;
  Context ctx;

 private:
  struct Run {
    std::vector<Tensor> outputs, inputs;
  };

  // The plan runs `graph` as it is (O0: the passes under test already ran, or must not).
  // Every node with effects is forced, as Session::run does with run_updates. Inputs are
  // copies, so effects write the copies and both graphs start from the same state.
  Run run(const graph::Graph& graph, size_t num_inputs, int runs = 1) const {
    Run r;
    for (size_t i = 0; i < num_inputs; ++i) r.inputs.push_back(values_[i].clone());
    std::vector<graph::Node*> effects;
    for (const auto& n : graph.nodes())
      if (has_effects(*n)) effects.push_back(n.get());
    runtime::Plan plan = runtime::make_plan(graph, graph.outputs(), effects, {.level = Level::O0});
    sym::Bindings bindings;
    for (size_t i = 0; i < num_inputs; ++i)
      runtime::bind_input(*graph.input(i), r.inputs[i], [i] { return str("input ", i); }, bindings,
                          SourceLoc::current());
    for (int k = 0; k < runs; ++k) r.outputs = runtime::execute_graph(plan, r.inputs, bindings);
    return r;
  }

  static void expect_identical(const Tensor& actual, const Tensor& expected, const std::string& what) {
    ASSERT_EQ(actual.dtype(), expected.dtype()) << what;
    ASSERT_EQ(actual.shape(), expected.shape()) << what;
    std::vector<double> a = actual.to_vector<double>(), e = expected.to_vector<double>();
    for (size_t k = 0; k < a.size(); ++k)
      EXPECT_TRUE(a[k] == e[k] || (a[k] != a[k] && e[k] != e[k])) << what << " element " << k << ": " << a[k]
                                                                  << " vs " << e[k];
  }

  // Deterministic values in [-2, 2) (integers truncated to -1, 0 or 1; bools about half
  // true); every symbolic dim is 3.
  static Tensor random_feed(const graph::Value& input, size_t seed) {
    Shape shape;
    for (const graph::Dim& d : input.shape()) shape.push_back(d.is_static() ? d.raw() : 3);
    Tensor u = baton::testing::uniform(shape, -2, 2, seed + 1);
    if (input.dtype() == DType::b8) return u > 0.0;
    return cast(u, input.dtype());
  }

  std::deque<Tensor> values_;  // a deque: fixed_value hands out pointers while it grows
  std::deque<bool> fixed_;
  graph::Graph original_;
  int constants_ = 0;
};

// The details of a log, one per line, for EXPECT_EQ on all of them at once.
inline std::string details(const Effect& e) {
  std::string s;
  for (const std::string& d : e.details) s += d + "\n";
  return s;
}

// The text form pads lines to align their source-line comments; these tests compare it
// with that padding cut to one space.
inline std::string text_of(const graph::Graph& g) {
  std::string text = graph::to_text(g), out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == ' ' && text.find_first_not_of(' ', i) != std::string::npos &&
        text[text.find_first_not_of(' ', i)] == '#' && out.back() != '\n') {
      i = text.find_first_not_of(' ', i) - 1;
      out += ' ';
      continue;
    }
    out += text[i];
  }
  return out;
}

}  // namespace baton::passes::testing
