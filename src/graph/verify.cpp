// The verifier: reports every broken invariant of a graph at once, each problem naming
// the graph, the node (its results and op) and the user's file:line.
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "graph/ir.h"

namespace baton::graph {
namespace {

class Verifier {
 public:
  Verifier(const Graph& g, const VerifyOptions& options, std::string scope,
           std::vector<std::string>& problems)
      : g_(g), options_(options), scope_(std::move(scope)), problems_(problems), names_(g) {}

  void run() {
    collect_definitions();
    std::unordered_set<const Value*> defined;
    for (auto& v : g_.input_values()) defined.insert(v.get());
    for (size_t k = 0; k < g_.num_nodes(); ++k) {
      const Node& n = *g_.nodes()[k];
      check_op(n);
      check_inputs(n, defined);
      for (size_t i = 0; i < n.num_outputs(); ++i) defined.insert(n.output(i));
      check_subgraphs(n);
    }
    check_outputs();
    check_names();
    for (const Value* v : order_) check_use_list(v);
  }

 private:
  std::string describe(const Node& n) const {
    std::string s = "node ";
    for (size_t i = 0; i < n.num_outputs(); ++i) s += str(i ? ", " : "", names_(n.output(i)));
    s += str(n.num_outputs() ? " = " : "", n.op_name());
    if (n.loc.known()) s += str(" (", n.loc.file, ":", n.loc.line, ")");
    return s;
  }
  void problem(const Node* n, const std::string& what) {
    problems_.push_back(str(scope_, n ? ", " + describe(*n) : "", ": ", what));
  }

  // Every value this graph defines, and the node that defines it (nullptr: an input).
  void collect_definitions() {
    for (auto& v : g_.input_values()) define(v.get(), nullptr);
    for (auto& n : g_.nodes()) {
      nodes_.insert(n.get());
      for (size_t i = 0; i < n->num_outputs(); ++i) {
        Value* v = n->output(i);
        if (v->producer() != n.get() || v->output_index() != int(i))
          problem(n.get(), str("output ", i, " does not record this node as its producer"));
        define(v, n.get());
      }
    }
  }
  void define(const Value* v, const Node* n) {
    if (!produced_.emplace(v, n).second) problem(n, str(names_(v), " is defined twice"));
    else order_.push_back(v);
  }

  void check_op(const Node& n) {
    if (!n.op()) {
      if (!options_.allow_unknown_ops) problem(&n, str("unknown op '", n.op_name(), "' (not in the op registry)"));
      return;
    }
    if (n.op()->num_outputs >= 0 && int(n.num_outputs()) != n.op()->num_outputs)
      problem(&n, str("has ", n.num_outputs(), " outputs but op '", n.op_name(), "' has ",
                      n.op()->num_outputs));
  }

  void check_inputs(const Node& n, const std::unordered_set<const Value*>& defined) {
    for (size_t i = 0; i < n.num_inputs(); ++i) {
      const Value* v = n.input(i);
      if (!v) { problem(&n, str("input ", i, " is null")); continue; }
      if (produced_.count(v) && !defined.count(v))
        problem(&n, str("input ", i, " uses ", names_(v), " before its definition"));
      else if (!produced_.count(v))
        problem(&n, str("input ", i, " (", names_(v), ") is not defined in this graph"));
      if (std::find(v->uses().begin(), v->uses().end(), Use{const_cast<Node*>(&n), int(i)}) == v->uses().end())
        problem(&n, str("the use list of ", names_(v), " lacks input ", i, " of this node"));
    }
  }

  // Each recorded use must be a node of this graph reading the value at that index.
  void check_use_list(const Value* v) {
    for (const Use& u : v->uses())
      if (!nodes_.count(u.user) || u.index < 0 || size_t(u.index) >= u.user->num_inputs() ||
          u.user->input(size_t(u.index)) != v)
        problems_.push_back(str(scope_, ": the use list of ", names_(v),
                                " names an input that does not read it"));
  }

  void check_subgraphs(const Node& n) {
    for (size_t k = 0; k < n.subgraphs.size(); ++k) {
      const Graph* sub = n.subgraphs[k].get();
      if (!sub) { problem(&n, str("subgraph ", k, " is null")); continue; }
      std::string scope = str("graph @", sub->name(), " (subgraph ", k, " of ", describe(n), " in ", scope_, ")");
      Verifier(*sub, options_, scope, problems_).run();
    }
  }

  void check_outputs() {
    for (size_t k = 0; k < g_.outputs().size(); ++k) {
      const Value* v = g_.outputs()[k];
      if (!v) problem(nullptr, str("output ", k, " is null"));
      else if (!produced_.count(v))
        problem(nullptr, str("output ", k, " (", names_(v), ") is not defined in this graph"));
    }
  }

  void check_names() {
    std::unordered_map<std::string, int> seen;
    for (const Value* v : order_)
      if (!v->name().empty() && ++seen[v->name()] == 2)
        problem(nullptr, str("more than one value is named %", v->name()));
  }

  const Graph& g_;
  const VerifyOptions& options_;
  std::string scope_;
  std::vector<std::string>& problems_;
  ValueNames names_;
  std::unordered_map<const Value*, const Node*> produced_;
  std::vector<const Value*> order_;  // definition order, so messages are deterministic
  std::unordered_set<const Node*> nodes_;
};

}  // namespace

void verify(const Graph& g, const VerifyOptions& options) {
  std::vector<std::string> problems;
  Verifier(g, options, str("graph @", g.name()), problems).run();
  if (problems.empty()) return;
  std::string msg = str("graph @", g.name(), " is invalid (", problems.size(),
                        problems.size() == 1 ? " problem):" : " problems):");
  for (auto& p : problems) msg += "\n  - " + p;
  throw ValueError(msg);
}

}  // namespace baton::graph
