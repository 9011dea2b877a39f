// Running If and Loop nodes: their subgraphs are planned with the enclosing plan and run
// here with the node's inputs (see trace/control_flow.cpp for how they are built).
#include "runtime/plan.h"

namespace baton::runtime {
namespace {

bool truthy(const Tensor& pred) { return pred.item<double>() != 0; }

std::vector<Tensor> run_if(const graph::Node& node, const std::vector<std::shared_ptr<const Plan>>& plans,
                           const std::vector<Tensor>& inputs, const sym::Bindings& bindings) {
  const auto then_inputs = size_t(node.attrs.i("then_inputs"));
  const bool take_then = truthy(inputs[0]);
  auto first = inputs.begin() + 1 + (take_then ? 0 : std::ptrdiff_t(then_inputs));
  auto last = take_then ? first + std::ptrdiff_t(then_inputs) : inputs.end();
  std::vector<Tensor> args(first, last);
  return execute_graph(*plans[take_then ? 0 : 1], args, bindings);
}

std::vector<Tensor> run_loop(const graph::Node& node, const std::vector<std::shared_ptr<const Plan>>& plans,
                             const std::vector<Tensor>& inputs, const sym::Bindings& bindings) {
  const auto num_vars = size_t(node.attrs.i("num_vars"));
  const auto cond_captures = size_t(node.attrs.i("cond_captures"));
  std::vector<Tensor> vars(inputs.begin(), inputs.begin() + std::ptrdiff_t(num_vars));
  auto captures = [&](size_t begin, size_t end) {
    return std::vector<Tensor>(inputs.begin() + std::ptrdiff_t(begin), inputs.begin() + std::ptrdiff_t(end));
  };
  const std::vector<Tensor> cond_caps = captures(num_vars, num_vars + cond_captures);
  const std::vector<Tensor> body_caps = captures(num_vars + cond_captures, inputs.size());
  auto with = [&](std::vector<Tensor> v, const std::vector<Tensor>& caps) {
    v.insert(v.end(), caps.begin(), caps.end());
    return v;
  };
  while (truthy(execute_graph(*plans[0], with(vars, cond_caps), bindings).at(0)))
    vars = execute_graph(*plans[1], with(vars, body_caps), bindings);
  return vars;
}

}  // namespace

std::vector<Tensor> run_control_flow(const graph::Node& node,
                                     const std::vector<std::shared_ptr<const Plan>>& subplans,
                                     const std::vector<Tensor>& inputs, const sym::Bindings& bindings) {
  if (node.op_name() == "if") return run_if(node, subplans, inputs, bindings);
  if (node.op_name() == "loop") return run_loop(node, subplans, inputs, bindings);
  throw GraphError(str("graph: no runtime for subgraphs of '", node.op_name(), "'"));
}

}  // namespace baton::runtime
