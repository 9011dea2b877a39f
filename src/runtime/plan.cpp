#include "runtime/plan.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "baton/runtime.h"
#include "core/tensor_impl.h"
#include "runtime/published.h"
#include "runtime/step_order.h"

namespace baton::runtime {
namespace {

// Whether n writes in place the elements of a value some node computes (through a view
// of it: Tensor::copy_ into a view while building) that a later needed node reads.
bool writes_wanted_elements(const graph::Node& n, const std::unordered_set<const graph::Value*>& wanted_roots) {
  for (int m : n.op() ? n.op()->mutated_inputs : std::vector<int>{}) {
    const graph::Value* root = size_t(m) < n.num_inputs() ? graph::storage_root(n.input(size_t(m))) : nullptr;
    if (root && root->producer() && wanted_roots.count(root)) return true;
  }
  return false;
}

// Nodes the fetches and effects need, in graph order. A write into a computed value's
// elements is part of computing what later reads them; writes into inputs and variables
// run when forced (Session: fetched, or RunOptions::run_updates).
std::vector<const graph::Node*> needed_nodes(const graph::Graph& g, std::span<graph::Value* const> fetches,
                                             std::span<graph::Node* const> effects) {
  std::unordered_set<const graph::Value*> wanted, wanted_roots;
  auto want = [&](const graph::Value* v) {
    wanted.insert(v);
    wanted_roots.insert(graph::storage_root(v));
  };
  for (const graph::Value* f : fetches) want(f);
  std::unordered_set<const graph::Node*> forced(effects.begin(), effects.end());
  std::vector<const graph::Node*> order;
  for (auto it = g.nodes().rbegin(); it != g.nodes().rend(); ++it) {
    const graph::Node* n = it->get();
    bool need = forced.count(n) > 0 || writes_wanted_elements(*n, wanted_roots);
    for (graph::Value* out : n->outputs()) need = need || wanted.count(out);
    if (!need) continue;
    order.push_back(n);
    for (graph::Value* in : n->inputs()) want(in);
  }
  return {order.rbegin(), order.rend()};
}

// The plan's own copy of g, with the fetches as its outputs, and where the effects and
// the original inputs went.
struct Copy {
  std::shared_ptr<graph::Graph> graph;
  std::vector<graph::Node*> effects;
  std::unordered_map<const graph::Value*, const graph::Value*> original_input;  // copy -> original
};
Copy copy_graph(const graph::Graph& g, std::span<graph::Value* const> fetches,
                std::span<graph::Node* const> effects) {
  Copy c{std::make_shared<graph::Graph>(g.clone()), {}, {}};
  std::unordered_map<const graph::Value*, graph::Value*> value_map;
  std::unordered_map<const graph::Node*, graph::Node*> node_map;
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    value_map[g.input(i)] = c.graph->input(i);
    c.original_input[c.graph->input(i)] = g.input(i);
  }
  for (size_t k = 0; k < g.nodes().size(); ++k) {
    const graph::Node* from = g.nodes()[k].get();
    graph::Node* to = c.graph->nodes()[k].get();
    node_map[from] = to;
    for (size_t i = 0; i < from->num_outputs(); ++i) value_map[from->output(i)] = to->output(i);
  }
  std::vector<graph::Value*> outputs;
  for (graph::Value* f : fetches) outputs.push_back(value_map.at(f));
  c.graph->set_outputs(outputs);
  for (graph::Node* e : effects) c.effects.push_back(node_map.at(e));
  return c;
}

// The symbolic dims the steps depend on (in inputs' shapes, outputs' types and
// attributes), each once: their sizes key a plan's specializations. A size may reach a
// step only through an attribute (x.expand({other.size(0), 5}) with `other` never read).
std::vector<int64_t> plan_symbols(const Plan& plan) {
  std::vector<int64_t> out;
  auto note = [&](int64_t d) {
    if (sym::is_symbol(d) && std::find(out.begin(), out.end(), d) == out.end()) out.push_back(d);
  };
  for (auto& [value, slot] : plan.inputs)
    for (int64_t d : value->shape().raw()) note(d);
  for (const Step& step : plan.steps) {
    for (graph::Value* v : step.node->outputs())
      for (int64_t d : v->shape().raw()) note(d);
    for (auto& [name, value] : step.node->attrs.items()) {
      if (auto* i = std::get_if<int64_t>(&value)) note(*i);
      if (auto* v = std::get_if<std::vector<int64_t>>(&value))
        for (int64_t d : *v) note(d);
    }
  }
  return out;
}

// Remembers a fixed input a pass read (once per storage), with its version now.
void note_fixed_read(Plan& plan, const Tensor& t) {
  const Storage* storage = t.impl()->storage.get();
  for (const Plan::FixedRead& r : plan.fixed_reads)
    if (r.tensor == t.impl()) return;
  plan.fixed_reads.push_back({t.impl(), storage, storage->version()});
}

}  // namespace

