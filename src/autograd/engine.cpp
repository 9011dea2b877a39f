// The eager tape: recording op calls and walking them backwards. No per-op code lives
// here: each node calls its op's gradient rule, written with public ops (DESIGN.md idea 2).
#include <algorithm>
#include <atomic>
#include <queue>
#include <unordered_map>

#include "autograd/meta.h"
#include "dispatch/anomaly.h"
#include "dispatch/hooks.h"
#include "trace/autodiff.h"
#include "baton/autograd.h"
#include "baton/ops.h"

namespace baton::autograd {
namespace {

std::atomic<uint64_t> next_sequence{0};

// A new handle on the same storage and view, with no autograd state.
Tensor alias(const Tensor& t) {
  auto impl = std::make_shared<TensorImpl>();
  const TensorImpl& src = *t.impl();
  impl->storage = src.storage;
  impl->offset = src.offset;
  impl->shape = src.shape;
  impl->strides = src.strides;
  impl->dtype = src.dtype;
  return Tensor(std::move(impl));
}

uint64_t version_of(const Tensor& t) { return t.impl()->storage->version(); }

}  // namespace

// An undefined tensor has no history (requires_grad() is false, grad() undefined), and
// cannot be given any.
AutogradMeta* meta(const Tensor& t) {
  return t.defined() ? static_cast<AutogradMeta*>(t.impl()->autograd.get()) : nullptr;
}

AutogradMeta& ensure_meta(const Tensor& t) {
  if (!t.defined())
    throw ValueError("autograd", "an undefined tensor cannot require grad or hold a gradient", SourceLoc::current());
  auto& m = t.impl()->autograd;
  if (!m) m = std::make_unique<AutogradMeta>();
  return static_cast<AutogradMeta&>(*m);
}

std::string Node::name() const {
  std::string n = op->name;
  bool upper = true;
  std::string out;
  for (char ch : n) {
    if (ch == '_') { upper = true; continue; }
    out += upper ? char(std::toupper(ch)) : ch;
    upper = false;
  }
  return out + "Backward";
}

void record(const ops::OpDef& op, std::span<const Tensor> inputs, const ops::Attrs& attrs,
            std::span<Tensor> outputs, SourceLoc loc) {
  auto node = std::make_shared<Node>();
  node->op = &op;
  node->attrs = attrs;
  node->loc = loc;
  node->sequence = next_sequence++;
  node->num_outputs = outputs.size();
  node->inputs.assign(inputs.begin(), inputs.end());
  for (const Tensor& t : inputs) node->versions.push_back(version_of(t));
  for (const Tensor& t : outputs) {
    node->outputs.push_back(alias(t));
    node->versions.push_back(version_of(t));
  }
  for (const Tensor& t : inputs) {
    Edge e;
    if (AutogradMeta* m = meta(t); m && m->requires_grad) {
      if (m->grad_fn) e.node = m->grad_fn, e.slot = m->output_nr;
      else e.leaf = t.impl_ptr();
    }
    node->next.push_back(std::move(e));
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!is_floating(outputs[i].dtype())) continue;
    AutogradMeta& m = ensure_meta(outputs[i]);
    m.requires_grad = true;
    m.grad_fn = node;
    m.output_nr = uint32_t(i);
  }
}

