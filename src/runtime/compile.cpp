// compile(): traces a function into a graph once per input signature, plans it, and
// replays the plan on later calls (docs/graph-mode.md).
#include <algorithm>
#include <atomic>
#include <iostream>
#include <shared_mutex>
#include <optional>
#include <unordered_map>

#include "autograd/meta.h"
#include "baton/autograd.h"
#include "baton/graph.h"
#include "runtime/plan.h"
#include "runtime/published.h"
#include "trace/builder.h"
#include "trace/verify.h"
#include "trace/watched_slots.h"

namespace baton {
namespace {

// What a plan was traced for: per input its dtype and shape, with dynamic dims as symbols.
struct Signature {
  std::vector<std::pair<DType, Shape>> inputs;
  bool operator==(const Signature&) const = default;
};

std::string describe(const Signature& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.inputs.size(); ++i)
    out += str(i ? ", " : "", s.inputs[i].first, s.inputs[i].second);
  return out + ")";
}

// A leaf whose gradient the traced function reads or changes, what its plan needs of the
// gradient a call finds, and what the run leaves there. As eagerly, backward() adds to a
// defined .grad() and sets an undefined one, zero_grad() and set_grad() set it, and an
// optimizer step reads it (skipping a parameter without one).
struct GradUse {
  enum class Entry {
    Any,        // the function sets the gradient before anything reads it
    Undefined,  // traced without one (backward() set it, a step skipped the parameter)
    Defined,    // traced with one, which the plan reads (`read_by`) or tested for
  };
  Tensor leaf;
  Entry entry = Entry::Any;
  const graph::Value* read_by = nullptr;  // Defined: the input fed the call's gradient
  DType traced_dtype = f32;               // its dtype and shape when traced
  Shape traced_shape;
  bool changed = false;  // the run leaves the leaf a new gradient (or none)
  int fetch = -1;        // the fetch after the results holding it (-1: none, cleared)
};

struct CachedPlan {
  Signature signature;
  std::shared_ptr<trace::Builder> builder;
  runtime::Plan plan;
  size_t num_outputs = 0;
  std::vector<GradUse> grad_uses;
  // The tensors bound into the graph and whether each required grad when traced: the
  // trace differentiated with respect to those that did (Tensor::backward()).
  std::vector<std::pair<Tensor, bool>> requires_grad_when_traced;
  // Temporaries the function created and updated in place: each run starts from a copy of
  // their value at trace time, as each eager call would start from a fresh tensor.
  std::unordered_map<const graph::Value*, Tensor> fresh_per_run;
  // The run updates state in place (optimizer steps, running statistics) or writes gradients.
  bool writes_state = false;
  // When a call last used it, on the function's clock: the cache evicts the least recently used.
  mutable std::atomic<uint64_t> last_used{0};
};

// What a run feeds the bound input `value` (bound to `tensor` when traced): the call's
// gradient of a leaf the plan adds to, a fresh copy of a temporary the function updates
// in place, else the tensor itself (state read by reference).
Tensor bound_input_now(const CachedPlan& p, const graph::Value* value, const Tensor& tensor) {
  for (const GradUse& w : p.grad_uses)
    if (w.read_by == value) return w.leaf.grad();
  auto fresh = p.fresh_per_run.find(value);
  return fresh == p.fresh_per_run.end() ? tensor : fresh->second.clone();
}

std::string describe_leaf(const Tensor& leaf) { return str("a leaf ", leaf.dtype(), leaf.shape()); }

// Why plan p cannot serve the leaves' gradients as they are now ("" when it can). Reads
// only the gradients the plan depends on: a function that clears them first (the usual
// training step) finds its plan without reading state a run on another thread writes.
std::string gradients_misfit(const CachedPlan& p) {
  for (const GradUse& w : p.grad_uses) {
    if (w.entry == GradUse::Entry::Any) continue;
    const Tensor g = w.leaf.grad();
    if (w.entry == GradUse::Entry::Undefined && g.defined())
      return str("the gradient of ", describe_leaf(w.leaf), " was undefined when traced and is defined now");
    if (w.entry != GradUse::Entry::Defined) continue;
    if (!g.defined())
      return str("the gradient of ", describe_leaf(w.leaf), " was defined when traced and is undefined now");
    if (w.read_by && (g.dtype() != w.traced_dtype || !(g.shape() == w.traced_shape) || !g.is_contiguous()))
      return str("the gradient of ", describe_leaf(w.leaf), " was ", w.traced_dtype, w.traced_shape,
                 " when traced and is ", g.is_contiguous() ? "" : "a strided ", g.dtype(), g.shape(), " now");
  }
  return "";
}

// Why plan p cannot serve a call now ("" when it can): a guard of its trace fails, a
// tensor it reads started or stopped requiring grad, or a gradient it adds to or sets
// is not as traced.
std::string misfit(const CachedPlan& p) {
  for (const trace::Builder::Guard& g : p.builder->guards())
    if (!g.holds()) return g.assumed + " and differs now";
  for (const auto& [t, required] : p.requires_grad_when_traced)
    if (t.requires_grad() != required)
      return str("a tensor ", t.dtype(), t.shape(), " the function reads ", required ? "stopped" : "started",
                 " requiring grad");
  return gradients_misfit(p);
}

// The plans of one compiled function, one per signature and state outside the graph its
// trace depends on (guards, requires_grad, gradients), and what its last trace explained.
struct PlanCache {
  std::vector<std::shared_ptr<const CachedPlan>> plans;
  std::string explanation;
  size_t traces = 0;

