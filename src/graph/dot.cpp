// Graphviz export: `baton` users view a graph with `dot -Tsvg graph.dot > graph.svg`.
#include <unordered_map>

#include "graph/text.h"

namespace baton::graph {
namespace {

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') { out += "\\n"; continue; }
    out += c;
  }
  return out;
}

class DotWriter {
 public:
  std::string write(const Graph& g) {
    out_ = str("digraph \"", escape(g.name()), "\" {\n  compound=true;\n",
               "  node [fontname=\"monospace\", fontsize=10];\n",
               "  edge [fontname=\"monospace\", fontsize=9];\n");
    graph(g, "  ");
    return out_ + "}\n";
  }

 private:
  // Writes g's elements with ids "g<k>_..."; returns the id of its first element.
  std::string graph(const Graph& g, const std::string& indent) {
    std::string prefix = str("g", graphs_++, "_");
    ValueNames names(g);
    std::unordered_map<const Value*, std::string> source;  // value -> DOT node that makes it
    std::string first;
    auto emit = [&](const std::string& id, const std::string& attrs, const std::string& extra_indent = "") {
      out_ += str(indent, extra_indent, id, " [", attrs, "];\n");
      if (first.empty()) first = id;
    };
    for (size_t i = 0; i < g.input_values().size(); ++i) {
      const Value* v = g.input(i);
      std::string id = str(prefix, "in", i);
      emit(id, str("shape=ellipse, style=filled, fillcolor=\"#dbeafe\", label=\"",
                   escape(str(names(v), "\n", v->type)), "\""));
      source[v] = id;
    }
    for (size_t k = 0; k < g.num_nodes(); ++k) {
      const Node& n = *g.nodes()[k];
      std::string id = str(prefix, "n", k);
      if (n.fused_from.empty()) {
        emit(id, node_attrs(n, names));
      } else {  // one kernel for several ops: a group labelled with them
        out_ += str(indent, "subgraph cluster_", clusters_++, " {\n", indent, "  label=\"fused: ",
                    escape(n.fused_from), "\";\n", indent, "  style=\"rounded,filled\"; fillcolor=\"#fef3c7\";\n");
        emit(id, node_attrs(n, names), "  ");
        out_ += indent + "}\n";
      }
      for (size_t i = 0; i < n.num_outputs(); ++i) source[n.output(i)] = id;
      for (size_t i = 0; i < n.num_inputs(); ++i) edge(source, n.input(i), id, indent);
      for (size_t s = 0; s < n.subgraphs.size(); ++s) subgraph(n, s, id, indent);
    }
    for (size_t i = 0; i < g.outputs().size(); ++i) {
      std::string id = str(prefix, "out", i);
      emit(id, str("shape=doubleoctagon, style=filled, fillcolor=\"#dcfce7\", label=\"return ", i, "\""));
      edge(source, g.outputs()[i], id, indent);
    }
    return first;
  }

  static std::string node_attrs(const Node& n, const ValueNames& names) {
    std::string label = n.op_name();
    for (size_t i = 0; i < n.num_outputs(); ++i)
      label += str("\n", names(n.output(i)), ": ", n.output(i)->type);
    std::string attrs = str("shape=box, label=\"", escape(label), "\"");
    if (n.loc.known()) attrs += str(", tooltip=\"", escape(str(n.loc.file, ":", n.loc.line)), "\"");
    if (!n.op()) attrs += ", color=red";
    return attrs;
  }

  void edge(const std::unordered_map<const Value*, std::string>& source, const Value* v,
            const std::string& to, const std::string& indent) {
    auto it = v ? source.find(v) : source.end();
    if (it == source.end()) return;  // not defined here (an invalid graph): no edge
    std::string label = str(v->type);
    if (v->producer() && v->producer()->num_outputs() > 1) label = str(v->output_index(), ": ", label);
    out_ += str(indent, it->second, " -> ", to, " [label=\"", escape(label), "\"];\n");
  }

  void subgraph(const Node& n, size_t s, const std::string& owner, const std::string& indent) {
    if (!n.subgraphs[s]) return;
    std::string cluster = str("cluster_", clusters_++);
    out_ += str(indent, "subgraph ", cluster, " {\n", indent, "  label=\"@",
                escape(n.subgraphs[s]->name()), "\";\n", indent, "  style=dashed;\n");
    std::string first = graph(*n.subgraphs[s], indent + "  ");
    out_ += indent + "}\n";
    if (!first.empty())
      out_ += str(indent, owner, " -> ", first, " [style=dashed, arrowhead=odot, lhead=", cluster,
                  ", label=\"subgraph ", s, "\"];\n");
  }

  std::string out_;
  int graphs_ = 0, clusters_ = 0;
};

}  // namespace

std::string to_dot(const Graph& g) { return DotWriter().write(g); }

}  // namespace baton::graph
