// Session: runs a static graph with feeds; one plan per set of fetches.
#include <atomic>
#include <shared_mutex>

#include "baton/graph.h"
#include "runtime/plan.h"
#include "runtime/published.h"
#include "trace/verify.h"

namespace baton {
namespace {

std::string placeholder_name(const graph::Value* v) { return str("placeholder '", v->name(), "'"); }

}  // namespace

struct Session::Impl {
  std::shared_ptr<trace::Builder> builder;
  SessionOptions options;

  graph::Value* fetch_value(const Tensor& t, size_t i, SourceLoc loc) const {
    if (!t.defined() || trace::builder_of(t) != builder.get())
      throw GraphError("Session.run", str("fetch ", i, " is not a tensor of this session's graph"), loc);
    return t.impl()->symbolic->value;
  }

  // The tensor each graph input gets in this run; binds the symbols of placeholders.
  Tensor input_value(const graph::Value* v, const Feeds& feeds, SourceLoc loc) const {
    const trace::InputBinding& bound = builder->binding(v);
    if (bound.kind != trace::InputKind::Placeholder) return bound.tensor;
    for (auto& [placeholder, value] : feeds)
      if (placeholder.impl()->symbolic->value == v) return value;  // bound by run()
    throw ValueError("Session.run", str(placeholder_name(v), " (", v->type, ") is not fed"), loc);
  }

  void check_feeds(const Feeds& feeds, SourceLoc loc) const {
    for (size_t i = 0; i < feeds.size(); ++i) {
      const Tensor& p = feeds[i].first;  // not structured bindings: the lambda below captures p
      const Tensor& value = feeds[i].second;
      const bool ok = p.defined() && trace::builder_of(p) == builder.get() &&
                      !p.impl()->symbolic->value->producer() &&
                      builder->kind(p.impl()->symbolic->value) == trace::InputKind::Placeholder;
      if (!ok) throw ValueError("Session.run", str("feed ", i, " is not a placeholder of this graph"), loc);
      // Names are made only for an error: this check runs for every feed of every run.
      auto what = [&] { return placeholder_name(p.impl()->symbolic->value); };
      if (!value.defined())
        throw ValueError("Session.run", str("the value fed to ", what(), " (feed ", i, ") is an undefined tensor"), loc);
      if (value.is_symbolic())
        throw ValueError("Session.run", str("the value fed to ", what(), " (feed ", i, ") is symbolic: feed "
                                            "concrete tensors"), loc);
      for (size_t j = 0; j < i; ++j)
        if (feeds[j].first.same(p))
          throw ValueError("Session.run", str(what(), " is fed twice (feeds ", j, " and ", i, ")"), loc);
    }
  }

  struct PlanEntry {
    std::vector<graph::Value*> fetches;
    bool run_updates;
    std::shared_ptr<const runtime::Plan> plan;
  };
  struct Plans {
    std::vector<PlanEntry> entries;
    std::string replan_reason;  // why the last plan replaced an older one

    // The index of the entry for these fetches; entries.size() when there is none.
    size_t index(const std::vector<graph::Value*>& fetches, bool run_updates) const {
      size_t i = 0;
      while (i < entries.size() && !(entries[i].run_updates == run_updates && entries[i].fetches == fetches)) ++i;
      return i;
    }
    std::shared_ptr<const runtime::Plan> find(const std::vector<graph::Value*>& fetches, bool run_updates) const {
      const size_t i = index(fetches, run_updates);
      return i < entries.size() ? entries[i].plan : nullptr;
    }
  };
  using PlansDraft = runtime::Published<Plans>::Draft;

  // The plan for one set of fetches, made on first use and again when a frozen tensor it
  // folded has changed. A run holds its plan, so a replaced one lives until it ends. Runs
  // find their plan without a lock; only making one takes the writers' mutex.
  std::shared_ptr<const runtime::Plan> plan_for(const std::vector<graph::Value*>& wanted, bool run_updates) {
    std::shared_ptr<const runtime::Plan> plan = plans.read([&](const Plans& p) { return p.find(wanted, run_updates); });
    if (!plan || plan->is_stale()) plan = plans.update([&](const Plans& now, PlansDraft& next) {
      return replan(now, next, wanted, run_updates);
    });
    last_used.store(plan.get(), std::memory_order_relaxed);
    return plan;
  }

