#include "runtime/plan.h"

#include <unordered_set>

#include "baton/autograd.h"

namespace baton::runtime {
namespace {

ops::Attrs resolve(const ops::Attrs& attrs, const sym::Bindings& bindings) {
  ops::Attrs out = attrs;
  for (auto& [name, value] : attrs.items()) {
    if (auto* i = std::get_if<int64_t>(&value); i && sym::is_symbol(*i)) out.set(name, bindings.eval(*i));
    if (auto* v = std::get_if<std::vector<int64_t>>(&value)) {
      std::vector<int64_t> dims = *v;
      for (int64_t& d : dims)
        if (sym::is_symbol(d)) d = bindings.eval(d);
      out.set(name, std::move(dims));
    }
  }
  return out;
}

// Nodes the fetches and effects need, in graph order.
std::vector<const graph::Node*> needed_nodes(const graph::Graph& g,
                                             std::span<graph::Value* const> fetches,
                                             std::span<graph::Node* const> effects) {
  std::unordered_set<const graph::Value*> wanted(fetches.begin(), fetches.end());
  std::unordered_set<const graph::Node*> forced(effects.begin(), effects.end());
  std::vector<const graph::Node*> order;
  for (auto it = g.nodes().rbegin(); it != g.nodes().rend(); ++it) {
    const graph::Node* n = it->get();
    bool need = forced.count(n) > 0;
    for (graph::Value* out : n->outputs()) need = need || wanted.count(out);
    if (!need) continue;
    order.push_back(n);
    for (graph::Value* in : n->inputs()) wanted.insert(in);
  }
  return {order.rbegin(), order.rend()};
}

// "graph node 'matmul' built at mlp.cpp:12": where a failing node came from.
std::string describe(const graph::Node& n) {
  std::string where = n.loc.known() ? str(" built at ", n.loc.file, ":", n.loc.line) : "";
  return str("graph node '", n.op_name(), "'", where);
}

// Rethrows e with the node's origin appended, keeping its kind.
[[noreturn]] void rethrow_with_node(const Error& e, const graph::Node& n) {
  const std::string msg = str(e.what(), "; in ", describe(n));
  if (dynamic_cast<const ShapeError*>(&e)) throw ShapeError(msg);
  if (dynamic_cast<const DTypeError*>(&e)) throw DTypeError(msg);
  if (dynamic_cast<const ValueError*>(&e)) throw ValueError(msg);
  if (dynamic_cast<const IndexError*>(&e)) throw IndexError(msg);
  if (dynamic_cast<const GraphError*>(&e)) throw GraphError(msg);
  if (dynamic_cast<const AutogradError*>(&e)) throw AutogradError(msg);
  if (dynamic_cast<const IOError*>(&e)) throw IOError(msg);
  throw RuntimeError(msg);
}

// Shape rules trusted some symbolic sizes to match (broadcasting, matmul's inner size):
// a run where they did not would make the graph's types wrong, so check what each node
// produced against its type.
void check_output_shapes(const graph::Node& n, const std::vector<Tensor>& out,
                         const sym::Bindings& bindings) {
  for (size_t i = 0; i < out.size(); ++i) {
    const Shape declared = n.output(i)->shape().raw();
    const Shape expected = sym::is_static(declared) ? declared : bindings.eval(declared);
    if (!(expected == out[i].shape()))
      throw ShapeError(str("[", n.op_name(), "] produced shape ", out[i].shape(), " where the graph says ",
                           declared, " = ", expected, " in this run; in ", describe(n)));
  }
}

}  // namespace

Plan make_plan(const graph::Graph& g, std::span<graph::Value* const> fetches,
               std::span<graph::Node* const> effects) {
  Plan plan;
  std::unordered_map<const graph::Value*, int> slot;
  auto slot_of = [&](const graph::Value* v) {
    auto [it, fresh] = slot.emplace(v, plan.num_slots);
    if (fresh) {
      ++plan.num_slots;
      if (!v->producer()) plan.inputs.emplace_back(v, it->second);
    }
    return it->second;
  };
  for (const graph::Node* n : needed_nodes(g, fetches, effects)) {
    Step step{n, {}, {}, {}, n->attrs.holds_symbols()};
    for (graph::Value* in : n->inputs()) step.inputs.push_back(slot_of(in));
    for (graph::Value* out : n->outputs()) step.outputs.push_back(slot_of(out));
    for (auto& sub : n->subgraphs) {  // a subgraph runs whole, its updates included
      std::vector<graph::Node*> updates;
      for (auto& node : sub->nodes())
        if (node->op() && !node->op()->mutated_inputs.empty()) updates.push_back(node.get());
      step.subplans.push_back(std::make_shared<Plan>(make_plan(*sub, sub->outputs(), updates)));
    }
    plan.steps.push_back(std::move(step));
  }
  for (graph::Value* f : fetches) plan.fetches.push_back(slot_of(f));
  // Liveness: a slot is released after its last reader unless it is fetched.
  std::vector<int> last_use(size_t(plan.num_slots), -1);
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    for (int s : plan.steps[i].inputs) last_use[size_t(s)] = int(i);
    for (int s : plan.steps[i].outputs) last_use[size_t(s)] = std::max(last_use[size_t(s)], int(i));
  }
  for (int f : plan.fetches) last_use[size_t(f)] = -1;
  for (int s = 0; s < plan.num_slots; ++s)
    if (last_use[size_t(s)] >= 0) plan.steps[size_t(last_use[size_t(s)])].release.push_back(s);
  return plan;
}