  // A plan for signature s that serves the call.
  std::shared_ptr<const CachedPlan> find(const Signature& s) const {
    for (const auto& p : plans)
      if (p->signature == s && misfit(*p).empty()) return p;
    return nullptr;
  }
};
using PlanDraft = runtime::Published<PlanCache>::Draft;

// Constants that nodes update in place and that nothing outside the graph holds: tensors
// the traced function created for itself (a local accumulator), not state like parameters.
std::unordered_map<const graph::Value*, Tensor> temporaries_updated_in_place(const trace::Builder& b) {
  std::unordered_map<const graph::Value*, Tensor> out;
  for (const graph::Node* n : b.effects())
    for (int i : n->op()->mutated_inputs) {
      if (size_t(i) >= n->num_inputs()) continue;
      const graph::Value* v = n->input(size_t(i));
      if (v->producer() || b.kind(v) != trace::InputKind::Constant) continue;
      const Tensor& t = b.binding(v).tensor;
      const bool only_the_graph_holds_it =
          t.impl_ptr().use_count() == 1 && t.impl()->storage.use_count() == 1;
      if (only_the_graph_holds_it) out.emplace(v, t.clone());
    }
  return out;
}

}  // namespace

// Thread safety: calls from several threads find their plan in the cache without a lock
// (runtime/published.h); tracing and planning publish a new cache under its writers' mutex.
// Plans are immutable once made and held by shared_ptr, so an evicted plan lives on until
// the runs using it finish. Runs that write state take `state_mutex` exclusively, pure
// ones share it.
struct CompiledFunction::Impl {
  CompileOptions options;
  runtime::Published<PlanCache> cache;
  std::atomic<uint64_t> clock{0};
  std::shared_mutex state_mutex;

  // The symbol that dim `dim` of input `input` is kept as, if options make it dynamic.
  std::optional<int64_t> dynamic_symbol(size_t input, int64_t dim) const {
    for (const DynamicDim& d : options.dynamic_dims)
      if (d.input == input && d.dim == dim)
        return sym::named(d.name.empty() ? str("s", input, "_", dim) : d.name);
    return std::nullopt;
  }