namespace {

// A tensor with t's metadata and no storage: what a step that adopted t is bound to.
Tensor metadata_of(const Tensor& t) {
  auto impl = std::make_shared<TensorImpl>();
  impl->dtype = t.dtype();
  impl->shape = t.shape();
  impl->strides = t.strides();
  return Tensor(std::move(impl));
}

}  // namespace

// The specializations made so far. A fully static plan has one, read without a lock once
// made (static_ready); a symbolic plan's are found in a table read without a lock too.
struct Plan::Cache {
  std::mutex mutex;                                   // while the static specialization is built
  std::shared_ptr<const Specialization> static_spec;  // never changed once ready
  std::atomic<bool> static_ready{false};
  // Symbolic plans: at most kMaxSpecializations, found without a lock (runtime/published.h).
  Published<std::vector<std::shared_ptr<const Specialization>>> specs;
  std::atomic<uint64_t> clock{0};
  // Constants released by the first specialization: how to make each plain value again.
  std::unordered_map<int, std::function<Tensor()>> released;

  // After the first specialization is built (under `mutex` or the writers' mutex of `specs`,
  // before any run binds the constants): the values its steps adopted go
  // (PlanOptions::release_adopted_constants).
  void release(const Plan& plan, const Specialization& first) {
    if (!plan.release_adopted_constants) return;
    for (auto& [slot, value] : first.adopted_constants) {
      released.emplace(slot, value);
      for (auto& [tensor, s] : plan.constants)
        if (s == slot) tensor = metadata_of(tensor);
    }
  }
  bool built_one = false;
};

Plan::Plan() : cache_(std::make_unique<Cache>()) {}
Plan::Plan(Plan&&) noexcept = default;
Plan& Plan::operator=(Plan&&) noexcept = default;
Plan::~Plan() = default;

Plan make_plan(const graph::Graph& g, std::span<graph::Value* const> fetches,
               std::span<graph::Node* const> effects, const PlanOptions& options) {
  Plan plan;
  Copy copy = copy_graph(g, fetches, effects);
  graph::Graph& ir = *copy.graph;
  std::unordered_map<const graph::Value*, Tensor> folded;
  passes::Context ctx;
  ctx.inputs.fixed_value = [&](const graph::Value* v) -> const Tensor* {
    if (auto it = folded.find(v); it != folded.end()) return &it->second;
    auto it = copy.original_input.find(v);
    const Tensor* t = it != copy.original_input.end() && options.fixed_value ? options.fixed_value(it->second) : nullptr;
    if (t) note_fixed_read(plan, *t);
    return t;
  };
  ctx.inputs.add_constant = [&](Tensor value, const std::string& name) {
    graph::Value* v = ir.add_input("", trace::type_of(value.dtype(), value.shape()));
    (void)name;
    folded.emplace(v, std::move(value));
    return v;
  };
  plan.pass_log = passes::optimize(ir, options.level, ctx);

  std::unordered_map<const graph::Value*, int> slot;
  auto slot_of = [&](const graph::Value* v) {
    auto [it, fresh] = slot.emplace(v, plan.num_slots);
    if (!fresh) return it->second;
    ++plan.num_slots;
    if (!v->producer()) {
      if (auto f = folded.find(v); f != folded.end()) plan.constants.emplace_back(f->second, it->second);
      else plan.inputs.emplace_back(copy.original_input.at(v), it->second);
    }
    return it->second;
  };
  const StepOrder order = order_for_memory(needed_nodes(ir, ir.outputs(), copy.effects), ir.outputs());
  plan.program_peak_bytes = order.program_peak_bytes;
  plan.ordered_peak_bytes = order.chosen_peak_bytes;
  for (const graph::Node* n : order.nodes) {
    Step step{n, {}, {}, {}};
    for (graph::Value* in : n->inputs()) step.inputs.push_back(slot_of(in));
    for (graph::Value* out : n->outputs()) step.outputs.push_back(slot_of(out));
    for (auto& sub : n->subgraphs) {  // a subgraph runs whole, its updates included
      std::vector<graph::Node*> updates;
      for (auto& node : sub->nodes())
        if (node->op() && !node->op()->mutated_inputs.empty()) updates.push_back(node.get());
      PlanOptions sub_options{.level = options.level, .fixed_value = nullptr,
                              .intra_op_threads = options.intra_op_threads};
      step.subplans.push_back(std::make_shared<Plan>(make_plan(*sub, sub->outputs(), updates, sub_options)));
    }
    plan.steps.push_back(std::move(step));
  }
  for (graph::Value* f : ir.outputs()) plan.fetches.push_back(slot_of(f));
  plan.graph = std::move(copy.graph);
  plan.symbols = plan_symbols(plan);
  plan.staged = std::any_of(plan.steps.begin(), plan.steps.end(),
                            [](const Step& step) { return step.node->op() && step.node->op()->sized_by_values; });
  plan.inter_op_threads = std::max<size_t>(options.inter_op_threads, 1);
  plan.intra_op_threads = std::max(options.intra_op_threads, 0);
  plan.plan_layouts = options.level == passes::Level::O2;
  plan.release_adopted_constants = options.release_adopted_constants;
  return plan;
}

