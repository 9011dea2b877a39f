// The public Graph of static mode: placeholders, variables, printing.
#include <ostream>

#include "baton/graph.h"
#include "graph/text.h"
#include "trace/builder.h"
#include "trace/verify.h"

namespace baton {

SymDim::SymDim(const char* symbol) : raw_(sym::named(symbol)) {}

Graph::Graph(std::string name) : b_(std::make_shared<trace::Builder>(std::move(name))) {}

static void check_unique_name(const trace::Builder& b, const std::string& name, const char* what,
                              SourceLoc loc) {
  if (!name.empty() && b.has_input_named(name))
    throw GraphError(what, str("the graph already has an input named '", name, "'"), loc);
}

Tensor Graph::placeholder(DType dtype, const std::vector<SymDim>& dims, std::string name, SourceLoc loc) {
  check_unique_name(*b_, name, "placeholder", loc);
  Shape shape;
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = dims[i].raw();
    if (d == -1) d = sym::named(str(name.empty() ? "d" : name, "_", i));  // any size: a new symbol
    else if (!sym::is_valid_dim(d))
      throw ValueError("placeholder", str("dim ", i, " is ", d, "; use a size, -1 or a symbol name"), loc);
    shape.push_back(d);
  }
  return b_->placeholder(dtype, shape, std::move(name));
}

Tensor Graph::variable(const Tensor& init, std::string name, SourceLoc loc) {
  check_unique_name(*b_, name, "variable", loc);
  return b_->variable(init, std::move(name));
}

Tensor Graph::value_of(const Tensor& variable) const {
  if (trace::builder_of(variable) == b_.get()) {
    const graph::Value* v = variable.impl()->symbolic->value;
    if (!v->producer() && b_->kind(v) == trace::InputKind::Variable) return b_->binding(v).tensor;
  }
  throw GraphError("Graph.value_of", "the tensor is not a variable of this graph", SourceLoc::current());
}

Graph Graph::from_text(std::string_view text) {
  graph::Graph ir = graph::parse_graph(text);
  trace::verify(ir);
  return GraphAccess::wrap(std::make_shared<trace::Builder>(std::move(ir)));
}

std::vector<Tensor> Graph::inputs() const {
  std::vector<Tensor> out;
  for (graph::Value* v : b_->ir().inputs()) out.push_back(b_->wrap(v, v->shape().raw()));
  return out;
}

std::vector<Tensor> Graph::outputs() const {
  std::vector<Tensor> out;
  for (graph::Value* v : b_->ir().outputs()) out.push_back(b_->wrap(v, v->shape().raw()));
  return out;
}

void Graph::name_inputs(const std::vector<std::pair<std::string, Tensor>>& named, const std::string& prefix) {
  for (auto& [short_name, tensor] : named) {
    const std::string name = prefix + short_name;
    if (!graph::is_value_name(name) || b_->has_input_named(name)) continue;
    for (graph::Value* v : b_->ir().inputs())
      if (const Tensor& bound = b_->binding(v).tensor; bound.defined() && bound.same(tensor)) v->set_name(name);
  }
}

void Graph::set_outputs(const std::vector<Tensor>& outputs, SourceLoc loc) {
  std::vector<graph::Value*> values;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].defined() || trace::builder_of(outputs[i]) != b_.get())
      throw GraphError("Graph.set_outputs", str("output ", i, " is not a tensor of this graph"), loc);
    values.push_back(outputs[i].impl()->symbolic->value);
  }
  b_->ir().set_outputs(std::move(values));
}

size_t Graph::num_nodes() const { return b_->ir().num_nodes(); }
std::string Graph::to_text() const { return graph::to_text(b_->ir()); }
std::string Graph::to_dot() const { return graph::to_dot(b_->ir()); }
std::ostream& operator<<(std::ostream& os, const Graph& g) { return os << g.to_text(); }

Tensor assign(const Tensor& target, const Tensor& value, SourceLoc loc) {
  // Values a node computes are immutable; graph inputs (variables, placeholders, bound
  // tensors) are storage that can be written.
  if (target.is_symbolic() && target.impl()->symbolic->value->producer())
    throw GraphError("assign", str("the target (", target.dtype(), target.shape(),
                                   ") is computed by the graph; only variables and inputs hold "
                                   "state that can be written"), loc);
  static const ops::OpDef& assign_op = *ops::find_op("assign");
  return ops::call(assign_op, {target, value}, {}, loc);
}

}  // namespace baton
