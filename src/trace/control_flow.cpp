// cond and while_loop: ordinary C++ control flow on concrete tensors, If / Loop nodes with
// closed subgraphs on symbolic ones (the ONNX semantics; docs/graph-mode.md).
//
// An If node reads [pred, then-branch captures..., else-branch captures...] (attribute
// then_inputs counts the first group); each branch is a graph whose inputs are its own
// captures. A Loop node reads [vars..., cond captures..., body captures...]; the cond
// graph takes (vars, its captures) and returns a scalar, the body takes (vars, its
// captures) and returns the next vars.
#include "baton/graph.h"
#include "baton/ops.h"
#include "trace/autodiff.h"
#include "trace/builder.h"
#include "trace/control_flow.h"

namespace baton {
namespace trace {
namespace {

// A predicate (of cond, or a loop's condition) is one element, concrete or symbolic.
void check_predicate(const Tensor& pred, const char* op, SourceLoc loc) {
  if (pred.numel() != 1)
    throw ShapeError(op, str("the condition must have one element, it has shape ", pred.shape()), loc);
}

bool truthy(const Tensor& pred, const char* op, SourceLoc loc) {
  check_predicate(pred, op, loc);
  return pred.item<double>(loc) != 0;
}

// Traces fn into a subgraph of `outer`; its results become the subgraph's outputs.
struct Traced {
  std::shared_ptr<Builder> builder;
  std::vector<Tensor> outputs;
};
Traced trace_branch(Builder& outer, const std::string& name, const std::vector<Tensor>& params,
                    const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
                    SourceLoc loc) {
  auto b = std::make_shared<Builder>(name, &outer);
  std::vector<Tensor> args;
  for (size_t i = 0; i < params.size(); ++i)
    args.push_back(b->placeholder(params[i].dtype(), params[i].shape(), str("v", i)));
  std::vector<Tensor> outs;
  {
    ActiveTrace active(*b);
    outs = fn(args);
  }
  std::vector<graph::Value*> values;
  for (const Tensor& t : outs) {
    if (!t.defined()) throw GraphError(name, "a branch returned an undefined tensor", loc);
    values.push_back(b->value_of(t, name, loc));
  }
  b->ir().set_outputs(values);
  return {b, outs};
}

std::vector<graph::Value*> capture_values(Builder& outer, const Builder& inner, SourceLoc loc) {
  std::vector<graph::Value*> out;
  for (auto& [outer_tensor, inner_value] : inner.captures()) out.push_back(outer.value_of(outer_tensor, "capture", loc));
  return out;
}

Builder& outer_builder(const std::vector<Tensor>& symbolic_inputs) {
  if (Builder* b = active()) return *b;
  for (const Tensor& t : symbolic_inputs)
    if (Builder* b = builder_of(t)) return *b;
  throw GraphError("control flow: no graph to record into");
}

// Appends a control-flow node with the given subgraphs; returns its outputs as tensors.
std::vector<Tensor> add_node(Builder& outer, const std::string& op, std::vector<graph::Value*> inputs,
                             const std::vector<Tensor>& like, ops::Attrs attrs,
                             std::vector<std::shared_ptr<Builder>> subgraphs, SourceLoc loc) {
  std::vector<graph::TensorType> types;
  for (const Tensor& t : like) types.push_back(type_of(t.dtype(), t.shape()));
  graph::Node* node = outer.ir().add_node(op, std::move(inputs), types, std::move(attrs), loc);
  for (auto& b : subgraphs) node->subgraphs.push_back(std::make_shared<graph::Graph>(std::move(b->ir())));
  std::vector<Tensor> out;
  for (size_t i = 0; i < like.size(); ++i) out.push_back(outer.wrap(node->output(i), like[i].shape()));
  return out;
}

void check_same_types(const std::vector<Tensor>& a, const std::vector<Tensor>& b, const char* what,
                      SourceLoc loc) {
  if (a.size() != b.size())
    throw GraphError(what, str("the branches return ", a.size(), " and ", b.size(), " tensors"), loc);
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].dtype() != b[i].dtype() || !(a[i].shape() == b[i].shape()))
      throw ShapeError(what, str("result ", i, " is ", a[i].dtype(), a[i].shape(), " in one branch and ",
                                 b[i].dtype(), b[i].shape(), " in the other"), loc);
}

// Re-emits graph g's nodes into the active trace on `inputs` (one per graph input).
std::vector<Tensor> replay(const graph::Graph& g, const std::vector<Tensor>& inputs, SourceLoc loc) {
  std::unordered_map<const graph::Value*, Tensor> env;
  for (size_t i = 0; i < inputs.size(); ++i) env[g.input(i)] = inputs[i];
  for (auto& node : g.nodes()) {
    if (!node->subgraphs.empty())
      throw GraphError(node->op_name(), "gradients through nested control flow are not supported yet", loc);
    std::vector<Tensor> in;
    for (graph::Value* v : node->inputs()) in.push_back(env.at(v));
    std::vector<Tensor> out = ops::call_many(*node->op(), in, node->attrs, loc);
    for (size_t i = 0; i < out.size(); ++i) env[node->output(i)] = out[i];
  }
  std::vector<Tensor> out;
  for (graph::Value* v : g.outputs()) out.push_back(env.at(v));
  return out;
}

// The gradient of an If node: an If over the gradients of each branch, so only the
// taken branch's backward runs. Inputs of the other branch get zeros.
ops::Grads if_gradient(const ops::GradContext& c) {
  const graph::Node& node = *c.output(0).impl()->symbolic->value->producer();
  const size_t n = c.inputs.size(), k = size_t(c.attrs.i("then_inputs"));
  std::vector<Tensor> seeds(c.grad_outputs.begin(), c.grad_outputs.end());
  for (size_t i = 0; i < seeds.size(); ++i)
    if (!seeds[i].defined()) seeds[i] = zeros_like(c.output(i));
  auto branch = [&](size_t which) {
    const size_t begin = which == 0 ? 1 : 1 + k, end = which == 0 ? 1 + k : n;
    std::vector<Tensor> caps(c.inputs.begin() + std::ptrdiff_t(begin), c.inputs.begin() + std::ptrdiff_t(end));
    std::vector<Tensor> outs = replay(*node.subgraphs[which], caps, c.loc);
    std::vector<Tensor> grads = gradients(outs, seeds, caps, c.loc);
    std::vector<Tensor> all;
    for (size_t i = 1; i < n; ++i) {
      Tensor g = i >= begin && i < end ? grads[i - begin] : Tensor{};
      all.push_back(g.defined() ? g : zeros_like(c.input(i)));
    }
    return all;
  };
  std::vector<Tensor> g = cond(c.input(0), [&] { return branch(0); }, [&] { return branch(1); }, c.loc);
  ops::Grads out(n);
  for (size_t i = 1; i < n; ++i)
    if (is_floating(c.input(i).dtype())) out[i] = g[i - 1];
  return out;
}

// Executing an If node: the predicate picks the branch, which runs on its own captures.
// Its parameter (OpDef::params): how many captures the then-branch takes.
int64_t then_inputs_of(const ops::CallContext& c) { return c.attrs.i("then_inputs"); }
std::vector<Tensor> run_if(const ops::CallContext& c, const ops::SubgraphRunner& run_subgraph) {
  const auto then_inputs = std::ptrdiff_t(c.params<int64_t>());
  const bool take_then = truthy(c.input(0), "if", c.loc);
  auto first = c.inputs.begin() + 1 + (take_then ? 0 : then_inputs);
  auto last = take_then ? first + then_inputs : c.inputs.end();
  return run_subgraph(take_then ? 0 : 1, std::vector<Tensor>(first, last));
}

// Executing a Loop node: the cond graph on (vars, cond captures), then the body on (vars,
// body captures), until the cond graph returns false. Its parameters: how its inputs split.
struct LoopInputs {
  std::ptrdiff_t vars, cond_captures;
};
LoopInputs loop_inputs_of(const ops::CallContext& c) {
  return {std::ptrdiff_t(c.attrs.i("num_vars")), std::ptrdiff_t(c.attrs.i("cond_captures"))};
}
std::vector<Tensor> run_loop(const ops::CallContext& c, const ops::SubgraphRunner& run_subgraph) {
  const auto [num_vars, cond_captures] = c.params<LoopInputs>();
  const auto vars_end = c.inputs.begin() + num_vars, cond_end = vars_end + cond_captures;
  std::vector<Tensor> vars(c.inputs.begin(), vars_end);
  auto with = [](std::vector<Tensor> v, auto begin, auto end) {
    v.insert(v.end(), begin, end);
    return v;
  };
  while (truthy(run_subgraph(0, with(vars, vars_end, cond_end)).at(0), "loop", c.loc))
    vars = run_subgraph(1, with(vars, cond_end, c.inputs.end()));
  return vars;
}

}  // namespace
}  // namespace trace