int Plan::kernel_threads(size_t workers) const {
  return intra_op_threads > 0 ? intra_op_threads * int(std::max<size_t>(workers, 1)) : get_num_threads();
}

std::string Plan::stale_reason() const {
  for (const FixedRead& r : fixed_reads) {
    const Storage* now = r.tensor->storage.get();
    if (now != r.storage) return str("a frozen tensor ", r.tensor->dtype, r.tensor->shape, " was given other storage");
    if (now->version() != r.version)
      return str("a frozen tensor ", r.tensor->dtype, r.tensor->shape, " was written in place (version ", r.version,
                 " -> ", now->version(), ")");
  }
  return {};
}

namespace {

// The size of dim d under `bindings`, or -1 while one of its symbols is unbound.
int64_t size_or_unbound(const sym::Bindings& bindings, int64_t d) {
  if (!sym::is_symbol(d)) return d;
  for (int64_t s : sym::factors(d).symbols)
    if (!bindings.lookup(s)) return -1;
  return bindings.eval(d);
}

}  // namespace

std::vector<int64_t> specialization_key(const Plan& plan, const sym::Bindings& bindings, size_t begin) {
  std::vector<int64_t> key{int64_t(begin)};
  for (int64_t s : plan.symbols) key.push_back(plan.staged ? size_or_unbound(bindings, s) : bindings.eval(s));
  return key;
}

std::shared_ptr<const Specialization> Plan::specialize(const sym::Bindings& bindings,
                                                       const Specialization* before) const {
  Cache& c = *cache_;
  if (symbols.empty() && !staged) {
    if (c.static_ready.load(std::memory_order_acquire)) return c.static_spec;
    std::lock_guard lock(c.mutex);
    if (!c.static_spec) {
      c.static_spec = build_specialization(*this, bindings);
      if (!std::exchange(c.built_one, true)) c.release(*this, *c.static_spec);
      c.static_ready.store(true, std::memory_order_release);
    }
    return c.static_spec;
  }
  using Specializations = std::vector<std::shared_ptr<const Specialization>>;
  const std::vector<int64_t> key = specialization_key(*this, bindings, before ? before->end : 0);
  auto find = [&](const Specializations& all) -> std::shared_ptr<const Specialization> {
    for (const auto& s : all)
      if (s->key == key) return s;
    return nullptr;
  };
  std::shared_ptr<const Specialization> spec = c.specs.read(find);
  if (!spec) spec = c.specs.update([&](const Specializations& now, auto& next) {
    if (auto made_meanwhile = find(now)) return made_meanwhile;
    auto made = build_specialization(*this, bindings, true, before);
    if (!std::exchange(c.built_one, true)) c.release(*this, *made);
    Specializations& all = next.edit();
    if (all.size() >= kMaxSpecializations) evict_least_recently_used(all);
    all.push_back(made);
    return made;
  });
  mark_used(*spec, c.clock);
  return spec;
}

Tensor Plan::constant_value(int slot) const {
  for (auto& [tensor, s] : constants)
    if (s == slot && tensor.impl()->storage) return tensor;
  // Released: `released` is written by the first specialization's build only, and read by
  // the builds after it.
  if (auto it = cache_->released.find(slot); it != cache_->released.end()) return it->second();
  return {};
}

std::shared_ptr<const Specialization> Plan::last_specialization() const {
  Cache& c = *cache_;
  if (c.static_ready.load(std::memory_order_acquire)) return c.static_spec;
  return c.specs.inspect([](const auto& all) { return most_recently_used(all); });
}

