// baton Graph -> ONNX. Each node goes to the exporter registered for its op (by baton op
// name), which appends standard ONNX nodes (opset kExportOpset) to the model being built.
// Ops whose OpDef names an ONNX op and that carry no attributes (relu -> Relu, add ->
// Add) need no exporter. A node nobody can export is a GraphError naming it. Control flow
// (export_control.cpp) writes its subgraphs through the same GraphWriter; symbolic dims an
// exporter needs as values become shape arithmetic (ExportContext::dims, export_dims.cpp).
//
//   BATON_ONNX_EXPORTER("softmax", [](ExportContext& c) {
//     c.add("Softmax", {c.input(0)}, {c.output(0)}).attr("axis", c.attrs().i("dim"));
//   });
#pragma once
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "graph/ir.h"
#include "io/onnx/proto.h"

namespace baton::onnx::detail {

// ONNX value names, as node inputs and outputs take them.
using Names = std::vector<std::string>;

inline constexpr int64_t kExportOpset = 17;
// The domain of baton's own ops (fused steps) in optimized exports; the importer reads it.
inline constexpr const char* kBatonDomain = "ai.baton";
inline constexpr const char* kMlDomain = "ai.onnx.ml";  // ONNX's classical machine-learning ops
// There an int attribute holding a symbolic dim is a STRING ("784*batch", the dim_param
// text), an ints attribute holding one a STRINGS attribute, every entry as text.

// A node being added: chains attribute setters.
class OnnxNode {
 public:
  explicit OnnxNode(::onnx::NodeProto* n) : n_(n) {}
  OnnxNode& attr(const std::string& name, int64_t v);
  OnnxNode& attr(const std::string& name, double v);
  OnnxNode& attr(const std::string& name, const std::vector<int64_t>& v);
  OnnxNode& attr(const std::string& name, const std::vector<float>& v);
  OnnxNode& attr(const std::string& name, const std::string& v);
  OnnxNode& attr(const std::string& name, const std::vector<std::string>& v);
  OnnxNode& attr(const std::string& name, const Tensor& v);
  // A graph attribute (If's branches, Loop's body), empty, for the caller to fill.
  ::onnx::GraphProto& graph_attr(const std::string& name);
  ::onnx::NodeProto* proto() const { return n_; }

 private:
  ::onnx::NodeProto* n_;
};

class GraphWriter;

class ExportContext {
 public:
  ExportContext(const graph::Node& node, ::onnx::GraphProto& graph, const std::vector<std::string>& input_names,
                const std::vector<std::string>& output_names, GraphWriter& writer)
      : node(node), graph_(graph), inputs_(input_names), outputs_(output_names), writer_(writer) {}

  const graph::Node& node;
  const ops::Attrs& attrs() const { return node.attrs; }
  size_t num_inputs() const { return inputs_.size(); }
  const std::string& input(size_t i) const { return inputs_.at(i); }
  // Input i's value when it is an initializer of the model (a constant), else nullptr.
  const Tensor* constant_input(size_t i) const;
  const std::string& output(size_t i = 0) const { return outputs_.at(i); }
  const graph::TensorType& input_type(size_t i) const { return node.input(i)->type; }
  const graph::TensorType& output_type(size_t i = 0) const { return node.output(i)->type; }
  bool output_used(size_t i) const;

  // Appends an ONNX node.
  OnnxNode add(const std::string& op_type, const std::vector<std::string>& inputs,
               const std::vector<std::string>& outputs);
  // A name for an intermediate value no other value has.
  std::string fresh(const std::string& hint);
  // An initializer holding t (or these integers, as a 1-D int64 tensor); returns its name.
  std::string constant(const Tensor& t, const std::string& hint = "c");
  std::string ints(const std::vector<int64_t>& values, const std::string& hint = "c");
  // A static shape's sizes; fails when a dim is symbolic.
  std::vector<int64_t> static_dims(const graph::SymShape& shape, const char* what) const;
  [[noreturn]] void fail(const std::string& message) const;

