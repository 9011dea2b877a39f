// Session: runs a static graph with feeds; one plan per set of fetches.
#include <map>

#include "baton/graph.h"
#include "runtime/plan.h"

namespace baton {

struct Session::Impl {
  std::shared_ptr<trace::Builder> builder;
  std::map<std::pair<std::vector<graph::Value*>, bool>, runtime::Plan> plans;

  graph::Value* fetch_value(const Tensor& t, size_t i, SourceLoc loc) const {
    if (!t.defined() || trace::builder_of(t) != builder.get())
      throw GraphError("Session.run", str("fetch ", i, " is not a tensor of this session's graph"), loc);
    return t.impl()->symbolic->value;
  }

  // The tensor each graph input gets in this run; binds the symbols of placeholders.
  Tensor input_value(const graph::Value* v, const Feeds& feeds, SourceLoc loc) const {
    const trace::InputBinding& bound = builder->binding(v);
    if (bound.kind != trace::InputKind::Placeholder) return bound.tensor;
    const std::string what = str("placeholder '", v->name(), "'");
    for (auto& [placeholder, value] : feeds)
      if (placeholder.impl()->symbolic->value == v) return value;  // bound by run()
    throw ValueError("Session.run", str(what, " (", v->type, ") is not fed"), loc);
  }

  void check_feeds(const Feeds& feeds, SourceLoc loc) const {
    for (size_t i = 0; i < feeds.size(); ++i) {
      const Tensor& p = feeds[i].first;
      const bool ok = p.defined() && trace::builder_of(p) == builder.get() &&
                      !p.impl()->symbolic->value->producer() &&
                      builder->kind(p.impl()->symbolic->value) == trace::InputKind::Placeholder;
      if (!ok) throw ValueError("Session.run", str("feed ", i, " is not a placeholder of this graph"), loc);
    }
  }
};

Session::Session(const Graph& g) : impl_(std::make_unique<Impl>()) {
  impl_->builder = g.builder().shared_from_this();
  graph::verify(impl_->builder->ir());
}
Session::~Session() = default;

std::vector<Tensor> Session::run(const std::vector<Tensor>& fetches, const Feeds& feeds,
                                 RunOptions options, SourceLoc loc) {
  impl_->check_feeds(feeds, loc);
  std::vector<graph::Value*> wanted;
  for (size_t i = 0; i < fetches.size(); ++i) wanted.push_back(impl_->fetch_value(fetches[i], i, loc));
  auto key = std::make_pair(wanted, options.run_updates);
  auto it = impl_->plans.find(key);
  if (it == impl_->plans.end()) {
    std::span<graph::Node* const> updates;
    if (options.run_updates) updates = impl_->builder->effects();
    it = impl_->plans.emplace(key, runtime::make_plan(impl_->builder->ir(), wanted, updates)).first;
  }
  const runtime::Plan& plan = it->second;
  sym::Bindings bindings;  // from every feed, so symbols in attributes resolve too
  for (auto& [placeholder, value] : feeds) {
    const graph::Value* v = placeholder.impl()->symbolic->value;
    runtime::bind_input(*v, value, str("placeholder '", v->name(), "'"), bindings, loc);
  }
  std::vector<Tensor> inputs;
  for (auto& [value, slot] : plan.inputs) inputs.push_back(impl_->input_value(value, feeds, loc));
  return runtime::execute(plan, std::move(inputs), bindings);
}

}  // namespace baton