void bind_input(const graph::Value& input, const Tensor& value, const std::function<std::string()>& what,
                sym::Bindings& bindings, SourceLoc loc, std::string_view op) {
  const Shape declared = input.shape().raw();
  auto mismatch = [&](const std::string& why) {
    throw ShapeError(op, str(what(), " expects ", input.dtype(), declared, ", got ", value.dtype(), value.shape(),
                             ": ", why),
                     loc);
  };
  if (value.dtype() != input.dtype()) mismatch("dtypes differ");
  if (value.dim() != int64_t(declared.size())) mismatch("ranks differ");
  for (size_t d = 0; d < declared.size(); ++d) {
    const int64_t want = declared[d], got = value.shape()[d];
    if (want >= 0 && want != got) mismatch(str("dim ", d, " must be ", want));
    if (want < 0 && !bindings.bind(want, got))
      mismatch(str("dim ", d, " is '", sym::to_string(want), "', already ", *bindings.lookup(want),
                   " in this run"));
  }
  // A product (2*batch, h*w) sizes the one symbol of it that nothing sized yet, and must
  // agree with the symbols sized already. Solving one may let another be solved.
  for (bool solved = true; solved;) {
    solved = false;
    for (size_t d = 0; d < declared.size(); ++d) {
      const int64_t want = declared[d], got = value.shape()[d];
      const sym::Factors f = want < 0 ? sym::factors(want) : sym::Factors{};
      if (f.symbols.size() + (f.coefficient != 1) < 2) continue;  // a size or a plain symbol
      int64_t known = f.coefficient, unknown = 0, unknowns = 0;
      const std::string is = str("dim ", d, " is '", sym::to_string(want), "'");
      for (int64_t s : f.symbols) {
        if (std::optional<int64_t> size = bindings.lookup(s)) {
          if (__builtin_mul_overflow(known, *size, &known)) mismatch(str(is, ": its size passes int64's range"));
        } else {
          unknown = s, ++unknowns;
        }
      }
      if (unknowns == 0 && known != got) mismatch(str(is, ", ", known, " in this run"));
      if (unknowns != 1 || (known == 0 && got == 0)) continue;  // 0 * anything: unknown stays unsized
      if (known == 0 || got % known != 0) mismatch(str(is, ": ", got, " is no multiple of ", known));
      bindings.bind(unknown, got / known);
      solved = true;
    }
  }
}

passes::Level to_pass_level(OptLevel level) {
  switch (level) {
    case OptLevel::O0: return passes::Level::O0;
    case OptLevel::O1: return passes::Level::O1;
    case OptLevel::O2: return passes::Level::O2;
  }
  return passes::Level::O2;
}

std::function<const Tensor*(const graph::Value*)> fixed_constants(const trace::Builder& b, bool freeze) {
  std::unordered_set<const graph::Value*> written;
  for (const graph::Node* n : b.effects())
    for (int i : n->op()->mutated_inputs)
      if (size_t(i) < n->num_inputs()) written.insert(n->input(size_t(i)));
  std::unordered_map<const graph::Value*, Tensor> fixed;
  for (graph::Value* v : b.ir().inputs()) {
    if (b.kind(v) != trace::InputKind::Constant || written.count(v)) continue;
    const Tensor& t = b.binding(v).tensor;
    // The builder's binding is the only handle on it and on its storage: nothing outside
    // the graph can write it. Parameters and optimizer state are held elsewhere too, and
    // are fixed only when frozen (the plan then checks their versions before each run).
    if (freeze || (t.impl_ptr().use_count() == 1 && t.impl()->storage.use_count() == 1)) fixed.emplace(v, t);
  }
  return [fixed = std::move(fixed)](const graph::Value* v) -> const Tensor* {
    auto it = fixed.find(v);
    return it == fixed.end() ? nullptr : &it->second;
  };
}

std::string describe(const graph::Node& n) {
  std::string where = n.loc.known() ? str(" built at ", n.loc.file, ":", n.loc.line) : "";
  return str("graph node '", n.op_name(), "'", where);
}

void rethrow_with_node(const Error& e, const graph::Node& n) {
  const std::string msg = str(e.what(), "; in ", describe(n));
  if (dynamic_cast<const ShapeError*>(&e)) throw ShapeError(msg);
  if (dynamic_cast<const DTypeError*>(&e)) throw DTypeError(msg);
  if (dynamic_cast<const ValueError*>(&e)) throw ValueError(msg);
  if (dynamic_cast<const IndexError*>(&e)) throw IndexError(msg);
  if (dynamic_cast<const GraphError*>(&e)) throw GraphError(msg);
  if (dynamic_cast<const AutogradError*>(&e)) throw AutogradError(msg);
  if (dynamic_cast<const IOError*>(&e)) throw IOError(msg);
  if (dynamic_cast<const OutOfMemoryError*>(&e)) throw OutOfMemoryError(msg);
  throw RuntimeError(msg);
}

}  // namespace baton::runtime