  // Dims that may be symbolic, as a 1-D int64 tensor: an initializer when all are sizes,
  // else computed from the graph inputs' shapes (Shape -> Gather -> Mul/Div -> Concat;
  // export_dims.cpp). Fails when a symbol is no graph input's dim.
  std::string dims(const std::vector<int64_t>& values, const std::string& hint = "dims");
  std::string dim(int64_t d);  // one dim, as a 1-element tensor
  // This node's context writing into another graph (a subgraph being built).
  ExportContext in(::onnx::GraphProto& graph) const { return {node, graph, inputs_, outputs_, writer_}; }
  // Writes the nodes of subgraph g into this context's graph, its input i read as
  // `inputs[i]`; returns the names of g's outputs.
  std::vector<std::string> write_subgraph(const graph::Graph& g, const std::vector<std::string>& inputs);
  GraphWriter& writer() const { return writer_; }

 private:
  ::onnx::GraphProto& graph_;
  const std::vector<std::string>& inputs_;
  const std::vector<std::string>& outputs_;
  GraphWriter& writer_;
};

// Writes IR graphs node by node into GraphProtos: the main graph, and through the
// control-flow exporters (export_control.cpp) the subgraphs of If and Loop. Names are
// unique across the whole model, as ONNX wants of nested graphs.
class GraphWriter {
 public:
  explicit GraphWriter(bool baton_ops) : baton_ops_(baton_ops) {}
  bool baton_ops() const { return baton_ops_; }  // whether ops may go to the ai.baton domain
  // Appends g's nodes to `out`. `names` holds the ONNX name of each value of g that no
  // node of g makes (inputs) and receives those of the values its nodes make, each
  // `prefix` + its name in g.
  void write_nodes(const graph::Graph& g, ::onnx::GraphProto& out,
                   std::unordered_map<const graph::Value*, std::string>& names, const std::string& prefix);
  // A graph input whose dims give the sizes of the symbols in them (ExportContext::dims).
  void add_shape_source(const std::string& name, const Shape& dims) { shape_sources_.emplace_back(name, dims); }
  const std::vector<std::pair<std::string, Shape>>& shape_sources() const { return shape_sources_; }
  // The initializers' values by name (ExportContext::constant_input).
  void add_constant(const std::string& name, const Tensor& t) { constants_.emplace(name, &t); }
  const Tensor* constant(const std::string& name) const {
    auto it = constants_.find(name);
    return it == constants_.end() ? nullptr : it->second;
  }
  // Symbolic dims already computed in a graph, by dim (export_dims.cpp).
  std::map<int64_t, std::string>& dims_in(const ::onnx::GraphProto& g) { return dim_names_[&g]; }
  int next_id() { return counter_++; }

 private:
  bool baton_ops_;
  int counter_ = 0;
  std::vector<std::pair<std::string, Shape>> shape_sources_;
  std::map<std::string, const Tensor*> constants_;
  std::map<const ::onnx::GraphProto*, std::map<int64_t, std::string>> dim_names_;
};

// Declares `names` the outputs of graph `g` with these types; a name no node of g makes
// (an input, an outer value) or one listed twice is passed through an Identity first.
void add_graph_outputs(::onnx::GraphProto& g, const std::vector<std::string>& names,
                       const std::vector<graph::TensorType>& types, GraphWriter& writer);
// The type of a graph input or output: dtype and dims (a symbol as a dim_param).
void set_value_type(::onnx::ValueInfoProto& info, const graph::TensorType& type);

// For exporters whose standard form cannot express a case (sizes that are symbols): in an
// optimized save, writes the node in the ai.baton domain and returns true; else false.
bool export_in_baton_domain(ExportContext& c);

using ExportFn = std::function<void(ExportContext&)>;
void register_exporter(std::string op_name, ExportFn fn);
const ExportFn* find_exporter(std::string_view op_name);

#define BATON_ONNX_EXPORT_CONCAT_(a, b) a##b
#define BATON_ONNX_EXPORT_CONCAT(a, b) BATON_ONNX_EXPORT_CONCAT_(a, b)
#define BATON_ONNX_EXPORTER(op_name, ...)                                  \
  static const bool BATON_ONNX_EXPORT_CONCAT(onnx_exporter_, __LINE__) = \
      (register_exporter(op_name, __VA_ARGS__), true)

}  // namespace baton::onnx::detail