namespace {

// The dispatch hook: ops::call hands every call of a differentiable op here.
void record_if_needed(const ops::OpDef& op, std::span<const Tensor> inputs, const ops::Attrs& attrs,
                      std::span<Tensor> outputs, SourceLoc loc) {
  if (!GradMode::enabled()) return;
  for (const Tensor& t : inputs)
    if (AutogradMeta* m = meta(t); m && m->requires_grad) return record(op, inputs, attrs, outputs, loc);
}
[[maybe_unused]] const bool recorder_registered = (dispatch::set_autograd_recorder(record_if_needed), true);

// Sum two gradients, or take the one that exists.
Tensor add_grads(const Tensor& a, const Tensor& b) {
  if (!a.defined()) return b;
  if (!b.defined()) return a;
  return add(a, b);
}

// A gradient stored in .grad() must not share memory with anything else.
Tensor owned(const Tensor& g) {
  bool shared = g.impl_ptr().use_count() > 1 || g.impl()->storage.use_count() > 1;
  return (shared || !g.is_contiguous()) ? g.clone() : g;
}

// Where the gradients of a `grad()` call are collected instead of .grad().
struct Capture {
  std::vector<Tensor> targets;
  std::vector<Tensor> results;
  // Index of the target a leaf or (node, slot) stands for, or -1.
  int find_leaf(const TensorImpl* leaf) const {
    for (size_t i = 0; i < targets.size(); ++i)
      if (targets[i].impl() == leaf) return int(i);
    return -1;
  }
  int find_output(const Node* node, uint32_t slot) const {
    for (size_t i = 0; i < targets.size(); ++i) {
      AutogradMeta* m = meta(targets[i]);
      if (m && m->grad_fn.get() == node && m->output_nr == slot) return int(i);
    }
    return -1;
  }
};

// Sets grad mode for a scope and restores it, also when a gradient rule throws.
class GradModeScope {
 public:
  explicit GradModeScope(bool on) : previous_(GradMode::enabled()) { GradMode::set_enabled(on); }
  ~GradModeScope() { GradMode::set_enabled(previous_); }

 private:
  bool previous_;
};

class Backward {
 public:
  // As in PyTorch, create_graph implies retain_graph: the new graph reuses saved tensors.
  Backward(bool retain_graph, bool create_graph, Capture* capture, SourceLoc loc)
      : retain_(retain_graph || create_graph), create_(create_graph), capture_(capture), loc_(loc) {}

  void run(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads) {
    std::vector<Node*> starts;
    for (size_t i = 0; i < roots.size(); ++i) {
      Tensor g = root_grad(roots[i], i < grads.size() ? grads[i] : Tensor{});
      AutogradMeta* m = meta(roots[i]);
      if (m->grad_fn) {
        add_to_buffer(m->grad_fn.get(), m->output_nr, g);
        if (std::find(starts.begin(), starts.end(), m->grad_fn.get()) == starts.end()) {
          starts.push_back(m->grad_fn.get());  // two outputs of one node start it once
          keep_.push_back(m->grad_fn);
        }
      } else {
        deliver_to_leaf(roots[i].impl_ptr(), g);
      }
    }
    count_dependencies(starts);
    auto later_first = [](Node* a, Node* b) { return a->sequence < b->sequence; };
    std::priority_queue<Node*, std::vector<Node*>, decltype(later_first)> ready(later_first);
    for (Node* n : starts)
      if (dependencies_[n] == 0) ready.push(n);
    while (!ready.empty()) {
      Node* n = ready.top();
      ready.pop();
      execute(*n);
      for (const Edge& e : n->next)
        if (e.node && --dependencies_[e.node.get()] == 0) ready.push(e.node.get());
    }
  }

 private:
  Tensor root_grad(const Tensor& root, const Tensor& given) {
    if (!root.requires_grad())
      throw AutogradError("backward", str("the tensor (", root.dtype(), root.shape(),
                                          ") does not require grad and has no grad_fn: call "
                                          "requires_grad_() on a leaf it depends on"), loc_);
    if (!given.defined()) {
      if (root.numel() != 1)
        throw AutogradError("backward", str("grad can be implicitly created only for tensors "
                                            "with one element; pass a gradient of shape ",
                                            root.shape()), loc_);
      return ones(root.shape(), root.dtype());
    }
    if (!(given.shape() == root.shape()))
      throw ShapeError("backward", str("gradient of shape ", given.shape(),
                                       " given for a tensor of shape ", root.shape()), loc_);
    return given.dtype() == root.dtype() ? given : given.to(root.dtype());
  }

  void count_dependencies(const std::vector<Node*>& starts) {
    std::vector<Node*> stack(starts.begin(), starts.end());
    std::unordered_map<Node*, bool> seen;
    for (Node* n : starts) seen[n] = true;
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      for (const Edge& e : n->next) {
        if (!e.node) continue;
        dependencies_[e.node.get()]++;
        if (!seen[e.node.get()]) seen[e.node.get()] = true, stack.push_back(e.node.get());
      }
    }
  }

