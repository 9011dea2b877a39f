#include "trace/builder.h"

#include <algorithm>

#include "baton/autograd.h"
#include "baton/graph.h"
#include "baton/ops.h"
#include "core/tensor_impl.h"
#include "dispatch/hooks.h"
#include "ops/common.h"
#include "trace/autodiff.h"

namespace baton::trace {
namespace {

thread_local Builder* active_trace = nullptr;
thread_local const graph::Location* location_override = nullptr;

bool is_ancestor(const Builder* maybe_parent, const Builder* b) {
  for (const Builder* p = b->parent(); p; p = p->parent())
    if (p == maybe_parent) return true;
  return false;
}

}  // namespace

Builder::Builder(std::string name, Builder* parent) : ir_(std::move(name)), parent_(parent) {}

Builder::Builder(graph::Graph ir) : ir_(std::move(ir)), parent_(nullptr) {
  for (graph::Value* v : ir_.inputs()) bindings_[v] = {InputKind::Placeholder, {}};
}

graph::TensorType type_of(DType dtype, const Shape& shape) {
  graph::SymShape s;
  for (int64_t d : shape) s.push_back(graph::Dim(d));
  return {dtype, std::move(s)};
}

Tensor Builder::placeholder(DType dtype, const Shape& shape, std::string name) {
  graph::Value* v = ir_.add_input(std::move(name), type_of(dtype, shape));
  bindings_[v] = {InputKind::Placeholder, {}};
  return wrap(v, shape);
}

Tensor Builder::variable(const Tensor& init, std::string name) {
  if (!init.defined() || init.is_symbolic())
    throw GraphError("variable", "the initial value must be a concrete tensor", SourceLoc::current());
  Tensor storage = init.contiguous().clone();  // the variable owns its state
  return wrap(add_bound_input(storage, InputKind::Variable, std::move(name)), storage.shape());
}

graph::Value* Builder::add_bound_input(const Tensor& t, InputKind kind, std::string name) {
  graph::Value* v = ir_.add_input(std::move(name), type_of(t.dtype(), t.shape()));
  bindings_[v] = {kind, t};
  return v;
}

graph::Value* Builder::value_of(const Tensor& t, const std::string& op, SourceLoc loc) {
  if (t.is_symbolic() && t.impl()->symbolic->builder.get() == this) return t.impl()->symbolic->value;
  if (t.is_symbolic() && !is_ancestor(t.impl()->symbolic->builder.get(), this))
    throw GraphError(op, str("a ", t.dtype(), t.shape(), " input belongs to another graph (",
                             t.impl()->symbolic->builder->ir().name(),
                             "); tensors of two graphs cannot meet in one op"), loc);
  if (parent_) {  // subgraphs are closed: outer values and constants enter as inputs
    graph::Value* outer = parent_->value_of(t, op, loc);
    for (auto& [outer_tensor, inner] : captures_)
      if (outer_tensor.impl()->symbolic->value == outer) return inner;
    graph::Value* inner = ir_.add_input(unused_name("cap"), outer->type);
    bindings_[inner] = {InputKind::Placeholder, {}};
    captures_.emplace_back(parent_->wrap(outer, t.shape(), t.strides()), inner);
    return inner;
  }
  auto it = constants_.find(t.impl());
  if (it != constants_.end()) return it->second;
  graph::Value* v = add_bound_input(t, InputKind::Constant, unused_name("c"));
  constants_.emplace(t.impl(), v);
  return v;
}

bool Builder::has_input_named(const std::string& name) const {
  for (graph::Value* v : ir_.inputs())
    if (v->name() == name) return true;
  return false;
}

std::string Builder::unused_name(const std::string& prefix) {
  std::string name;
  do name = str(prefix, next_name_++);
  while (has_input_named(name));
  return name;
}

Tensor Builder::wrap(graph::Value* v, const Shape& shape, Shape strides) {
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = shape;
  impl->strides = strides.empty() && !shape.empty() ? contiguous_strides(shape) : std::move(strides);
  impl->dtype = v->dtype();
  impl->symbolic = std::make_shared<SymbolicValue>(SymbolicValue{shared_from_this(), v});
  return Tensor(std::move(impl));
}

const InputBinding& Builder::binding(const graph::Value* input) const {
  auto it = bindings_.find(input);
  if (it == bindings_.end()) throw GraphError(str("graph: value %", input->id(), " is not an input"));
  return it->second;
}

void Builder::note_grad_use(const Tensor& leaf, GradAccess access) {
  static thread_local bool noting = false;  // leaf.grad() below comes back here
  if (noting) return;
  auto it = std::find_if(grad_uses_.begin(), grad_uses_.end(), [&](const GradUse& u) { return u.leaf.same(leaf); });
  if (it == grad_uses_.end()) {
    noting = true;
    Tensor before = leaf.grad();
    noting = false;
    it = grad_uses_.insert(grad_uses_.end(), {leaf, before, access == GradAccess::Set, false});
  }
  it->changed = it->changed || access != GradAccess::Read;
}

void Builder::add_guard(Guard g) {
  for (const Guard& have : guards_)
    if (have.key == g.key) return;
  guards_.push_back(std::move(g));
}

graph::Value* Builder::bound_value(const Tensor& t) const {
  auto it = constants_.find(t.impl());
  return it == constants_.end() ? nullptr : it->second;
}

Builder* builder_of(const Tensor& t) {
  return t.defined() && t.is_symbolic() ? t.impl()->symbolic->builder.get() : nullptr;
}

Builder* active() { return active_trace; }

void guard(const void* key, std::string assumed, std::function<bool()> holds) {
  if (Builder* b = active()) b->outermost().add_guard({key, std::move(assumed), std::move(holds)});
}
ActiveTrace::ActiveTrace(Builder& b) : previous_(active_trace) { active_trace = &b; }
ActiveTrace::~ActiveTrace() { active_trace = previous_; }
LocationScope::LocationScope(const graph::Location& loc) : previous_(location_override) {
  if (loc.known()) location_override = &loc;
}
LocationScope::~LocationScope() { location_override = previous_; }
NoTrace::NoTrace() : previous_(active_trace) { active_trace = nullptr; }
NoTrace::~NoTrace() { active_trace = previous_; }

// --- recording one op call ---
namespace {

struct Inferred {
  std::vector<ops::TensorMeta> metas;
  std::vector<Shape> strides;  // a view's own strides; empty: contiguous
};

Inferred infer(const ops::CallContext& c) {
  const ops::OpDef& op = c.op;
  if (op.view_rule) {  // view rules run on symbolic tensors too: they only touch metadata
    Tensor v = op.view_rule(c);
    return {{{v.dtype(), v.shape()}}, {v.strides()}};
  }
  if (op.infer_one) return {{op.infer_one(c)}, {}};
  return {op.infer_many(c), {}};
}

// A shape rule that did plain arithmetic on a symbol produced an invalid dim: say so
// rather than build a node with a wrong shape.
void check_dims(const ops::CallContext& c, const Inferred& inferred) {
  for (const ops::TensorMeta& m : inferred.metas)
    for (int64_t d : m.shape)
      if (!sym::is_valid_dim(d))
        c.fail("cannot infer the output shape from symbolic dims; mark these dims static (or "
               "compute the size outside the graph)");
}

Builder& builder_for(std::span<const Tensor> inputs, const ops::OpDef& op, SourceLoc loc) {
  if (Builder* b = active()) return *b;
  for (const Tensor& t : inputs)
    if (Builder* b = builder_of(t)) return *b;
  throw GraphError(op.name, "no graph to record into", loc);
}

}  // namespace

void record(const ops::OpDef& op, std::span<const Tensor> inputs, const ops::Attrs& attrs,
            std::span<Tensor> outputs, SourceLoc loc) {
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!inputs[i].defined())
      throw ValueError(op.name, str("input ", i, " is an undefined tensor"), loc);
  Builder& b = builder_for(inputs, op, loc);
  ops::CallContext ctx{op, inputs, attrs, loc};
  Inferred inferred = infer(ctx);
  check_dims(ctx, inferred);
  std::vector<graph::Value*> values;
  for (const Tensor& t : inputs) values.push_back(b.value_of(t, op.name, loc));
  std::vector<graph::TensorType> types;
  for (const ops::TensorMeta& m : inferred.metas) types.push_back(type_of(m.dtype, m.shape));
  graph::Location where = location_override ? *location_override : graph::Location(loc);
  graph::Node* node = b.ir().add_node(op.name, std::move(values), std::move(types), attrs, where);
  if (!op.mutated_inputs.empty()) b.add_effect(node);
  if (!GradMode::enabled()) b.note_recorded_without_grad(node);
  for (size_t i = 0; i < inferred.metas.size() && i < outputs.size(); ++i)
    outputs[i] = b.wrap(node->output(i), inferred.metas[i].shape,
                        inferred.strides.empty() ? Shape{} : inferred.strides[i]);
}

