// Building graphs from tensor code (DESIGN.md idea 3): a symbolic tensor is a value of a
// graph being built, and an op with a symbolic input appends a node instead of running.
//
// A Builder owns the IR graph and says what each graph input is bound to: a placeholder
// (fed at run time), a constant or a variable (a concrete tensor, held by reference so a
// run reads its current value). Concrete tensors used by the graph become constants the
// first time they are used. While a trace is active on this thread (compile(), the
// branches of cond), every op records a node, even one with only concrete inputs, so that
// state such as parameters is read when the graph runs, not when it was traced.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "baton/graph.h"
#include "core/tensor_impl.h"
#include "graph/ir.h"

namespace baton::trace {

class Builder;

// What a symbolic TensorImpl points to.
struct SymbolicValue {
  std::shared_ptr<Builder> builder;
  graph::Value* value;
};

enum class InputKind { Placeholder, Constant, Variable };

struct InputBinding {
  InputKind kind = InputKind::Placeholder;
  Tensor tensor;  // the bound tensor of a constant or variable
};

class Builder : public std::enable_shared_from_this<Builder> {
 public:
  explicit Builder(std::string name, Builder* parent = nullptr);
  // Adopts a whole graph (read from text): every input is a placeholder.
  explicit Builder(graph::Graph ir);

  graph::Graph& ir() { return ir_; }
  const graph::Graph& ir() const { return ir_; }
  Builder* parent() const { return parent_; }
  // The builder whose plan runs this one: itself, or the trace a branch of cond or
  // while_loop is part of.
  Builder& outermost() { return parent_ ? parent_->outermost() : *this; }

  Tensor placeholder(DType dtype, const Shape& shape, std::string name);
  // A variable: an input bound to `init`'s storage, kept across runs.
  Tensor variable(const Tensor& init, std::string name);
  // The graph value for t: its own value when t is symbolic here; an input that captures
  // it when t belongs to an enclosing builder (closed subgraphs); a constant bound to t
  // when t is concrete. Throws GraphError for a value of an unrelated graph.
  graph::Value* value_of(const Tensor& t, const std::string& op, SourceLoc loc);
  // A symbolic tensor for v; strides default to contiguous.
  Tensor wrap(graph::Value* v, const Shape& shape, Shape strides = {});
  bool has_input_named(const std::string& name) const;
  // Input bindings: every graph input has one.
  const InputBinding& binding(const graph::Value* input) const;
  InputKind kind(const graph::Value* input) const { return binding(input).kind; }
  // For a subgraph: pairs (value in the parent, input of this graph) of captured values.
  const std::vector<std::pair<Tensor, graph::Value*>>& captures() const { return captures_; }

  // A concrete tensor (a leaf) whose .grad() the traced function used: read it (an
  // optimizer step, backward() adding to it) or changed it (backward(), zero_grad(),
  // set_grad()).
  struct GradUse {
    Tensor leaf;
    Tensor before;  // its grad when the function first used it (restored after the trace)
    // The function's first use set it, so what it does with it does not depend on the
    // gradient a call finds.
    bool set_first = false;
    bool changed = false;
  };
  enum class GradAccess { Read, Changed, Set };  // Set: changed without reading it first
  // Before the function reads or changes leaf's grad.
  void note_grad_use(const Tensor& leaf, GradAccess access);
  const std::vector<GradUse>& grad_uses() const { return grad_uses_; }
  // The input bound to t (a concrete tensor) as a constant of this graph, or nullptr.
  graph::Value* bound_value(const Tensor& t) const;

  // A condition on state outside the graph that the trace assumed (a module's training
  // flag): a compiled plan serves a call only while its guards hold. `key` names the
  // state: one guard per key.
  struct Guard {
    const void* key;
    std::string assumed;  // what the trace found, e.g. "the training flag of Dropout(p=0.5) was on when traced"
    std::function<bool()> holds;
  };
  void add_guard(Guard g);
  const std::vector<Guard>& guards() const { return guards_; }