namespace ops {

BATON_OP(if_op, "if")
    .inputs(1, OpDef::kAnyNumber)  // pred, then-branch captures, else-branch captures
    .int_attr("then_inputs")
    .subgraphs(2)
    .outputs(-1)
    .params(trace::then_inputs_of)
    .runs_subgraphs(trace::run_if)
    .grad(trace::if_gradient)
    .onnx("If");
BATON_OP(loop_op, "loop")
    .inputs(0, OpDef::kAnyNumber)  // vars, cond captures, body captures
    .int_attr("num_vars")
    .int_attr("cond_captures")
    .subgraphs(2)
    .outputs(-1)
    .params(trace::loop_inputs_of)
    .runs_subgraphs(trace::run_loop)
    .grad([](const GradContext& c) -> Grads {
      throw GraphError("loop", "gradients through while_loop are not supported yet", c.loc);
    })
    .onnx("Loop");

}  // namespace ops

std::vector<Tensor> cond(const Tensor& pred, const std::function<std::vector<Tensor>()>& then_fn,
                         const std::function<std::vector<Tensor>()>& else_fn, SourceLoc loc) {
  using namespace trace;
  if (!pred.is_symbolic()) return truthy(pred, "cond", loc) ? then_fn() : else_fn();
  check_predicate(pred, "cond", loc);
  Builder& outer = outer_builder({pred});
  auto no_args = [](auto& fn) { return [&fn](const std::vector<Tensor>&) { return fn(); }; };
  Traced then_branch = trace_branch(outer, "then_branch", {}, no_args(then_fn), loc);
  Traced else_branch = trace_branch(outer, "else_branch", {}, no_args(else_fn), loc);
  check_same_types(then_branch.outputs, else_branch.outputs, "cond", loc);
  std::vector<graph::Value*> inputs{outer.value_of(pred, "cond", loc)};
  for (auto* v : capture_values(outer, *then_branch.builder, loc)) inputs.push_back(v);
  const auto then_inputs = int64_t(inputs.size() - 1);
  for (auto* v : capture_values(outer, *else_branch.builder, loc)) inputs.push_back(v);
  return add_node(outer, "if", std::move(inputs), then_branch.outputs, {{"then_inputs", then_inputs}},
                  {then_branch.builder, else_branch.builder}, loc);
}