  Signature signature_of(const std::vector<Tensor>& inputs, SourceLoc loc) const {
    Signature s;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Tensor& t = inputs[i];
      if (!t.defined() || t.is_symbolic())
        throw GraphError(options.name, str("input ", i, " must be a concrete tensor"), loc);
      Shape shape = t.shape();
      for (size_t d = 0; d < shape.size(); ++d)
        if (auto symbol = dynamic_symbol(i, int64_t(d))) shape[d] = *symbol;
      s.inputs.emplace_back(t.dtype(), std::move(shape));
    }
    for (const DynamicDim& d : options.dynamic_dims)
      if (d.input >= inputs.size() || d.dim < 0 || d.dim >= inputs[d.input].dim())
        throw ValueError(options.name, str("dynamic dim {", d.input, ", ", d.dim, "} does not exist: the call has ",
                                           inputs.size(), " inputs", d.input < inputs.size()
                                               ? str(", input ", d.input, " has shape ", inputs[d.input].shape())
                                               : std::string()),
                         loc);
    return s;
  }

  std::string why_retrace(const PlanCache& cache, const Signature& s) const;
  std::shared_ptr<const CachedPlan> trace_or_replan(const PlanCache& now, PlanDraft& next, const Signature& s,
                                                    const std::vector<Tensor>& inputs, const Fn& fn, SourceLoc loc);
  std::shared_ptr<const CachedPlan> trace(const Signature& s, const std::vector<Tensor>& inputs, const Fn& fn,
                                          SourceLoc loc);
  // A gradient the plan reads is fed per call (the leaf's own), never fixed.
  runtime::Plan make_plan(const trace::Builder& b, const std::vector<GradUse>& grad_uses) const {
    auto fixed = [grad_uses, fixed = runtime::fixed_constants(b, options.freeze)](const graph::Value* v) {
      const bool fed = std::any_of(grad_uses.begin(), grad_uses.end(),
                                   [&](const GradUse& w) { return w.read_by == v; });
      return fed ? nullptr : fixed(v);
    };
    return runtime::make_plan(b.ir(), b.ir().outputs(), b.effects(),
                              {.level = runtime::to_pass_level(options.level),
                               .fixed_value = fixed,
                               .inter_op_threads = options.inter_op_threads,
                               .intra_op_threads = options.intra_op_threads,
                               .release_adopted_constants = true});
  }
  // The same trace planned again: a frozen tensor the old plan folded has changed.
  std::shared_ptr<const CachedPlan> replan(const CachedPlan& old) const {
    auto fresh = std::make_shared<CachedPlan>();
    fresh->signature = old.signature;
    fresh->builder = old.builder;
    fresh->plan = make_plan(*old.builder, old.grad_uses);
    fresh->num_outputs = old.num_outputs;
    fresh->grad_uses = old.grad_uses;
    fresh->requires_grad_when_traced = old.requires_grad_when_traced;
    fresh->fresh_per_run = old.fresh_per_run;
    fresh->writes_state = old.writes_state;
    return fresh;
  }
  std::vector<Tensor> run(const CachedPlan& p, const std::vector<Tensor>& inputs, SourceLoc loc);
  static void mark_not_differentiable(const CachedPlan& p, const std::vector<Tensor>& inputs,
                                      std::vector<Tensor>& out, SourceLoc loc);
};