void bind_input(const graph::Value& input, const Tensor& value, const std::string& what,
                sym::Bindings& bindings, SourceLoc loc) {
  const Shape declared = input.shape().raw();
  auto mismatch = [&](const std::string& why) {
    throw ShapeError("Session.run", str(what, " expects ", input.dtype(), declared, ", got ",
                                        value.dtype(), value.shape(), ": ", why), loc);
  };
  if (value.dtype() != input.dtype()) mismatch("dtypes differ");
  if (value.dim() != int64_t(declared.size())) mismatch("ranks differ");
  for (size_t d = 0; d < declared.size(); ++d) {
    const int64_t want = declared[d], got = value.shape()[d];
    if (want >= 0 && want != got) mismatch(str("dim ", d, " must be ", want));
    if (want < 0 && !bindings.bind(want, got))
      mismatch(str("dim ", d, " is '", sym::to_string(want), "', already ", *bindings.lookup(want),
                   " in this run"));
  }
}

std::vector<Tensor> execute(const Plan& plan, std::vector<Tensor> inputs,
                            const sym::Bindings& bindings) {
  NoGradGuard no_grad;  // a plan computes values; gradients are nodes of their own
  trace::NoTrace no_trace;  // kernels run even when called from inside a trace
  std::vector<Tensor> slots(size_t(plan.num_slots));
  for (size_t i = 0; i < plan.inputs.size(); ++i) slots[size_t(plan.inputs[i].second)] = std::move(inputs[i]);
  std::vector<Tensor> in, out;
  for (const Step& step : plan.steps) {
    in.clear();
    for (int s : step.inputs) in.push_back(slots[size_t(s)]);
    out.assign(step.outputs.size(), Tensor{});
    const graph::Node& node = *step.node;
    try {
      if (!step.subplans.empty()) {
        out = node.op()->control_flow(ops::CallContext{*node.op(), in, node.attrs, SourceLoc::current()},
                                      [&](size_t index, std::vector<Tensor> args) {
                                        return execute_graph(*step.subplans[index], args, bindings);
                                      });
      } else if (step.symbolic_attrs) {
        ops::Attrs attrs = resolve(node.attrs, bindings);
        ops::call(*node.op(), in, attrs, out, SourceLoc::current());
      } else {
        ops::call(*node.op(), in, node.attrs, out, SourceLoc::current());
      }
    } catch (const Error& e) {
      rethrow_with_node(e, node);
    }
    check_output_shapes(node, out, bindings);
    for (size_t i = 0; i < step.outputs.size(); ++i) slots[size_t(step.outputs[i])] = std::move(out[i]);
    for (int s : step.release) slots[size_t(s)] = Tensor{};
  }
  std::vector<Tensor> fetched;
  for (int f : plan.fetches) fetched.push_back(slots[size_t(f)]);
  return fetched;
}

std::vector<Tensor> execute_graph(const Plan& plan, std::span<const Tensor> graph_inputs,
                                  const sym::Bindings& bindings) {
  std::vector<Tensor> inputs;
  for (auto& [value, slot] : plan.inputs) inputs.push_back(graph_inputs[size_t(value->output_index())]);
  return execute(plan, std::move(inputs), bindings);
}

}  // namespace baton::runtime
