// ONNX graph -> baton Graph. The importer walks the nodes in order (ONNX keeps them
// topologically sorted) and hands each to the importer registered for its op type, which
// calls baton's public ops on the node's inputs: symbolic tensors append graph nodes with
// shapes inferred at once, and nodes whose inputs are all known constants (initializers,
// Constant nodes, shapes of static tensors) run eagerly, so shape arithmetic folds while
// the model loads. Every error names the node.
//
//   BATON_ONNX_IMPORTER("Softsign", [](NodeContext& c) -> Outputs {
//     const Tensor& x = c.input(0);
//     return {x / (abs(x) + 1.0)};
//   });
#pragma once
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "baton/onnx.h"
#include "io/onnx/proto.h"

namespace baton::trace {
class Builder;
}

namespace baton::onnx::detail {

class Importer;

// An importer returns the node's outputs in order (it may return fewer than the node
// names only when the missing ones are optional outputs nobody reads).
using Outputs = std::vector<Tensor>;

// A value of a non-tensor ONNX type while importing: a sequence, whose items are known in
// number while the model loads (the sequence ops unroll over them), or an empty optional.
struct Composite {
  bool none = false;
  std::vector<Tensor> items;
};

// What an op importer sees of one node.
class NodeContext {
 public:
  NodeContext(const ::onnx::NodeProto& node, int64_t opset, std::vector<Tensor> inputs, Importer& importer)
      : node(node), opset(opset), importer(importer), inputs_(std::move(inputs)) {}

  const ::onnx::NodeProto& node;
  const int64_t opset;  // of the default domain
  Importer& importer;

  size_t num_inputs() const { return inputs_.size(); }
  // False for an optional input the node leaves out (an empty name, or past the end).
  bool has_input(size_t i) const { return i < inputs_.size() && inputs_[i].defined(); }
  const Tensor& input(size_t i) const;  // fails when absent
  // The ONNX element type of input i as a baton dtype: a storage dtype (u8, f16...) where
  // the model holds one, though input(i) holds its values in the compute dtype
  // (docs/onnx.md, "Element types").
  DType onnx_dtype(size_t i) const;
  const std::vector<Tensor>& inputs() const { return inputs_; }
  // An input that must be known when the model loads (a shape, axes, pads, scales): a
  // concrete tensor. One computed from model inputs makes the model import again per value
  // of those (NeedsInputValues); any other computed one fails.
  const Tensor& known_input(size_t i) const;
  std::vector<int64_t> ints_input(size_t i) const;  // a known list of integers
  // Whether input i is a tensor of the main graph computed from the model inputs' values
  // (not only their shapes): an importer that can read it when the model runs, rather than
  // while it loads (a Reshape onto reshape_to), checks this before it asks for known values.
  bool computed_from_input_values(size_t i) const;
  // The same for a 1-D list (axes) whose length is known while loading and not 0, so that
  // an op reading it when the model runs knows its output's rank.
  bool list_computed_from_input_values(size_t i) const;
  double scalar_input(size_t i) const;  // a known one-element input, as a double
  // Size d of x, which must be static; `what` says why in the message.
  int64_t static_dim(const Tensor& x, int64_t d, const std::string& what) const;
  // Input i when it is a sequence or an empty optional (nullptr for a tensor or an absent
  // input); sequence_input(i) fails unless it is a sequence.
  const Composite* composite_input(size_t i) const;
  const std::vector<Tensor>& sequence_input(size_t i) const;
  // Makes output i a sequence or an empty optional; the importer returns an undefined
  // tensor in its place.
  void set_composite_output(size_t i, Composite value);
  const std::optional<Composite>& composite_output(size_t i) const;
  // Input i of any kind (an absent one is none), and outputs of any kind: the tensors to
  // return, with the sequences and empty optionals set aside as composite outputs.
  Value value_input(size_t i) const;
  Outputs outputs_of(const std::vector<Value>& values);
  size_t num_outputs() const { return size_t(node.output_size()); }
  bool wants_output(size_t i) const { return i < num_outputs() && !node.output(int(i)).empty(); }

  bool has_attr(std::string_view name) const { return find_attr(name) != nullptr; }
  int64_t attr_int(std::string_view name, int64_t fallback) const;
  int64_t attr_int(std::string_view name) const;  // required
  double attr_float(std::string_view name, double fallback) const;
  std::string attr_string(std::string_view name, std::string fallback) const;
  std::vector<int64_t> attr_ints(std::string_view name, std::vector<int64_t> fallback = {}) const;
  std::vector<double> attr_floats(std::string_view name) const;
  std::vector<std::string> attr_strings(std::string_view name) const;  // absent: none
  Tensor attr_tensor(std::string_view name) const;  // required
  const ::onnx::GraphProto& attr_graph(std::string_view name) const;  // required

