// The text form of a graph (grammar in docs/graph-ir.md) and its Graphviz export.
//
//   graph @mlp(%x: f32[batch,784], %w: f32[784,512]) {
//     %0 = matmul(%x, %w) : f32[batch,512]   # mlp.cpp:12
//     %1 = relu(%0) : f32[batch,512]         # mlp.cpp:13
//     return %1
//   }
//
// parse_graph(to_text(g)) rebuilds g: same ops, attributes, types, names, locations and
// subgraphs, so to_text of the result is the same text.
#pragma once
#include <iosfwd>
#include <string>
#include <string_view>

#include "graph/ir.h"

namespace baton::graph {

std::string to_text(const Graph& g);
std::ostream& operator<<(std::ostream& os, const Graph& g);

// Throws ValueError "graph text line:column: expected ..., found ..." on a syntax error.
// The result is not verified (call verify()); ops missing from the registry are kept.
Graph parse_graph(std::string_view text);

// While alive, subnormal doubles are exact: the runtime turns on flush-to-zero and
// denormals-are-zero for speed, which would print 5e-324 as 0 and parse it as 0.
class ExactFloatScope {
 public:
  ExactFloatScope();
  ~ExactFloatScope();
  ExactFloatScope(const ExactFloatScope&) = delete;
  ExactFloatScope& operator=(const ExactFloatScope&) = delete;

 private:
  unsigned saved_ = 0;
};

// One attribute value as the text form writes it: 3, 0.5, [1,2], "mean", f32.
std::string format_attr_value(const ops::AttrValue& v);

// A Graphviz digraph: inputs as ellipses, nodes as boxes (op and result types), outputs
// as double octagons, edges labelled with the tensor type; subgraphs as clusters.
std::string to_dot(const Graph& g);

}  // namespace baton::graph
