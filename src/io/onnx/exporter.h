// baton Graph -> ONNX. Each node goes to the exporter registered for its op (by baton op
// name), which appends standard ONNX nodes (opset kExportOpset) to the model being built.
// Ops whose OpDef names an ONNX op and that carry no attributes (relu -> Relu, add ->
// Add) need no exporter. A node nobody can export is a GraphError naming it.
//
//   BATON_ONNX_EXPORTER("softmax", [](ExportContext& c) {
//     c.add("Softmax", {c.input(0)}, {c.output(0)}).attr("axis", c.attrs().i("dim"));
//   });
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "graph/ir.h"
#include "io/onnx/proto.h"

namespace baton::onnx::detail {

inline constexpr int64_t kExportOpset = 17;
// The domain of baton's own ops (fused steps) in optimized exports; the importer reads it.
inline constexpr const char* kBatonDomain = "ai.baton";

// A node being added: chains attribute setters.
class OnnxNode {
 public:
  explicit OnnxNode(::onnx::NodeProto* n) : n_(n) {}
  OnnxNode& attr(const std::string& name, int64_t v);
  OnnxNode& attr(const std::string& name, double v);
  OnnxNode& attr(const std::string& name, const std::vector<int64_t>& v);
  OnnxNode& attr(const std::string& name, const std::string& v);
  OnnxNode& attr(const std::string& name, const Tensor& v);
  ::onnx::NodeProto* proto() const { return n_; }

 private:
  ::onnx::NodeProto* n_;
};

class ExportContext {
 public:
  ExportContext(const graph::Node& node, ::onnx::GraphProto& graph, const std::vector<std::string>& input_names,
                const std::vector<std::string>& output_names, int& counter)
      : node(node), graph_(graph), inputs_(input_names), outputs_(output_names), counter_(counter) {}

  const graph::Node& node;
  const ops::Attrs& attrs() const { return node.attrs; }
  size_t num_inputs() const { return inputs_.size(); }
  const std::string& input(size_t i) const { return inputs_.at(i); }
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

 private:
  ::onnx::GraphProto& graph_;
  const std::vector<std::string>& inputs_;
  const std::vector<std::string>& outputs_;
  int& counter_;
};

using ExportFn = std::function<void(ExportContext&)>;
void register_exporter(std::string op_name, ExportFn fn);
const ExportFn* find_exporter(std::string_view op_name);

#define BATON_ONNX_EXPORT_CONCAT_(a, b) a##b
#define BATON_ONNX_EXPORT_CONCAT(a, b) BATON_ONNX_EXPORT_CONCAT_(a, b)
#define BATON_ONNX_EXPORTER(op_name, ...)                                  \
  static const bool BATON_ONNX_EXPORT_CONCAT(onnx_exporter_, __LINE__) = \
      (register_exporter(op_name, __VA_ARGS__), true)

}  // namespace baton::onnx::detail