  // Nodes recorded while grad mode was off (NoGradGuard): no gradient flows through them,
  // as eagerly no history is recorded for them.
  void note_recorded_without_grad(const graph::Node* n) { without_grad_.insert(n); }
  bool recorded_without_grad(const graph::Node* n) const { return without_grad_.count(n) > 0; }

  // Nodes with side effects (in-place updates) that must run even when nothing reads them.
  void add_effect(graph::Node* n) { effects_.push_back(n); }
  const std::vector<graph::Node*>& effects() const { return effects_; }

 private:
  graph::Value* add_bound_input(const Tensor& t, InputKind kind, std::string name);
  std::string unused_name(const std::string& prefix);  // c0, c1... not taken by an input

  graph::Graph ir_;
  Builder* parent_;
  std::unordered_map<const graph::Value*, InputBinding> bindings_;
  std::unordered_map<const TensorImpl*, graph::Value*> constants_;
  std::vector<std::pair<Tensor, graph::Value*>> captures_;
  std::vector<graph::Node*> effects_;
  std::unordered_set<const graph::Node*> without_grad_;
  std::vector<GradUse> grad_uses_;
  std::vector<Guard> guards_;
  int next_name_ = 0;
};

// The builder of a symbolic tensor (nullptr for a concrete one).
Builder* builder_of(const Tensor& t);

// The innermost trace active on this thread, or nullptr.
Builder* active();
// Adds a guard to the active trace (Builder::Guard), if any: to the outermost one, whose
// plan a branch of cond or while_loop is part of.
void guard(const void* key, std::string assumed, std::function<bool()> holds);
// Makes `b` the active trace for its lifetime (nested traces stack).
class ActiveTrace {
 public:
  explicit ActiveTrace(Builder& b);
  ~ActiveTrace();
  ActiveTrace(const ActiveTrace&) = delete;
  ActiveTrace& operator=(const ActiveTrace&) = delete;

 private:
  Builder* previous_;
};

// No trace is active for its lifetime (the executor runs kernels, even inside a trace).
class NoTrace {
 public:
  NoTrace();
  ~NoTrace();
  NoTrace(const NoTrace&) = delete;
  NoTrace& operator=(const NoTrace&) = delete;

 private:
  Builder* previous_;
};

// Nodes recorded during its lifetime take `loc` as their location (the backward nodes of a
// forward node point at the user's line of the forward op, not at the gradient rule).
class LocationScope {
 public:
  explicit LocationScope(const graph::Location& loc);
  ~LocationScope();
  LocationScope(const LocationScope&) = delete;
  LocationScope& operator=(const LocationScope&) = delete;

 private:
  const graph::Location* previous_;
};

// TensorType of a shape as the IR shows it.
graph::TensorType type_of(DType dtype, const Shape& shape);

// Tensor::copy_/fill_ (`op`) while building a graph. A destination with storage (a
// concrete tensor, a variable, an input) gets an assign node that writes it when the graph
// runs, and so does a computed value that shares its elements with another (a view, or a
// value a view was made of): every view then sees the write, as eagerly. Any other value
// computed by the graph is rebound to a new value (values are immutable).
void copy_into(std::string_view op, Tensor& dst, const Tensor& src, SourceLoc loc);

// The ops::call hook: appends a node for op on inputs (any may be symbolic), inferring
// the output types now so errors name the caller's line; outputs become symbolic.
void record(const ops::OpDef& op, std::span<const Tensor> inputs, const ops::Attrs& attrs,
            std::span<Tensor> outputs, SourceLoc loc);

}  // namespace baton::trace

namespace baton {

// The builder behind a public Graph, and a Graph around a builder.
struct GraphAccess {
  static trace::Builder& builder(const Graph& g) { return *g.b_; }
  static Graph wrap(std::shared_ptr<trace::Builder> b) { return Graph(std::move(b)); }
};

}  // namespace baton