  // Throw GraphError "<node>: message" for a node baton cannot import.
  [[noreturn]] void fail(const std::string& message) const;
  // "node 12 'conv1' (Conv)": how messages name this node.
  std::string describe() const;

 private:
  const ::onnx::AttributeProto* find_attr(std::string_view name) const;
  const ::onnx::AttributeProto& attr(std::string_view name, ::onnx::AttributeProto::AttributeType type) const;
  std::vector<Tensor> inputs_;
  std::vector<std::optional<Composite>> composite_outputs_;
};

using ImportFn = std::function<Outputs(NodeContext&)>;
void register_importer(std::string op_type, ImportFn fn);
const ImportFn* find_importer(std::string_view op_type);
std::vector<std::string> importer_names();

#define BATON_ONNX_CONCAT_(a, b) a##b
#define BATON_ONNX_CONCAT(a, b) BATON_ONNX_CONCAT_(a, b)
// Registers an importer (a function or a lambda) when the library loads.
#define BATON_ONNX_IMPORTER(op_type, ...) \
  static const bool BATON_ONNX_CONCAT(onnx_importer_, __LINE__) = (register_importer(op_type, __VA_ARGS__), true)

// The axis attribute `name` (or `fallback`) normalized against `rank`; fails when out of range.
int64_t axis_attr(const NodeContext& c, std::string_view name, int64_t fallback, int64_t rank);
int64_t normalize_axis(const NodeContext& c, int64_t axis, int64_t rank);

// A per-channel vector [C] shaped to broadcast over [N, C, spatial...] of this rank.
Tensor per_channel(const Tensor& v, int64_t rank);
// x's shape as a matrix cut before `axis`: [prod(dims before), prod(dims from axis on)]
// (ONNX's Flatten, and the 2-D form of Softmax before opset 13).
Shape flattened_at(const Shape& x, int64_t axis);

// Thrown while importing when a node needs, at load time, the values of model inputs (a
// Reshape whose shape is an input): the model is then imported again for each set of
// values those inputs take at run time (onnx.md, "Inputs that shape the graph").
struct NeedsInputValues {
  std::vector<std::string> inputs;  // ONNX names
};

class Importer {
 public:
  // `shapes`: LoadOptions::input_shapes.
  Importer(std::string model_name, int64_t opset, SourceLoc loc,
           const std::vector<std::pair<std::string, std::vector<SymDim>>>& shapes = {})
      : model_name_(std::move(model_name)), opset_(opset), loc_(loc), shapes_(shapes) {}

  // Imports the main graph into g: its inputs (those without an initializer) become
  // placeholders, reported in `inputs`; returns the graph's outputs.
  // Inputs named in `bound` are bound to those (concrete) values instead; their
  // placeholder entries are left undefined.
  // Sequence and optional inputs must be bound (NeedsInputValues names them otherwise).
  std::vector<Value> import_main(const ::onnx::GraphProto& graph, Graph& g, std::vector<ValueInfo>& inputs,
                                 std::vector<Tensor>& placeholders,
                                 const std::unordered_map<std::string, Value>& bound = {});
  // For a symbolic tensor a node needs as a constant: throws NeedsInputValues when it is
  // computed from model inputs of the main graph (returns otherwise).
  void check_needs_input_values(const Tensor& t) const;
  // The model inputs (ONNX names) of the main graph a symbolic tensor is computed from.
  std::set<std::string> model_inputs_behind(const Tensor& t) const;
  // While a branch or loop body imports: ops that read values when they run are not used
  // there (a subgraph's plan runs inside its control-flow step).
  bool in_subgraph() const { return scopes_.size() > 1; }
  // Imports a subgraph (a branch of If, the body of Loop) inside the trace of its
  // control-flow op: its inputs bind to `args`, names of enclosing graphs stay visible.
  std::vector<Tensor> import_subgraph(const ::onnx::GraphProto& graph, const std::vector<Tensor>& args);
  // The same with values of any kind (a loop-carried sequence, a branch returning one).
  std::vector<Value> import_subgraph_values(const ::onnx::GraphProto& graph, const std::vector<Value>& args);

  // The sequence or empty optional bound to an ONNX name (nullptr for tensors).
  const Composite* composite(const std::string& name) const;
  // The storage dtype (u8, f16...) of a value computed in a wider dtype, by ONNX name.
  std::optional<DType> storage_type(const std::string& name) const;

  const std::string& model_name() const { return model_name_; }
  SourceLoc loc() const { return loc_; }