// Compared with the most recently used plan: every input and dim that changed.
std::string CompiledFunction::Impl::why_retrace(const PlanCache& cache, const Signature& s) const {
  if (cache.plans.empty()) return str(options.name, ": first call, traced for ", describe(s));
  const Signature& old = runtime::most_recently_used(cache.plans)->signature;
  const size_t cached = cache.plans.size();
  std::string head = str(options.name, ": retrace #", cache.traces + 1, " (", cached,
                         " cached plan", cached == 1 ? "" : "s", " did not match): ");
  for (const auto& p : cache.plans)
    if (p->signature == s) return head + misfit(*p);
  if (old.inputs.size() != s.inputs.size())
    return head + str("the number of inputs changed from ", old.inputs.size(), " to ", s.inputs.size());
  std::vector<std::string> changes, dynamic;
  for (size_t i = 0; i < s.inputs.size(); ++i) {
    auto& [old_dtype, old_shape] = old.inputs[i];
    auto& [dtype, shape] = s.inputs[i];
    if (old_dtype != dtype) {
      changes.push_back(str("input ", i, " changed dtype from ", old_dtype, " to ", dtype));
    } else if (old_shape.size() != shape.size()) {
      changes.push_back(str("input ", i, " changed rank from ", old_shape.size(), " (", old_shape,
                            ") to ", shape.size(), " (", shape, ")"));
    } else {
      for (size_t d = 0; d < shape.size(); ++d)
        if (old_shape[d] != shape[d]) {
          changes.push_back(str("input ", i, " dim ", d, " changed from ", old_shape[d], " to ",
                                shape[d], " (shape ", old_shape, " -> ", shape, ")"));
          dynamic.push_back(str("{", i, ", ", d, "}"));
        }
    }
  }
  if (changes.empty()) return head + "the signature differs";
  std::string out = head;
  for (size_t k = 0; k < changes.size(); ++k) out += (k ? "; " : "") + changes[k];
  if (!dynamic.empty()) {
    out += "; to share one plan, keep these dims symbolic: CompileOptions{.dynamic_dims = {";
    for (size_t k = 0; k < dynamic.size(); ++k) out += (k ? ", " : "") + dynamic[k];
    out += "}}";
  }
  return out;
}

// Under the cache's writers' mutex: the plan another call made meanwhile, the same trace
// planned again (a frozen tensor the old plan folded has changed), or a new trace.
std::shared_ptr<const CachedPlan> CompiledFunction::Impl::trace_or_replan(const PlanCache& now, PlanDraft& next,
                                                                          const Signature& s,
                                                                          const std::vector<Tensor>& inputs,
                                                                          const Fn& fn, SourceLoc loc) {
  if (std::shared_ptr<const CachedPlan> plan = now.find(s)) {
    std::string why = plan->plan.stale_reason();
    if (why.empty()) return plan;
    std::unique_lock state(state_mutex);  // folding reads the tensors runs may write
    std::shared_ptr<const CachedPlan> fresh = replan(*plan);
    PlanCache& edited = next.edit();
    std::replace(edited.plans.begin(), edited.plans.end(), plan, fresh);
    edited.explanation = "replanned without a retrace: " + why;
    return fresh;
  }
  std::string explanation = why_retrace(now, s);
  if (options.log_retraces) std::cerr << "[baton] " << explanation << '\n';
  std::shared_ptr<const CachedPlan> plan;
  {
    std::unique_lock state(state_mutex);  // the trace reads and restores gradients
    plan = trace(s, inputs, fn, loc);
  }
  PlanCache& edited = next.edit();
  edited.explanation = std::move(explanation);
  ++edited.traces;
  if (edited.plans.size() >= options.max_plans) runtime::evict_least_recently_used(edited.plans);
  edited.plans.push_back(plan);
  return plan;
}

