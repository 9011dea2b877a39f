// baton's control flow as ONNX If and Loop (src/trace/control_flow.cpp gives the nodes'
// input layout). ONNX subgraphs read outer values by name, so the inputs of a baton
// subgraph (captures of outer values) are just the names of the node's inputs. A baton
// loop has a cond graph and a body graph; it becomes a Loop with no trip count whose first
// condition is the cond graph written before it, and whose body computes the next values
// and then, with the cond graph written again, the next condition.
#include "io/onnx/exporter.h"

namespace baton::onnx::detail {
namespace {

const graph::TensorType kBoolScalar{DType::b8, graph::SymShape{}};

// A one-element value as the bool scalar that If and Loop read.
std::string bool_scalar(ExportContext& c, std::string name, const graph::TensorType& type) {
  if (type.dtype != DType::b8) {
    const std::string cast = c.fresh("truth");
    c.add("Cast", {name}, {cast}).attr("to", int64_t(to_onnx_type(DType::b8)));
    name = cast;
  }
  if (type.shape.rank() == 0) return name;
  const std::string scalar = c.fresh("scalar");
  c.add("Reshape", {name, c.ints({}, "scalar_shape")}, {scalar});
  return scalar;
}

// Node inputs [begin, end).
Names inputs_between(const ExportContext& c, size_t begin, size_t end) {
  Names out;
  for (size_t i = begin; i < end; ++i) out.push_back(c.input(i));
  return out;
}

Names joined(Names a, const Names& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<graph::TensorType> output_types(const graph::Graph& g) {
  std::vector<graph::TensorType> types;
  for (const graph::Value* v : g.outputs()) types.push_back(v->type);
  return types;
}

// An If branch: subgraph g on the outer values `captures`, its outputs the branch's.
void write_branch(ExportContext& c, ::onnx::GraphProto& into, const graph::Graph& g, const Names& captures) {
  into.set_name(c.fresh(g.name()));
  ExportContext inner = c.in(into);
  add_graph_outputs(into, inner.write_subgraph(g, captures), output_types(g), c.writer());
}

// The loop condition: the cond graph on (vars, its captures), as a bool scalar.
std::string loop_condition(ExportContext& c, const graph::Graph& cond, const Names& vars, const Names& captures) {
  const Names result = c.write_subgraph(cond, joined(vars, captures));
  return bool_scalar(c, result.at(0), cond.outputs().at(0)->type);
}

// A body input: its name and type.
std::string body_input(ExportContext& c, ::onnx::GraphProto& body, const std::string& hint,
                       const graph::TensorType& type) {
  ::onnx::ValueInfoProto* in = body.add_input();
  in->set_name(c.fresh(hint));
  set_value_type(*in, type);
  return in->name();
}

void export_if(ExportContext& c) {
  const size_t then_inputs = size_t(c.attrs().i("then_inputs"));
  Names outs;
  for (size_t i = 0; i < c.node.num_outputs(); ++i) outs.push_back(c.output(i));
  OnnxNode n = c.add("If", {bool_scalar(c, c.input(0), c.input_type(0))}, outs);
  write_branch(c, n.graph_attr("then_branch"), *c.node.subgraphs.at(0), inputs_between(c, 1, 1 + then_inputs));
  write_branch(c, n.graph_attr("else_branch"), *c.node.subgraphs.at(1),
               inputs_between(c, 1 + then_inputs, c.num_inputs()));
}

// Inputs [vars..., cond captures..., body captures...] -> Loop(M = none, first condition,
// vars...) whose body (iteration, condition, vars...) returns (next condition, next vars...).
void export_loop(ExportContext& c) {
  const size_t num_vars = size_t(c.attrs().i("num_vars"));
  const size_t cond_end = num_vars + size_t(c.attrs().i("cond_captures"));
  const graph::Graph& cond = *c.node.subgraphs.at(0);
  const graph::Graph& body = *c.node.subgraphs.at(1);
  const Names vars = inputs_between(c, 0, num_vars), cond_captures = inputs_between(c, num_vars, cond_end);
  const Names body_captures = inputs_between(c, cond_end, c.num_inputs());
  Names outs;
  for (size_t i = 0; i < num_vars; ++i) outs.push_back(c.output(i));
  OnnxNode loop = c.add("Loop", joined({"", loop_condition(c, cond, vars, cond_captures)}, vars), outs);
  ::onnx::GraphProto& g = loop.graph_attr("body");
  g.set_name(c.fresh("loop_body"));
  ExportContext inner = c.in(g);
  body_input(inner, g, "iteration", {DType::i64, graph::SymShape{}});
  body_input(inner, g, "condition", kBoolScalar);
  Names body_vars;
  std::vector<graph::TensorType> types{kBoolScalar};
  for (size_t i = 0; i < num_vars; ++i) {
    body_vars.push_back(body_input(inner, g, "var", c.input_type(i)));
    types.push_back(c.input_type(i));
  }
  const Names next = inner.write_subgraph(body, joined(body_vars, body_captures));
  add_graph_outputs(g, joined({loop_condition(inner, cond, next, cond_captures)}, next), types, c.writer());
}

}  // namespace

BATON_ONNX_EXPORTER("if", export_if);
BATON_ONNX_EXPORTER("loop", export_loop);

}  // namespace baton::onnx::detail