  // Values known while loading of an integer tensor computed when the model runs: the
  // sizes, symbolic ones included, that Shape of a tensor with symbolic dims gives and
  // that Gather, Concat, Mul... pass on (import_dims.cpp). Readers of integer inputs
  // (NodeContext::ints_input) use them, so exported shape arithmetic keeps `batch` symbolic.
  void note_known_dims(const Tensor& t, std::vector<int64_t> values);
  const std::vector<int64_t>* known_dims(const Tensor& t) const;
  // The dim a dim_param names: its symbol, or the size LoadOptions::input_shapes gave it.
  int64_t dim_named(const std::string& dim_param) const;
  // The dim an input's dim_param declares: a product as baton writes one ("2*batch",
  // "h*w": a number times symbols) is that product of dim_named symbols; other text, one
  // symbol of that name.
  int64_t declared_dim(const std::string& dim_param) const;

 private:
  void import_initializers(const ::onnx::GraphProto& graph);
  void import_nodes(const ::onnx::GraphProto& graph);
  Tensor graph_output(const std::string& name, const std::string& graph_name) const;
  void bind_composite(const std::string& name, Composite value, const std::string& what);
  void describe_input(const ::onnx::ValueInfoProto& in, ValueInfo& info, std::vector<SymDim>& dims);
  // Binds an ONNX name to a value; a tensor of a storage dtype is bound widened to its
  // compute dtype, and its storage dtype remembered.
  void bind(const std::string& name, const Tensor& t, const std::string& what,
            std::optional<DType> storage = std::nullopt);
  std::pair<Tensor, std::optional<DType>> output_value(const NodeContext& c, size_t i, Tensor t) const;
  void declare_types(const ::onnx::GraphProto& graph);
  const Tensor* lookup(const std::string& name) const;
  // The graph of a symbolic dim node c reads (known_dims), when no trace is active.
  trace::Builder* graph_of_symbolic_dims(const NodeContext& c) const;

  static constexpr int kMaxImportedNodes = 1 << 20;
  std::string model_name_;
  int64_t opset_;
  SourceLoc loc_;
  const std::vector<std::pair<std::string, std::vector<SymDim>>>& shapes_;
  // What a graph's names are bound to: tensors, and sequences or empty optionals.
  struct Scope {
    std::unordered_map<std::string, Tensor> tensors;
    std::unordered_map<std::string, Composite> composites;
  };
  std::vector<Scope> scopes_;  // innermost last
  std::unordered_map<const void*, std::string> placeholder_names_;  // graph::Value* -> ONNX input
  std::unordered_map<std::string, DType> storage_types_;  // values computed in a wider dtype
  std::unordered_map<std::string, int32_t> declared_types_;  // ONNX element types of value_info
  // note_known_dims, by tensor (kept alive, so the key is never reused).
  std::unordered_map<const void*, std::pair<Tensor, std::vector<int64_t>>> known_dims_;
  std::unordered_map<std::string, int64_t> given_dims_;  // dim_param -> the dim input_shapes gave
  int node_counter_ = 0;
};

// Whether a model's values of type t are held in a wider dtype while the graph computes
// (u8 in i32, f16 in f32); strings are held as they are.
inline bool held_widened(DType t) { return compute_dtype(t) != t; }

// Storage dtypes (storage_types.cpp): the storage dtype of output `i` of a node, implied by
// its inputs' when the op keeps its operands' element type; and whether the op only moves
// or selects values, so that its outputs need no rounding back into the storage dtype.
std::optional<DType> implied_storage(const NodeContext& c, size_t i, const Tensor& out);
bool keeps_values(std::string_view op_type);
// A ValueError naming `what` when t is u64 and holds a value of 2^63 or more, which its
// compute dtype i64 cannot (a cast would wrap it negative).
void check_fits_compute_dtype(const Tensor& t, const std::string& what, SourceLoc loc);

// The type of a tensor, of a sequence's items or of what an optional holds: sets info's
// `optional` and `sequence` flags and returns the innermost type.
const ::onnx::TypeProto& element_type(const ::onnx::TypeProto& type, ValueInfo& info);

// The values known while loading of node output 0 computed from known dims (import_dims.cpp).
std::optional<std::vector<int64_t>> known_dims_after(const NodeContext& c);
// A dim from its text ("784*batch"), its symbols named as the importer names dim_params.
int64_t parse_dim(const NodeContext& c, const std::string& text);

// A baton value name for an ONNX name ("input.1" stays, "0" becomes "v0", "x:0" "x_0").
std::string value_name_for(std::string_view onnx_name);

}  // namespace baton::onnx::detail