std::shared_ptr<const CachedPlan> CompiledFunction::Impl::trace(const Signature& s, const std::vector<Tensor>& inputs,
                                                                const Fn& fn, SourceLoc loc) {
  auto b = std::make_shared<trace::Builder>(options.name);
  std::vector<Tensor> args;
  for (size_t i = 0; i < inputs.size(); ++i)
    args.push_back(b->placeholder(s.inputs[i].first, s.inputs[i].second, str("x", i)));
  std::vector<Tensor> outputs;
  auto restore_gradients = [&] {
    for (const trace::Builder::GradUse& u : b->grad_uses()) u.leaf.set_grad(u.before);
  };
  try {
    trace::ActiveTrace active(*b);
    outputs = fn(args);
  } catch (...) {
    restore_gradients();
    throw;
  }
  trace::guard_watched_slots(*b);
  // The gradients the trace left are symbolic: the leaves get back those they had, and
  // the first run, like any other, starts from them.
  std::vector<Tensor> traced_grads;
  for (const trace::Builder::GradUse& u : b->grad_uses()) traced_grads.push_back(u.leaf.grad());
  restore_gradients();
  auto made = std::make_shared<CachedPlan>();
  CachedPlan& p = *made;
  p.signature = s;
  p.builder = b;
  p.num_outputs = outputs.size();
  std::vector<graph::Value*> fetches;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].defined())
      throw GraphError(options.name, str("the traced function returned an undefined tensor (result ", i, ")"), loc);
    fetches.push_back(b->value_of(outputs[i], options.name, loc));
  }
  for (size_t k = 0; k < traced_grads.size(); ++k) {
    const trace::Builder::GradUse& traced = b->grad_uses()[k];
    GradUse& w = p.grad_uses.emplace_back(GradUse{.leaf = traced.leaf, .changed = traced.changed});
    if (traced.changed && traced_grads[k].defined()) {
      w.fetch = int(fetches.size() - outputs.size());
      fetches.push_back(b->value_of(traced_grads[k], options.name, loc));
    }
    if (traced.set_first) continue;  // Entry::Any
    if (!traced.before.defined()) {
      w.entry = GradUse::Entry::Undefined;
      continue;
    }
    w.entry = GradUse::Entry::Defined;
    w.read_by = b->bound_value(traced.before);
    w.traced_dtype = traced.before.dtype(), w.traced_shape = traced.before.shape();
  }
  b->ir().set_outputs(fetches);
  trace::verify(b->ir());
  p.plan = make_plan(*b, p.grad_uses);
  p.fresh_per_run = temporaries_updated_in_place(*b);
  for (graph::Value* v : b->ir().inputs())
    if (const trace::InputBinding& bound = b->binding(v); bound.kind != trace::InputKind::Placeholder)
      p.requires_grad_when_traced.emplace_back(bound.tensor, bound.tensor.requires_grad());
  p.writes_state = std::any_of(p.grad_uses.begin(), p.grad_uses.end(), [](const GradUse& w) { return w.changed; }) ||
                   !b->effects().empty();
  return made;
}

std::vector<Tensor> CompiledFunction::Impl::run(const CachedPlan& p, const std::vector<Tensor>& inputs,
                                                SourceLoc loc) {
  sym::Bindings bindings;
  std::vector<Tensor> feed;
  for (const auto& input : p.plan.inputs) {
    const graph::Value* value = input.first;  // not a structured binding: the lambda below captures it
    const trace::InputBinding& bound = p.builder->binding(value);
    if (bound.kind != trace::InputKind::Placeholder) {
      feed.push_back(bound_input_now(p, value, bound.tensor));
      continue;
    }
    const Tensor& t = inputs[size_t(value->output_index())];
    runtime::bind_input(*value, t, [&] { return str("input ", value->output_index()); }, bindings, loc, options.name);
    feed.push_back(t);
  }
  std::unique_lock<std::shared_mutex> exclusive(state_mutex, std::defer_lock);
  std::shared_lock<std::shared_mutex> shared(state_mutex, std::defer_lock);
  if (p.writes_state) exclusive.lock();
  else shared.lock();
  // Gradients the function sets before it reads them are dropped before the run, as
  // eager's zero_grad() drops them: their memory, when nothing else holds it, goes to the
  // new ones, so each run writes the buffers the last one wrote instead of alternating
  // between two sets (docs/graph-mode.md). A run that fails leaves them cleared.
  for (const GradUse& w : p.grad_uses)
    if (w.entry == GradUse::Entry::Any) w.leaf.set_grad(Tensor{});
  std::vector<Tensor> out = runtime::execute(p.plan, std::move(feed), bindings);
  for (const GradUse& w : p.grad_uses)
    if (w.changed) w.leaf.set_grad(w.fetch >= 0 ? out[p.num_outputs + size_t(w.fetch)] : Tensor{});
  out.resize(p.num_outputs);
  if (GradMode::enabled()) mark_not_differentiable(p, inputs, out, loc);
  return out;
}