  void add_to_buffer(Node* node, uint32_t slot, const Tensor& g) {
    auto& buf = buffers_[node];
    if (buf.empty()) buf.resize(node->num_outputs);
    buf[slot] = add_grads(buf[slot], g);
  }

  void check_saved(const Node& n) {
    if (n.released)
      throw AutogradError(n.name(), "trying to backward through the graph a second time: its "
                          "saved tensors were freed; pass retain_graph=true to the first backward",
                          n.loc);
    size_t k = 0;
    for (const auto* list : {&n.inputs, &n.outputs})
      for (const Tensor& t : *list)
        if (version_of(t) != n.versions[k++])
          throw AutogradError(n.name(), str("a tensor of shape ", t.shape(), " saved for the "
                              "gradient was modified in place after it was saved"), n.loc);
  }

  void execute(Node& n) {
    check_saved(n);
    std::vector<Tensor> grad_outputs = std::move(buffers_[&n]);
    buffers_.erase(&n);
    grad_outputs.resize(n.num_outputs);
    if (capture_)
      for (uint32_t s = 0; s < grad_outputs.size(); ++s)
        if (int t = capture_->find_output(&n, s); t >= 0)
          capture_->results[t] = add_grads(capture_->results[t], grad_outputs[s]);
    bool any = std::any_of(grad_outputs.begin(), grad_outputs.end(),
                           [](const Tensor& g) { return g.defined(); });
    if (any) propagate(n, grad_outputs);
    if (!retain_) {
      n.inputs.clear();
      n.outputs.clear();
      n.released = true;
    }
  }

  void propagate(Node& n, std::vector<Tensor>& grad_outputs) {
    // With create_graph, the rule's ops record history (and see outputs attached to n).
    GradModeScope mode(create_);
    std::vector<Tensor> outputs = n.outputs;
    if (create_)
      for (size_t i = 0; i < outputs.size(); ++i) attach(outputs[i], n, uint32_t(i));
    std::unique_ptr<bool[]> needs(new bool[n.next.size()]);
    for (size_t i = 0; i < n.next.size(); ++i) needs[i] = n.next[i].valid();
    ops::GradContext ctx{{*n.op, n.inputs, n.attrs, n.loc}, outputs, grad_outputs,
                         std::span<const bool>(needs.get(), n.next.size())};
    ops::BackwardScope scope(*n.op, n.loc);  // names the forward call in anomaly reports
    ops::Grads grads = n.op->grad_rule(ctx);
    if (grads.size() != n.inputs.size())
      throw RuntimeError(n.name(), str("gradient rule returned ", grads.size(), " gradients for ",
                                       n.inputs.size(), " inputs"), n.loc);
    // Drop our references first, so a gradient nobody else holds is stored without a copy.
    grad_outputs.clear();
    for (size_t i = 0; i < grads.size(); ++i) deliver(n, i, std::move(grads[i]));
  }

  void attach(Tensor& t, Node& n, uint32_t slot) {
    t = alias(t);
    if (!is_floating(t.dtype())) return;
    AutogradMeta& m = ensure_meta(t);
    m.requires_grad = true;
    m.grad_fn = n.shared_from_this();
    m.output_nr = slot;
  }

  void deliver(Node& n, size_t i, Tensor g) {
    const Edge& e = n.next[i];
    if (!e.valid() || !g.defined()) return;
    if (!(g.shape() == n.inputs[i].shape()))
      throw RuntimeError(n.name(), str("gradient rule returned shape ", g.shape(), " for input ",
                                       i, " of shape ", n.inputs[i].shape()), n.loc);
    if (e.leaf) deliver_to_leaf(e.leaf, std::move(g));
    else add_to_buffer(e.node.get(), e.slot, g);
  }

  void deliver_to_leaf(const std::shared_ptr<TensorImpl>& leaf, Tensor g) {
    if (g.dtype() != leaf->dtype) g = g.to(leaf->dtype);
    if (capture_) {
      if (int t = capture_->find_leaf(leaf.get()); t >= 0)
        capture_->results[t] = add_grads(capture_->results[t], g);
      return;
    }
    auto& m = static_cast<AutogradMeta&>(*leaf->autograd);
    if (!create_) g = g.detach();  // releases the only other handle when we held it alone
    if (!m.grad.defined()) {
      m.grad = create_ ? g : owned(g);
    } else if (create_) {
      m.grad = add(m.grad, g);
    } else {
      NoGradGuard guard;
      m.grad = add(m.grad, g);
    }
  }