  // Under the writers' mutex: the plan another thread made meanwhile, or a new one.
  std::shared_ptr<const runtime::Plan> replan(const Plans& now, PlansDraft& next,
                                              const std::vector<graph::Value*>& wanted, bool run_updates) {
    std::shared_ptr<const runtime::Plan> old = now.find(wanted, run_updates);
    std::string why_stale = old ? old->stale_reason() : "";
    if (old && why_stale.empty()) return old;
    std::span<graph::Node* const> updates;
    if (run_updates) updates = builder->effects();
    runtime::PlanOptions plan_options{.level = runtime::to_pass_level(options.level),
                                      .fixed_value = runtime::fixed_constants(*builder, options.freeze),
                                      .inter_op_threads = options.inter_op_threads,
                                      .intra_op_threads = options.intra_op_threads,
                                      .release_adopted_constants = true};
    auto plan = std::make_shared<const runtime::Plan>(runtime::make_plan(builder->ir(), wanted, updates, plan_options));
    Plans& edited = next.edit();
    if (size_t i = edited.index(wanted, run_updates); i < edited.entries.size()) {
      edited.replan_reason = str("replanned: ", why_stale, "\n");
      edited.entries[i].plan = plan;
    } else {
      edited.entries.push_back(PlanEntry{wanted, run_updates, plan});
    }
    return plan;
  }

  // The plan the last run used (explain(), memory_plan()), with why it was last replanned.
  std::pair<std::shared_ptr<const runtime::Plan>, std::string> last() const {
    return plans.inspect([&](const Plans& p) {
      std::shared_ptr<const runtime::Plan> found;
      for (const PlanEntry& e : p.entries)
        if (e.plan.get() == last_used.load(std::memory_order_relaxed)) found = e.plan;
      return std::make_pair(found, p.replan_reason);
    });
  }

  runtime::Published<Plans> plans;
  std::atomic<const runtime::Plan*> last_used{nullptr};
  // Runs that update variables in place hold it exclusively; the others share it.
  std::shared_mutex state_mutex;
};

Session::Session(const Graph& g, SessionOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->builder = GraphAccess::builder(g).shared_from_this();
  impl_->options = options;
  trace::verify(impl_->builder->ir());
}
Session::~Session() = default;

std::vector<Tensor> Session::run(const std::vector<Tensor>& fetches, const Feeds& feeds,
                                 RunOptions options, SourceLoc loc) {
  impl_->check_feeds(feeds, loc);
  std::vector<graph::Value*> wanted;
  for (size_t i = 0; i < fetches.size(); ++i) wanted.push_back(impl_->fetch_value(fetches[i], i, loc));
  std::shared_ptr<const runtime::Plan> held = impl_->plan_for(wanted, options.run_updates);
  const runtime::Plan& plan = *held;
  sym::Bindings bindings;  // from every feed, so symbols in attributes resolve too
  for (auto& [placeholder, value] : feeds) {
    const graph::Value* v = placeholder.impl()->symbolic->value;
    runtime::bind_input(*v, value, [v] { return placeholder_name(v); }, bindings, loc);
  }
  std::vector<Tensor> inputs;
  for (auto& [value, slot] : plan.inputs) inputs.push_back(impl_->input_value(value, feeds, loc));
  if (options.run_updates) {
    std::unique_lock lock(impl_->state_mutex);
    return runtime::execute(plan, std::move(inputs), bindings);
  }
  std::shared_lock lock(impl_->state_mutex);
  return runtime::execute(plan, std::move(inputs), bindings);
}

std::string Session::explain() const {
  auto [plan, replanned] = impl_->last();
  return plan ? replanned + runtime::explain(*plan) : std::string();
}

MemoryPlan Session::memory_plan() const {
  std::shared_ptr<const runtime::Plan> plan = impl_->last().first;
  return plan ? runtime::memory_plan(*plan) : MemoryPlan{};
}

}  // namespace baton
