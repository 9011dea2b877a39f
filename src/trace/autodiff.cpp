// Graph autodiff (DESIGN.md idea 2): the backward graph is built by running each node's
// gradient rule -- the same rule eager autograd runs -- on symbolic tensors.
#include "trace/autodiff.h"

#include <memory>
#include <unordered_map>
#include <unordered_set>

#include "baton/autograd.h"
#include "baton/ops.h"

namespace baton::trace {
namespace {

// Values that depend on any of `wrt` (forward reachability in node order) through nodes
// recorded with grad mode on, as eager autograd records them: differentiable ops (a
// gradient rule) and their floating results (a cast to an integer or storage dtype, a
// comparison, an argmax give values that require no grad, and no gradient flows back
// through them).
std::unordered_set<const graph::Value*> dependents(const Builder& b, const std::vector<graph::Value*>& wrt) {
  std::unordered_set<const graph::Value*> dep(wrt.begin(), wrt.end());
  for (auto& node : b.ir().nodes()) {
    if (b.recorded_without_grad(node.get()) || !node->op() || !node->op()->grad_rule) continue;
    bool any = false;
    for (graph::Value* in : node->inputs()) any = any || dep.count(in);
    if (any)
      for (graph::Value* out : node->outputs())
        if (is_floating(out->dtype())) dep.insert(out);
  }
  return dep;
}

// What a trace differentiates depends on grad mode (NoGradGuard around the call): a plan
// traced with it on serves only calls with it on, and the other way round.
void guard_grad_mode() {
  static const char key = 0;
  const bool on = GradMode::enabled();
  guard(&key, str("grad mode was ", on ? "on" : "off", " when traced"), [on] { return GradMode::enabled() == on; });
}

// The leaves a backward() in b reaches: concrete tensors bound into it that require grad.
std::vector<Tensor> bound_leaves(const Builder& b) {
  std::vector<Tensor> leaves;
  for (graph::Value* v : b.ir().inputs()) {
    const InputBinding& bound = b.binding(v);
    if (bound.kind != InputKind::Placeholder && bound.tensor.requires_grad() && bound.tensor.is_leaf())
      leaves.push_back(bound.tensor);
  }
  return leaves;
}

class GradBuilder {
 public:
  GradBuilder(Builder& b, const std::vector<graph::Value*>& wrt)
      : b_(b), depends_(dependents(b, wrt)) {
    size_t index = 0;
    for (auto& n : b.ir().nodes()) position_[n.get()] = index++;
    for (const graph::Node* e : b.effects())
      for (int m : e->op() ? e->op()->mutated_inputs : std::vector<int>{})
        if (size_t(m) < e->num_inputs()) {
          size_t& last = last_write_[graph::storage_root(e->input(size_t(m)))];
          last = std::max(last, position_.at(e) + 1);  // + 1: 0 means never written
        }
  }

  void seed(graph::Value* v, const Tensor& g) { accumulate(v, g); }

  // Walks the nodes that existed when it started, last first; the rules append new nodes.
  void run(SourceLoc loc) {
    std::vector<graph::Node*> nodes;
    for (auto& n : b_.ir().nodes()) nodes.push_back(n.get());
    for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) backprop(**it, loc);
  }

  Tensor result(graph::Value* v) const {
    auto it = grads_.find(v);
    return it == grads_.end() ? Tensor{} : it->second;
  }

 private:
  void backprop(graph::Node& node, SourceLoc loc) {
    const ops::OpDef* op = node.op();
    if (!op || !op->grad_rule) return;  // not differentiable: no gradient flows
    std::vector<Tensor> grad_outputs;
    bool any_grad = false;
    for (graph::Value* out : node.outputs()) {
      grad_outputs.push_back(result(out));
      any_grad = any_grad || grad_outputs.back().defined();
    }
    const size_t n = node.num_inputs();
    auto needs = std::make_unique<bool[]>(n);
    bool any_needed = false;
    for (size_t i = 0; i < n; ++i) any_needed |= needs[i] = depends_.count(node.input(i)) > 0;
    if (!any_grad || !any_needed) return;

    std::vector<Tensor> inputs, outputs;
    for (graph::Value* in : node.inputs()) inputs.push_back(tensor_of(in));
    for (graph::Value* out : node.outputs()) outputs.push_back(tensor_of(out));
    ops::GradContext ctx{{*op, inputs, node.attrs, loc}, outputs, grad_outputs, {needs.get(), n}};
    LocationScope where(node.loc);  // backward nodes point at the forward op's line
    const size_t nodes_before = b_.ir().num_nodes();
    ops::Grads grads = op->grad_rule(ctx);
    check_saved_values(node, nodes_before, loc);
    for (size_t i = 0; i < n && i < grads.size(); ++i)
      if (needs[i] && grads[i].defined()) accumulate(node.input(i), grads[i]);
  }

  // As eagerly: the gradient rule of `node` may not read a value (its inputs or outputs)
  // whose elements a write after `node` changed (Tensor::copy_ into it or a view of it
  // under NoGradGuard, an assign): the rule's nodes would run after the write and read
  // what it wrote. The nodes the rule added from `first` on are what it reads.
  void check_saved_values(const graph::Node& node, size_t first, SourceLoc loc) const {
    const size_t at = position_.at(&node);
    auto written_after_node = [&](const graph::Value* v) {
      auto it = last_write_.find(graph::storage_root(v));
      return it != last_write_.end() && it->second > at + 1;
    };
    const auto& nodes = b_.ir().nodes();
    for (size_t i = first; i < nodes.size(); ++i)
      for (const graph::Value* in : nodes[i]->inputs())
        if (position_.count(in->producer()) || !in->producer())  // a value of the forward graph
          if (written_after_node(in))
            throw AutogradError(node.op_name(),
                                str("a tensor of shape ", in->shape(), " saved for the gradient (",
                                    node.loc.known() ? str(node.loc.file, ":", node.loc.line) : "the forward op",
                                    ") was modified in place after it was saved"),
                                loc);
  }