namespace {

// Stands for a compiled call on the eager tape: its gradient rule explains itself.
const ops::OpDef& compiled_call_op() {
  static const ops::OpDef def = [] {
    ops::OpDef d;
    d.name = "compiled";
    d.grad_rule = [](const ops::GradContext& c) -> ops::Grads {
      throw AutogradError("compiled", "gradients do not flow back through a compiled function's "
                          "results yet: call backward() inside the compiled function (its backward "
                          "then becomes part of the graph)", c.loc);
    };
    return d;
  }();
  return def;
}

}  // namespace

// The plan computed its results without autograd. When an input or a bound tensor
// requires grad, a backward() reaching the results would silently miss them; a tape node
// whose rule throws makes that loud. Results that are an input or state itself are left alone.
void CompiledFunction::Impl::mark_not_differentiable(const CachedPlan& p, const std::vector<Tensor>& inputs,
                                                     std::vector<Tensor>& out, SourceLoc loc) {
  std::vector<Tensor> needing;
  for (const Tensor& t : inputs)
    if (t.requires_grad()) needing.push_back(t);
  const std::vector<graph::Value*> graph_inputs = p.builder->ir().inputs();
  for (graph::Value* v : graph_inputs)
    if (const Tensor& t = p.builder->binding(v).tensor; t.defined() && t.requires_grad()) needing.push_back(t);
  if (needing.empty()) return;
  std::vector<Tensor> fresh;
  for (const Tensor& t : out) {
    bool aliased = false;
    for (graph::Value* v : graph_inputs) aliased = aliased || p.builder->binding(v).tensor.same(t);
    for (const Tensor& in : inputs) aliased = aliased || in.same(t);
    if (!aliased) fresh.push_back(t);
  }
  if (!fresh.empty()) autograd::record(compiled_call_op(), needing, {}, fresh, loc);
}

CompiledFunction::CompiledFunction(CompileOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  if (impl_->options.max_plans == 0) impl_->options.max_plans = 1;
}
CompiledFunction::~CompiledFunction() = default;
CompiledFunction::CompiledFunction(CompiledFunction&&) noexcept = default;

std::vector<Tensor> CompiledFunction::call(const std::vector<Tensor>& inputs, const Fn& fn,
                                           SourceLoc loc) {
  Impl& m = *impl_;
  Signature s = m.signature_of(inputs, loc);
  std::shared_ptr<const CachedPlan> plan = m.cache.read([&](const PlanCache& c) { return c.find(s); });
  if (!plan || plan->plan.is_stale())
    plan = m.cache.update([&](const PlanCache& now, PlanDraft& next) {
      return m.trace_or_replan(now, next, s, inputs, fn, loc);
    });
  runtime::mark_used(*plan, m.clock);
  return m.run(*plan, inputs, loc);
}

std::string CompiledFunction::explain() const {
  return impl_->cache.inspect([](const PlanCache& c) {
    if (c.plans.empty()) return c.explanation;
    return c.explanation + "\n" + runtime::explain(runtime::most_recently_used(c.plans)->plan);
  });
}

MemoryPlan CompiledFunction::memory_plan() const {
  return impl_->cache.inspect([](const PlanCache& c) {
    return c.plans.empty() ? MemoryPlan{} : runtime::memory_plan(runtime::most_recently_used(c.plans)->plan);
  });
}

Graph CompiledFunction::graph() const {
  std::shared_ptr<const CachedPlan> plan =
      impl_->cache.inspect([](const PlanCache& c) { return runtime::most_recently_used(c.plans); });
  if (!plan) throw GraphError(impl_->options.name, "not traced yet: call it first", SourceLoc::current());
  return GraphAccess::wrap(plan->builder);
}

size_t CompiledFunction::num_traces() const {
  return impl_->cache.read([](const PlanCache& c) { return c.traces; });
}
size_t CompiledFunction::num_cached_plans() const {
  return impl_->cache.read([](const PlanCache& c) { return c.plans.size(); });
}

}  // namespace baton
