// The graph IR of static mode: a Graph of Nodes in SSA form (docs/graph-ir.md).
//
//   Graph g("mlp");
//   Value* x = g.add_input("x", {f32, {"batch", 784}});
//   Value* w = g.add_input("w", {f32, {784, 512}});
//   Node* mm = g.add_node("matmul", {x, w}, {{f32, {"batch", 512}}});
//   g.set_outputs({mm->output()});
//   trace::verify(g);  // (trace/verify.h) throws ValueError listing every problem
//
// Ownership: the graph owns its input Values and its Nodes; a Node owns its output
// Values. All live on the heap, so Value* and Node* stay valid until erased.
// Subgraphs (the branches of If, the body of Loop) are closed: they read only their
// own inputs, never values of an enclosing graph (see docs/graph-ir.md for why).
#pragma once
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "baton/dtype.h"
#include "baton/error.h"
#include "graph/dim.h"
#include "dispatch/registry.h"

namespace baton::graph {

class Graph;
class Node;

// Where a node was built: the user's file (basename) and line; empty when unknown.
struct Location {
  std::string file;
  int line = 0;

  Location() = default;
  Location(std::string f, int l) : file(std::move(f)), line(l) {}
  Location(SourceLoc loc);  // NOLINT: implicit, so SourceLoc::current() defaults work
  bool known() const { return !file.empty(); }
  friend bool operator==(const Location&, const Location&) = default;
};

// The type of a value: its dtype and (possibly symbolic) shape. Prints f32[batch,784].
struct TensorType {
  DType dtype = DType::f32;
  SymShape shape;
  friend bool operator==(const TensorType&, const TensorType&) = default;
};
std::ostream& operator<<(std::ostream& os, const TensorType& t);

// One reading of a value: input `index` of node `user`.
struct Use {
  Node* user;
  int index;
  friend bool operator==(const Use&, const Use&) = default;
};

class Value {
 public:
  int64_t id() const { return id_; }  // unique within its graph, never reused
  const std::string& name() const { return name_; }
  void set_name(std::string name);  // "" or a valid name (is_value_name); throws ValueError
  Node* producer() const { return producer_; }  // nullptr for a graph input
  int output_index() const { return output_index_; }
  const std::vector<Use>& uses() const { return uses_; }

  TensorType type;
  DType dtype() const { return type.dtype; }
  const SymShape& shape() const { return type.shape; }

 private:
  friend class Graph;
  friend class Node;
  Value(int64_t id, TensorType t, Node* producer, int index)
      : type(std::move(t)), id_(id), producer_(producer), output_index_(index) {}
  void remove_use(Use u);

  int64_t id_;
  std::string name_;
  Node* producer_;
  int output_index_;
  std::vector<Use> uses_;
};

// A value name: letters, digits, '_' and '.', not all digits (all-digit labels such as
// %3 are how the text form shows unnamed values). "fc1.weight" and "0.bias" are valid.
bool is_value_name(std::string_view s);
// An op or graph name: a letter or '_' then letters, digits, '_' or '.'.
bool is_op_name(std::string_view s);

class Node {
 public:
  const std::string& op_name() const { return op_name_; }
  const ops::OpDef* op() const { return op_; }  // nullptr when the registry lacks op_name

  size_t num_inputs() const { return inputs_.size(); }
  Value* input(size_t i) const { return inputs_.at(i); }
  const std::vector<Value*>& inputs() const { return inputs_; }
  void set_input(size_t i, Value* v);  // keeps both values' use lists right

  size_t num_outputs() const { return outputs_.size(); }
  Value* output(size_t i = 0) const { return outputs_.at(i).get(); }
  std::vector<Value*> outputs() const;

  ops::Attrs attrs;
  Location loc;
  std::vector<std::shared_ptr<Graph>> subgraphs;
  // Set by fusion passes: the ops this node computes in one kernel ("conv2d + add + relu").
  // Not part of the text form; to_dot() draws the node as a group with it.
  std::string fused_from;

 private:
  friend class Graph;
  Node(std::string op_name, const ops::OpDef* op) : op_name_(std::move(op_name)), op_(op) {}

  std::string op_name_;
  const ops::OpDef* op_;
  std::vector<Value*> inputs_;
  std::vector<std::unique_ptr<Value>> outputs_;
};

class Graph {
 public:
  explicit Graph(std::string name = "main");
  Graph(Graph&&) = default;
  Graph& operator=(Graph&&) = default;
  Graph(const Graph&) = delete;  // use clone(): copying must remap every pointer
  Graph& operator=(const Graph&) = delete;
  ~Graph();

  const std::string& name() const { return name_; }
  void set_name(std::string name);  // throws ValueError unless is_op_name

  // A placeholder; name may be "" (printed by number).
  Value* add_input(std::string name, TensorType type);
  // Appends a node; the caller supplies the output types (shape inference comes later).
  // The op is looked up in the registry; an unknown name is kept (op() == nullptr) and
  // reported by trace::verify(). Throws ValueError for a name the text form cannot hold.
  Node* add_node(std::string_view op_name, std::vector<Value*> inputs,
                 std::vector<TensorType> output_types, ops::Attrs attrs = {},
                 Location loc = SourceLoc::current());
  void set_outputs(std::vector<Value*> outputs);
  // Moves `node` (of this graph) to just before `position`: passes that replace a node
  // build the replacement with add_node, which appends, then put it where the old one was.
  void move_before(Node* node, const Node* position);

  // Removes a node whose outputs are unused (not read by a node, not a graph output);
  // throws ValueError otherwise.
  void erase_node(Node* node);
  // Every node input and graph output reading `from` reads `to` instead.
  void replace_all_uses(Value* from, Value* to);
  bool is_output(const Value* v) const;
  // True when every node input is a graph input or an output of an earlier node.
  bool is_topologically_sorted() const;
  // A deep copy (subgraphs included) with the same ids and names.
  Graph clone() const;

  const std::vector<std::unique_ptr<Value>>& input_values() const { return inputs_; }
  std::vector<Value*> inputs() const;
  Value* input(size_t i) const { return inputs_.at(i).get(); }
  const std::vector<std::unique_ptr<Node>>& nodes() const { return nodes_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  size_t num_nodes() const { return nodes_.size(); }

 private:
  std::string name_;
  int64_t next_id_ = 0;
  std::vector<std::unique_ptr<Value>> inputs_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<Value*> outputs_;
};

// How the text form, the verifier and DOT show values: "%name" for a named value, else
// "%k" numbering the unnamed values of the graph in definition order (inputs, then node
// outputs), so printed text is canonical. A value outside the graph shows as "%?<id>".
class ValueNames {
 public:
  explicit ValueNames(const Graph& g);
  std::string operator()(const Value* v) const;

 private:
  std::unordered_map<const Value*, std::string> names_;
};

// An op whose output aliases its input (reshape, permute, expand, slice...): no kernel runs.
bool is_view(const Node& n);

// The value owning the storage `v` uses: `v` itself, or for the output of a view op the
// root of that op's input.
const Value* storage_root(const Value* v);

}  // namespace baton::graph