namespace {

// Whether another value shows v's elements: v is a view, or a view of v was made.
bool shares_elements(const graph::Value* v) {
  if (v->producer() && graph::is_view(*v->producer())) return true;
  const auto& uses = v->uses();
  return std::any_of(uses.begin(), uses.end(), [](const graph::Use& u) { return graph::is_view(*u.user); });
}

}  // namespace

void copy_into(std::string_view op, Tensor& dst, const Tensor& src, SourceLoc loc) {
  if (!dst.is_symbolic() || !dst.impl()->symbolic->value->producer()) {  // storage: write it
    assign(dst, src, loc);
    return;
  }
  if (shares_elements(dst.impl()->symbolic->value)) {
    // Written in place, as eagerly, so that every view of the same elements sees it: the
    // passes and the planner order reads of a storage and its views around the write.
    ops::check_in_place(dst, op, loc);
    static const ops::OpDef& assign_op = *ops::find_op("assign");
    ops::call(assign_op, {dst, src}, {}, loc);
    return;
  }
  Tensor v = src.dtype() == dst.dtype() ? src : cast(src, dst.dtype(), loc);
  if (!(v.shape() == dst.shape())) v = expand(v, dst.shape(), loc);
  Builder& b = *builder_of(dst);
  graph::Value* value = b.value_of(v, "copy_", loc);
  dst.impl()->symbolic = std::make_shared<SymbolicValue>(SymbolicValue{b.shared_from_this(), value});
}

}  // namespace baton::trace

namespace baton::trace {
namespace {

bool trace_active() { return active_trace != nullptr; }

// ops::call and Tensor::copy_/fill_ reach the builder through these dispatch hooks, and
// Tensor::requires_grad() of a symbolic tensor through core's.
[[maybe_unused]] const bool capture_registered =
    (dispatch::set_graph_capture({.active = trace_active, .record = record, .copy_into = copy_into}),
     set_symbolic_requires_grad(symbolic_requires_grad), true);

}  // namespace
}  // namespace baton::trace