  void accumulate(graph::Value* v, const Tensor& g) {
    auto [it, fresh] = grads_.emplace(v, g);
    if (!fresh) it->second = add(it->second, g);
  }

  Tensor tensor_of(graph::Value* v) {
    return b_.wrap(v, v->shape().raw());
  }

  Builder& b_;
  std::unordered_set<const graph::Value*> depends_;
  std::unordered_map<const graph::Node*, size_t> position_;  // the nodes that existed at the start
  std::unordered_map<const graph::Value*, size_t> last_write_;  // storage -> 1 + the last writer's position
  std::unordered_map<const graph::Value*, Tensor> grads_;
};

}  // namespace

std::vector<Tensor> gradients(const std::vector<Tensor>& outputs, const std::vector<Tensor>& seeds,
                              const std::vector<Tensor>& wrt, SourceLoc loc) {
  Builder* b = active();
  for (size_t i = 0; !b && i < outputs.size(); ++i) b = builder_of(outputs[i]);
  if (!b) throw AutogradError("grad", "no output is symbolic", loc);
  guard_grad_mode();
  std::vector<graph::Value*> wrt_values;
  for (const Tensor& t : wrt) wrt_values.push_back(b->value_of(t, "grad", loc));
  GradBuilder builder(*b, wrt_values);
  for (size_t i = 0; i < outputs.size(); ++i)
    if (seeds[i].defined()) builder.seed(b->value_of(outputs[i], "grad", loc), seeds[i]);
  builder.run(loc);
  std::vector<Tensor> out;
  for (graph::Value* v : wrt_values) out.push_back(builder.result(v));
  return out;
}

namespace {

// The seed of a scalar output: ones; other outputs need an explicit gradient.
Tensor seed_for(const Tensor& output, const Tensor& grad_output, SourceLoc loc) {
  if (grad_output.defined()) return grad_output;
  if (output.numel() != 1)
    throw AutogradError("grad", str("the output has shape ", output.shape(),
                                    "; pass its gradient for a non-scalar output"), loc);
  const graph::Location where(loc);
  LocationScope at_the_call(where);  // the seed node points at the backward()/grad() line
  return ones_like(output);
}

}  // namespace

std::vector<Tensor> graph_grad(const Tensor& output, const std::vector<Tensor>& wrt,
                               const Tensor& grad_output, SourceLoc loc) {
  std::vector<Tensor> out = gradients({output}, {seed_for(output, grad_output, loc)}, wrt, loc);
  for (size_t i = 0; i < wrt.size(); ++i)
    if (!out[i].defined()) out[i] = zeros_like(wrt[i]);
  return out;
}

void symbolic_backward(const Tensor& output, const Tensor& grad_output, SourceLoc loc) {
  Builder* b = builder_of(output);
  if (Builder* a = active()) b = a;
  const std::vector<Tensor> leaves = bound_leaves(*b);
  if (leaves.empty())
    throw AutogradError("backward", "no tensor the graph reads requires grad", loc);
  if (!output.requires_grad())  // as eagerly: computed without grad mode, or from no leaf
    throw AutogradError("backward", str("the tensor (", output.dtype(), output.shape(),
                                        ") does not require grad and has no grad_fn: call "
                                        "requires_grad_() on a leaf it depends on"),
                        loc);
  std::vector<Tensor> grads = gradients({output}, {seed_for(output, grad_output, loc)}, leaves, loc);
  for (size_t i = 0; i < leaves.size(); ++i) {
    if (!grads[i].defined()) continue;  // like eager: an unused leaf keeps its grad
    Tensor previous = leaves[i].grad();
    b->note_grad_use(leaves[i], Builder::GradAccess::Changed);
    leaves[i].set_grad(previous.defined() ? add(previous, grads[i]) : grads[i]);
  }
}

bool symbolic_requires_grad(const Tensor& t) {
  Builder* b = builder_of(t);
  if (!b) return false;
  guard_grad_mode();
  if (!GradMode::enabled()) return false;
  std::vector<graph::Value*> leaves;
  for (const Tensor& leaf : bound_leaves(*b))
    if (graph::Value* v = b->bound_value(leaf)) leaves.push_back(v);
  return dependents(*b, leaves).count(t.impl()->symbolic->value) > 0;
}

void note_grad_use(const Tensor& leaf, Builder::GradAccess access, SourceLoc loc) {
  Builder* b = active();
  if (!b || leaf.is_symbolic()) return;
  if (b->parent() && access != Builder::GradAccess::Read)
    throw GraphError(b->ir().name(), str("changes the gradient of a leaf ", leaf.dtype(), leaf.shape(),
                                         ": cond and while_loop trace every branch, so the change would be made on "
                                         "every run, whichever branch runs; change gradients outside the branches"),
                     loc);
  b->outermost().note_grad_use(leaf, access);
}

Tensor stop_gradient(const Tensor& x, SourceLoc loc) {
  static const ops::OpDef& stop_gradient_op = *ops::find_op("stop_gradient");
  return ops::call(stop_gradient_op, {x}, {}, loc);
}

}  // namespace baton::trace
