// The verifier: reports every broken invariant of a graph at once, each problem naming
// the graph, the node (its results and op) and the user's file:line.
//
// Beyond SSA form it checks every node against its op's definition (ops/registry.h): the
// operand count, the attribute schema, the subgraph count, and the result types, which it
// infers by running the op's own infer (or view) rule on symbolic tensors of the operands'
// declared types, the way graph building does. If and Loop, which have no infer rule, get
// their structural rules checked here (operand groups, subgraph signatures, result types).
// So a graph that verifies cannot make a kernel read an operand or attribute that is not
// there, nor make the runtime index past a control-flow node's operands.
#include <algorithm>
#include <ostream>
#include <unordered_map>
#include <unordered_set>

#include "trace/verify.h"

#include "graph/text.h"
#include "trace/builder.h"
#include "trace/control_flow.h"

namespace baton::trace {
using namespace graph;
using Graph = graph::Graph;  // the IR graph, not the public baton::Graph
namespace {

class Verifier {
 public:
  Verifier(const Graph& g, const VerifyOptions& options, std::string scope,
           std::vector<std::string>& problems, int depth = 0)
      : g_(g), options_(options), scope_(std::move(scope)), problems_(problems), names_(g), depth_(depth) {}

  void run() {
    collect_definitions();
    std::unordered_set<const Value*> defined;
    for (auto& v : g_.input_values()) {
      defined.insert(v.get());
      check_type(nullptr, *v, "input");
    }
    for (size_t k = 0; k < g_.num_nodes(); ++k) {
      const Node& n = *g_.nodes()[k];
      const size_t before = problems_.size();
      check_op(n);
      check_inputs(n, defined);
      for (size_t i = 0; i < n.num_outputs(); ++i) {
        defined.insert(n.output(i));
        check_type(&n, *n.output(i), str("result ", i));
      }
      // Types are inferred only for a node whose structure is sound: the rules may read
      // every declared operand and required attribute.
      bool sound = problems_.size() == before && n.op();
      for (const Value* v : n.inputs()) sound = sound && !bad_types_.count(v);
      if (sound) check_types(n);
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
    const ops::OpDef& op = *n.op();
    if (op.num_outputs >= 0 && int(n.num_outputs()) != op.num_outputs)
      problem(&n, str("has ", n.num_outputs(), " outputs but op '", n.op_name(), "' has ",
                      op.num_outputs));
    if (!op.declares_inputs())
      problem(&n, str("op '", op.name, "' declares no operand count (.inputs(n) in its BATON_OP)"));
    else if (!op.accepts_input_count(n.num_inputs()))
      problem(&n, str("op '", op.name, "' takes ", arity(op), ", the node has ", n.num_inputs()));
    if (n.subgraphs.size() != size_t(op.num_subgraphs))
      problem(&n, str("op '", op.name, "' takes ", op.num_subgraphs, " subgraph",
                      op.num_subgraphs == 1 ? "" : "s", ", the node has ", n.subgraphs.size()));
    check_attrs(n, op);
  }

  static std::string arity(const ops::OpDef& op) {
    auto operands = [](int k) { return str(k, k == 1 ? " operand" : " operands"); };
    if (op.max_inputs == ops::OpDef::kAnyNumber) return str("at least ", operands(op.min_inputs));
    if (op.min_inputs == op.max_inputs) return operands(op.min_inputs);
    return str(op.min_inputs, " to ", operands(op.max_inputs));
  }

  static const char* kind_name(ops::OpDef::AttrKind k) {
    switch (k) {
      case ops::OpDef::AttrKind::Int: return "an int";
      case ops::OpDef::AttrKind::Float: return "a float";
      case ops::OpDef::AttrKind::Ints: return "a list of ints";
      case ops::OpDef::AttrKind::String: return "a string";
      case ops::OpDef::AttrKind::DType: return "a dtype";
    }
    return "?";
  }
  static const char* kind_of(const ops::AttrValue& v) {
    static const char* names[] = {"an int", "a float", "a list of ints", "a string", "a dtype"};
    return names[v.index()];
  }
  static bool fits(ops::OpDef::AttrKind k, const ops::AttrValue& v) {
    switch (k) {
      case ops::OpDef::AttrKind::Int: return std::holds_alternative<int64_t>(v);
      case ops::OpDef::AttrKind::Float: return std::holds_alternative<double>(v) || std::holds_alternative<int64_t>(v);
      case ops::OpDef::AttrKind::Ints: return std::holds_alternative<std::vector<int64_t>>(v);
      case ops::OpDef::AttrKind::String: return std::holds_alternative<std::string>(v);
      case ops::OpDef::AttrKind::DType: return std::holds_alternative<DType>(v);
    }
    return false;
  }

  static bool holds_invalid_symbol(const ops::AttrValue& v) {
    auto bad = [](int64_t d) { return sym::is_symbol(d) && !sym::is_valid_dim(d); };
    if (auto* i = std::get_if<int64_t>(&v)) return bad(*i);
    if (auto* l = std::get_if<std::vector<int64_t>>(&v)) return std::any_of(l->begin(), l->end(), bad);
    return false;
  }

  // Every attribute declared, of its kind (and length); every required one present.
  void check_attrs(const Node& n, const ops::OpDef& op) {
    std::unordered_set<std::string_view> seen;
    for (auto& [name, value] : n.attrs.items()) {
      if (!seen.insert(name).second) {
        problem(&n, str("attribute '", name, "' is given twice"));
        continue;
      }
      const ops::OpDef::AttrSpec* spec = op.attr_spec(name);
      if (!spec) {
        std::string known;
        for (auto& a : op.attr_specs) known += str(known.empty() ? "" : ", ", a.name);
        problem(&n, str("unknown attribute '", name, "' (op '", op.name, "' takes ",
                        known.empty() ? "no attributes" : known, ")"));
      } else if (!fits(spec->kind, value)) {
        problem(&n, str("attribute '", name, "' must be ", kind_name(spec->kind), ", found ", kind_of(value),
                        " (", format_attr_value(value), ")"));
      } else if (auto* list = std::get_if<std::vector<int64_t>>(&value);
                 list && spec->length >= 0 && list->size() != size_t(spec->length)) {
        problem(&n, str("attribute '", name, "' must hold ", spec->length, " ints, found ", list->size(),
                        " (", format_attr_value(value), ")"));
      } else if (holds_invalid_symbol(value)) {
        problem(&n, str("attribute '", name, "' holds an invalid symbolic dim"));
      }
    }
    for (auto& a : op.attr_specs)
      if (a.presence == ops::OpDef::required && !n.attrs.has(a.name))
        problem(&n, str("attribute '", a.name, "' (", kind_name(a.kind), ") is missing"));
  }

  // A value's type must be one a tensor can have: valid dims and an element count (of
  // its static dims) that fits in int64 bytes.
  void check_type(const Node* n, const Value& v, const std::string& what) {
    int64_t count = 8;  // bytes of the widest dtype
    for (const Dim& d : v.shape()) {
      if (!sym::is_valid_dim(d.raw())) {
        bad_types_.insert(&v);
        return problem(n, str(what, " (", names_(&v), ") has an invalid dim in its type"));
      }
      if (d.is_static() && __builtin_mul_overflow(count, d.raw(), &count)) {
        bad_types_.insert(&v);
        return problem(n, str(what, " (", names_(&v), ") of type ", v.type, " is too large to exist"));
      }
    }
  }

  // The result types against the op's rule (or, for If and Loop, their signatures).
  void check_types(const Node& n) {
    if (n.op() == &if_op()) return check_if(n);
    if (n.op() == &loop_op()) return check_loop(n);
    std::vector<ops::TensorMeta> inferred;
    try {
      trace::NoTrace no_trace;  // a rule that calls ops records into the scratch graph only
      std::vector<Tensor> inputs;
      for (Value* v : n.inputs()) inputs.push_back(symbolic(v));
      ops::CallContext ctx{*n.op(), inputs, n.attrs, SourceLoc::current()};
      inferred = n.op()->infer_outputs(ctx);
    } catch (const Error& e) {
      std::string m = e.what();
      if (!e.where().empty()) {
        const std::string at = str(" (at ", e.where(), ")");
        if (m.size() >= at.size() && m.compare(m.size() - at.size(), at.size(), at) == 0)
          m.resize(m.size() - at.size());
      }
      problem(&n, str("the op rejects its operands and attributes: ", m));
      return;
    } catch (const std::exception& e) {
      problem(&n, str("the op rejects its operands and attributes: ", e.what()));
      return;
    }
    if (inferred.size() != n.num_outputs()) {
      problem(&n, str("declares ", n.num_outputs(), " results but '", n.op_name(), "' gives ", inferred.size()));
      return;
    }
    for (size_t i = 0; i < inferred.size(); ++i) {
      for (int64_t d : inferred[i].shape)
        if (!sym::is_valid_dim(d)) {
          problem(&n, str("cannot infer result ", i, " from symbolic dims; mark those dims static"));
          return;
        }
      const TensorType want{inferred[i].dtype, SymShape(inferred[i].shape)};
      if (!(n.output(i)->type == want))
        problem(&n, str("result ", i, " (", names_(n.output(i)), ") is declared ", n.output(i)->type, " but '",
                        n.op_name(), "' gives ", want));
    }
  }

  // A symbolic tensor of v's declared type, in a scratch graph of its own (never v's).
  Tensor symbolic(const Value* v) {
    if (!scratch_) scratch_ = std::make_shared<trace::Builder>("verify");
    auto it = symbolic_.find(v);
    if (it == symbolic_.end()) it = symbolic_.emplace(v, scratch_->placeholder(v->dtype(), v->shape().raw(), "")).first;
    return it->second;
  }

  // The declared types of values, for comparing signatures.
  static std::vector<TensorType> types_of(std::span<Value* const> values) {
    std::vector<TensorType> out;
    for (const Value* v : values) out.push_back(v ? v->type : TensorType{});
    return out;
  }
  static std::string list(const std::vector<TensorType>& types) {
    std::string s = "(";
    for (size_t i = 0; i < types.size(); ++i) s += str(i ? ", " : "", types[i]);
    return s + ")";
  }
  // Subgraph k of n must take `params` and return `results`.
  void check_signature(const Node& n, size_t k, const std::vector<TensorType>& params,
                       const std::vector<TensorType>& results) {
    const Graph& sub = *n.subgraphs[k];
    const std::vector<TensorType> in = types_of(sub.inputs()), out = types_of(sub.outputs());
    if (in != params)
      problem(&n, str("subgraph ", k, " (@", sub.name(), ") takes ", list(in), " but the node passes ", list(params)));
    if (out != results)
      problem(&n, str("subgraph ", k, " (@", sub.name(), ") returns ", list(out), " but the node needs ", list(results)));
  }
  static bool is_one_element(const TensorType& t) {
    return std::all_of(t.shape.begin(), t.shape.end(), [](const Dim& d) { return d == Dim(1); });
  }

  // if(pred, then captures..., else captures...) {then_inputs}: branches take their
  // captures and both return the node's result types.
  void check_if(const Node& n) {
    const int64_t k = n.attrs.i("then_inputs");
    const auto operands = int64_t(n.num_inputs());
    if (k < 0 || k > operands - 1)
      return problem(&n, str("then_inputs is ", k, " but the node has ", operands - 1, " captured operands"));
    if (!is_one_element(n.input(0)->type))
      problem(&n, str("the condition must have one element, it is ", n.input(0)->type));
    const std::vector<TensorType> all = types_of(n.inputs()), results = types_of(n.outputs());
    check_signature(n, 0, {all.begin() + 1, all.begin() + 1 + k}, results);
    check_signature(n, 1, {all.begin() + 1 + k, all.end()}, results);
  }

  // loop(vars..., cond captures..., body captures...) {num_vars, cond_captures}: the cond
  // takes (vars, its captures) and returns one element; the body takes (vars, its
  // captures) and returns the vars; the node returns the vars.
  void check_loop(const Node& n) {
    const int64_t v = n.attrs.i("num_vars"), cc = n.attrs.i("cond_captures");
    const auto operands = int64_t(n.num_inputs());
    if (v < 0 || cc < 0 || v > operands || cc > operands - v)
      return problem(&n, str("num_vars ", v, " and cond_captures ", cc, " do not fit the node's ", operands,
                             " operands"));
    const std::vector<TensorType> all = types_of(n.inputs());
    const std::vector<TensorType> vars(all.begin(), all.begin() + v);
    if (types_of(n.outputs()) != vars)
      problem(&n, str("the loop returns its vars ", list(vars), " but the node declares ",
                      list(types_of(n.outputs()))));
    std::vector<TensorType> cond_in = vars, body_in = vars;
    cond_in.insert(cond_in.end(), all.begin() + v, all.begin() + v + cc);
    body_in.insert(body_in.end(), all.begin() + v + cc, all.end());
    // The condition returns one value of one element (any dtype, as in while_loop).
    const Graph& cond = *n.subgraphs[0];
    std::vector<TensorType> cond_out = types_of(cond.outputs());
    if (cond_out.size() != 1 || !is_one_element(cond_out[0]))
      problem(&n, str("subgraph 0 (@", cond.name(), ") must return one value of one element, it returns ",
                      list(cond_out)));
    check_signature(n, 0, cond_in, cond_out);
    check_signature(n, 1, body_in, vars);
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
    if (depth_ >= kMaxDepth) return problem(&n, str("subgraphs nested deeper than ", kMaxDepth, " levels"));
    for (size_t k = 0; k < n.subgraphs.size(); ++k) {
      const Graph* sub = n.subgraphs[k].get();
      if (!sub) { problem(&n, str("subgraph ", k, " is null")); continue; }
      std::string scope = str("graph @", sub->name(), " (subgraph ", k, " of ", describe(n), " in ", scope_, ")");
      Verifier(*sub, options_, scope, problems_, depth_ + 1).run();
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
  int depth_;
  static constexpr int kMaxDepth = 64;  // of subgraphs: deeper is an error, not a stack overflow
  std::shared_ptr<trace::Builder> scratch_;  // holds the symbolic operands of type inference
  std::unordered_map<const Value*, Tensor> symbolic_;
  std::unordered_set<const Value*> bad_types_;
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

}  // namespace baton::trace