  bool retain_, create_;
  Capture* capture_;
  SourceLoc loc_;
  std::vector<std::shared_ptr<Node>> keep_;
  std::unordered_map<Node*, int> dependencies_;
  std::unordered_map<Node*, std::vector<Tensor>> buffers_;
};

}  // namespace
std::vector<Tensor> grad(const Tensor& output, const std::vector<Tensor>& inputs,
                         const Tensor& grad_output, bool retain_graph, bool create_graph, SourceLoc loc) {
  std::vector<Tensor> seeds;
  if (grad_output.defined()) seeds.push_back(grad_output);
  return grad(std::vector<Tensor>{output}, inputs, seeds, retain_graph, create_graph, loc);
}

}  // namespace baton::autograd

namespace baton {

using autograd::AutogradMeta;

std::string AutogradMeta::history_name() const { return grad_fn ? grad_fn->name() : ""; }

Tensor& Tensor::requires_grad_(bool on, SourceLoc loc) {
  if (!is_leaf())
    throw AutogradError("requires_grad_", "only leaf tensors can change requires_grad; use "
                        "detach() to make a leaf", loc);
  if (on && !is_floating(dtype()))
    throw DTypeError("requires_grad_", str("only floating-point tensors can require grad, got ",
                                           dtype(), shape()), loc);
  autograd::ensure_meta(*this).requires_grad = on;
  return *this;
}

bool Tensor::is_leaf() const {
  auto* m = autograd::meta(*this);
  return !m || !m->grad_fn;
}

Tensor Tensor::grad(SourceLoc loc) const {
  if (trace::active()) trace::note_grad_use(*this, trace::Builder::GradAccess::Read, loc);
  auto* m = autograd::meta(*this);
  return m ? m->grad : Tensor{};
}

void Tensor::set_grad(const Tensor& g, SourceLoc loc) const {
  if (trace::active()) trace::note_grad_use(*this, trace::Builder::GradAccess::Set, loc);
  autograd::ensure_meta(*this).grad = g;
}

void Tensor::zero_grad(SourceLoc loc) const {
  if (trace::active()) trace::note_grad_use(*this, trace::Builder::GradAccess::Set, loc);
  if (auto* m = autograd::meta(*this)) m->grad = Tensor{};
}

void Tensor::backward(const Tensor& gradient, bool retain_graph, bool create_graph,
                      SourceLoc loc) const {
  if (is_symbolic()) return trace::symbolic_backward(*this, gradient, loc);  // graph autodiff
  autograd::Backward(retain_graph, create_graph, nullptr, loc).run({*this}, {gradient});
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool retain_graph,
                         bool create_graph, SourceLoc loc) {
  if (outputs.size() == 1 && outputs[0].is_symbolic())  // graph autodiff
    return trace::graph_grad(outputs[0], inputs, grad_outputs.empty() ? Tensor{} : grad_outputs[0], loc);
  for (const Tensor& t : inputs)
    if (!t.requires_grad())
      throw AutogradError("grad", str("an input (", t.dtype(), t.shape(),
                                      ") does not require grad"), loc);
  autograd::Capture capture{inputs, std::vector<Tensor>(inputs.size())};
  autograd::Backward(retain_graph, create_graph, &capture, loc).run(outputs, grad_outputs);
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!capture.results[i].defined()) capture.results[i] = zeros_like(inputs[i]);
  return capture.results;
}

std::vector<Tensor> grad(const Tensor& output, const std::vector<Tensor>& inputs,
                         const Tensor& grad_output, bool retain_graph, bool create_graph, SourceLoc loc) {
  std::vector<Tensor> seeds;
  if (grad_output.defined()) seeds.push_back(grad_output);
  return grad(std::vector<Tensor>{output}, inputs, seeds, retain_graph, create_graph, loc);
}

}  // namespace baton