Tensor cond(const Tensor& pred, const std::function<Tensor()>& then_fn,
            const std::function<Tensor()>& else_fn, SourceLoc loc) {
  std::function<std::vector<Tensor>()> t = [&] { return std::vector<Tensor>{then_fn()}; };
  std::function<std::vector<Tensor>()> e = [&] { return std::vector<Tensor>{else_fn()}; };
  return cond(pred, t, e, loc).at(0);
}

std::vector<Tensor> while_loop(const LoopCondFn& cond_fn, const LoopBodyFn& body_fn,
                               std::vector<Tensor> vars, SourceLoc loc) {
  using namespace trace;
  bool symbolic = active() != nullptr;
  for (const Tensor& v : vars) symbolic = symbolic || v.is_symbolic();
  if (!symbolic) {
    while (truthy(cond_fn(vars), "while_loop", loc)) vars = body_fn(vars);  // item() explains a symbolic cond
    return vars;
  }
  Builder& outer = outer_builder(vars);
  Traced cond_graph = trace_branch(outer, "loop_cond", vars, [&](auto& v) { return std::vector<Tensor>{cond_fn(v)}; }, loc);
  Traced body = trace_branch(outer, "loop_body", vars, body_fn, loc);
  check_predicate(cond_graph.outputs[0], "while_loop", loc);
  check_same_types(vars, body.outputs, "while_loop", loc);
  std::vector<graph::Value*> inputs;
  for (const Tensor& v : vars) inputs.push_back(outer.value_of(v, "while_loop", loc));
  auto cond_caps = capture_values(outer, *cond_graph.builder, loc);
  inputs.insert(inputs.end(), cond_caps.begin(), cond_caps.end());
  for (auto* v : capture_values(outer, *body.builder, loc)) inputs.push_back(v);
  return add_node(outer, "loop", std::move(inputs), vars,
                  {{"num_vars", int64_t(vars.size())}, {"cond_captures", int64_t(cond_caps.size())}},
                  {cond_graph.builder, body.builder}, loc);
}

}  // namespace baton

namespace baton::trace {

const ops::OpDef& if_op() { return ops::if_op; }
const ops::OpDef& loop_op() { return ops::loop_op; }

}  // namespace baton::trace
