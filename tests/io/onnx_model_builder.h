// Hand-built ONNX models for the tests: a graph (or a subgraph of If / Loop) gets inputs,
// initializers, nodes and outputs by name, then loads through baton::onnx::load_bytes.
#pragma once
#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

#include "baton/onnx.h"

namespace baton::onnx_testing {

// Adds to one graph: the model's, or a subgraph held by a node's attribute.
struct GraphBuilder {
  ::onnx::GraphProto* g;

  explicit GraphBuilder(::onnx::GraphProto* graph) : g(graph) {}
  // dims: >= 0 sizes, -1 unknown; `param` names dim 0 when given.
  void input(const std::string& name, int elem, std::vector<int64_t> dims, const std::string& param = "") {
    auto* shape = g->add_input()->mutable_type()->mutable_tensor_type();
    g->mutable_input(g->input_size() - 1)->set_name(name);
    shape->set_elem_type(elem);
    shape->mutable_shape();  // a scalar has a shape with no dims
    for (size_t i = 0; i < dims.size(); ++i) {
      auto* d = shape->mutable_shape()->add_dim();
      if (i == 0 && !param.empty()) d->set_dim_param(param);
      else if (dims[i] >= 0) d->set_dim_value(dims[i]);
    }
  }
  // An input of sequence type (or, with `optional`, of an optional of that) whose items
  // are tensors of `elem` with `rank` unknown dims.
  void sequence_input(const std::string& name, int elem, int rank, bool optional = false) {
    auto* in = g->add_input();
    in->set_name(name);
    ::onnx::TypeProto* type = in->mutable_type();
    if (optional) type = type->mutable_optional_type()->mutable_elem_type();
    auto* tensor = type->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type();
    tensor->set_elem_type(elem);
    for (int i = 0; i < rank; ++i) tensor->mutable_shape()->add_dim();
  }
  // An input of an optional tensor type.
  void optional_input(const std::string& name, int elem, std::vector<int64_t> dims) {
    auto* in = g->add_input();
    in->set_name(name);
    auto* tensor = in->mutable_type()->mutable_optional_type()->mutable_elem_type()->mutable_tensor_type();
    tensor->set_elem_type(elem);
    for (int64_t d : dims) tensor->mutable_shape()->add_dim()->set_dim_value(d);
  }
  void output(const std::string& name) { g->add_output()->set_name(name); }
  ::onnx::NodeProto* node(const std::string& op, std::vector<std::string> in, std::vector<std::string> out) {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(op + std::to_string(g->node_size()));
    for (auto& i : in) n->add_input(i);
    for (auto& o : out) n->add_output(o);
    return n;
  }
  void floats(const std::string& name, std::vector<int64_t> dims, std::vector<float> values) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(::onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    for (float v : values) t->add_float_data(v);
  }
  // A 1-D int64 initializer; `scalar` makes it 0-D (one value).
  void ints(const std::string& name, std::vector<int64_t> values, bool scalar = false) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(::onnx::TensorProto::INT64);
    if (!scalar) t->add_dims(int64_t(values.size()));
    for (int64_t v : values) t->add_int64_data(v);
  }
  // A 0-D bool initializer.
  void boolean(const std::string& name, bool value) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(::onnx::TensorProto::BOOL);
    t->add_int32_data(value ? 1 : 0);
  }
};

struct ModelHolder {
  ::onnx::ModelProto m;
};

// A model with one graph; opset 17 unless given.
struct ModelBuilder : ModelHolder, GraphBuilder {
  explicit ModelBuilder(int64_t opset = 17) : GraphBuilder(m.mutable_graph()) {
    m.set_ir_version(8);
    auto* o = m.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    g->set_name("test");
  }
  ModelBuilder(const ModelBuilder& other) : ModelHolder(other), GraphBuilder(m.mutable_graph()) {}
  ModelBuilder& operator=(const ModelBuilder& other) {
    m = other.m;
    g = m.mutable_graph();
    return *this;
  }
  std::string bytes() const { return m.SerializeAsString(); }
  onnx::Model load() const { return onnx::load_bytes(bytes(), "test.onnx"); }
};

inline void add_int_attr(::onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::INT);
  a->set_i(v);
}

inline void add_string_attr(::onnx::NodeProto* n, const std::string& name, const std::string& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::STRING);
  a->set_s(v);
}

inline void add_float_attr(::onnx::NodeProto* n, const std::string& name, float v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::FLOAT);
  a->set_f(v);
}

inline void add_floats_attr(::onnx::NodeProto* n, const std::string& name, const std::vector<float>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::FLOATS);
  for (float x : v) a->add_floats(x);
}

inline void add_strings_attr(::onnx::NodeProto* n, const std::string& name, const std::vector<std::string>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::STRINGS);
  for (const auto& x : v) a->add_strings(x);
}

// A graph attribute of n (If's branches, Loop's body), named `name`, to fill in.
inline GraphBuilder add_graph_attr(::onnx::NodeProto* n, const std::string& name) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::GRAPH);
  a->mutable_g()->set_name(name);
  return GraphBuilder(a->mutable_g());
}

}  // namespace baton::onnx_testing
