#include "passes/report.h"

namespace baton::passes {

std::string where(const graph::Node& n) {
  return n.loc.known() ? str(" (", n.loc.file, ":", n.loc.line, ")") : "";
}

Describer::Describer(const graph::Graph& g) {
  graph::ValueNames names(g);
  for (const graph::Value* v : g.inputs()) names_.emplace(v, names(v));
  for (const auto& n : g.nodes())
    for (const graph::Value* v : n->outputs()) names_.emplace(v, names(v));
}

std::string Describer::value(const graph::Value* v) const {
  if (auto it = names_.find(v); it != names_.end()) return it->second;
  return v->name().empty() ? str("a new ", v->type, " input") : "%" + v->name();
}

std::string Describer::node(const graph::Node& n) const {
  std::string s;
  for (size_t i = 0; i < n.num_outputs(); ++i) s += str(i ? ", " : "", value(n.output(i)));
  s += str(n.num_outputs() ? " = " : "", n.op_name(), "(");
  for (size_t i = 0; i < n.num_inputs(); ++i) s += str(i ? ", " : "", value(n.input(i)));
  return s + ")" + where(n);
}

void Describer::forget(const graph::Node& n) {
  for (const graph::Value* v : n.outputs()) names_.erase(v);
}

NodeFailure::NodeFailure(const Error& cause, const graph::Node& node)
    : Error(cause.what()), node_(str("'", node.op_name(), "'")), cause_(cause.what()) {
  if (node.loc.known()) node_ += str(" built at ", node.loc.file, ":", node.loc.line);
}

}  // namespace baton::passes
