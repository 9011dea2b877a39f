#include "baton/nn/module.h"

#include <map>
#include <ostream>

#include "baton/autograd.h"
#include "baton/ops.h"
#include "trace/builder.h"
#include "trace/watched_slots.h"

namespace baton::nn {

Module::Module() : watched_(trace::WatchedSlots::make([this] { return describe(); })) {}

Module::~Module() { watched_->owner_gone(); }

std::string Module::describe() const { return "Module"; }

Tensor& Module::register_parameter(const std::string& name, Tensor& slot, Tensor t) {
  slot = std::move(t);
  if (slot.defined() && !slot.requires_grad()) slot.requires_grad_();
  params_.emplace_back(name, &slot);
  watched_->add(name, &slot);
  return slot;
}

Tensor& Module::register_buffer(const std::string& name, Tensor& slot, Tensor t) {
  slot = std::move(t);
  buffers_.emplace_back(name, &slot);
  watched_->add(name, &slot);
  return slot;
}

void Module::collect(const std::string& prefix, bool params, bool buffers, NamedTensors& out) const {
  if (params)
    for (auto& [name, slot] : params_)
      if (slot->defined()) out.emplace_back(prefix + name, *slot);
  if (buffers)
    for (auto& [name, slot] : buffers_)
      if (slot->defined()) out.emplace_back(prefix + name, *slot);
  for (auto& [name, child] : children_) child->collect(prefix + name + ".", params, buffers, out);
}

NamedTensors Module::named_parameters() const {
  NamedTensors out;
  collect("", true, false, out);
  return out;
}

NamedTensors Module::named_buffers() const {
  NamedTensors out;
  collect("", false, true, out);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters()) out.push_back(t);
  return out;
}

NamedTensors Module::state_dict() const {
  NamedTensors out;
  collect("", true, true, out);
  return out;
}

void Module::train(bool on) {
  training_->store(on);
  for (auto& [name, child] : children_) child->train(on);
}

bool Module::is_training() const {
  const bool on = training_->load();
  if (trace::active())
    trace::guard(training_.get(), str("the training flag of ", describe(), " was ", on ? "on" : "off", " when traced"),
                 [flag = training_, on] { return flag->load() == on; });
  return on;
}

void Module::zero_grad(SourceLoc loc) {
  for (Tensor& p : parameters()) p.zero_grad(loc);
}

void Module::check_state_dict(const NamedTensors& state, bool strict) const {
  NamedTensors mine = state_dict();
  std::map<std::string, const Tensor*> targets;
  for (auto& [name, t] : mine) targets.emplace(name, &t);
  std::vector<std::string> problems;
  std::map<std::string, bool> seen;
  for (auto& [name, value] : state) {
    auto it = targets.find(name);
    if (it == targets.end()) {
      if (strict) problems.push_back("unexpected entry '" + name + "'");
      continue;
    }
    if (seen[name]) {
      problems.push_back("duplicate entry '" + name + "'");
      continue;
    }
    seen[name] = true;
    const Tensor& target = *it->second;
    if (!value.defined())
      problems.push_back("'" + name + "' is an undefined tensor in the state");
    else if (!(target.shape() == value.shape()) || target.dtype() != value.dtype())
      problems.push_back(str("'", name, "' is ", value.dtype(), value.shape(), " in the state but ",
                             target.dtype(), target.shape(), " in the module"));
  }
  if (strict)
    for (auto& [name, t] : mine)
      if (!seen.count(name)) problems.push_back("missing entry '" + name + "'");
  if (!problems.empty()) {
    std::string msg = "cannot load the state dict:";
    for (auto& p : problems) msg += "\n  " + p;
    throw ValueError("load_state_dict", msg, SourceLoc::current());
  }
}

void Module::load_state_dict(const NamedTensors& state, bool strict) {
  check_state_dict(state, strict);  // every problem, before anything is written
  NamedTensors mine = state_dict();
  std::map<std::string, Tensor> targets(mine.begin(), mine.end());
  NoGradGuard no_grad;
  for (auto& [name, value] : state)
    if (auto it = targets.find(name); it != targets.end()) it->second.copy_(value);
}

void Module::to(DType dtype) {
  auto convert = [&](Tensor* slot, bool param) {
    if (!slot->defined() || !is_floating(slot->dtype()) || slot->dtype() == dtype) return;
    Tensor converted = slot->detach().to(dtype);
    if (param) converted.requires_grad_();
    *slot = converted;
  };
  for (auto& [name, slot] : params_) convert(slot, true);
  for (auto& [name, slot] : buffers_) convert(slot, false);
  for (auto& [name, child] : children_) child->to(dtype);
}

namespace {

void print_tree(std::ostream& os, const Module& m, int indent) {
  auto children = m.named_children();
  os << m.describe();
  if (children.empty()) return;
  os << "(\n";
  for (auto& [name, child] : children) {
    os << std::string(size_t(indent + 2), ' ') << "(" << name << "): ";
    print_tree(os, *child, indent + 2);
    os << "\n";
  }
  os << std::string(size_t(indent), ' ') << ")";
}

}  // namespace

std::ostream& operator<<(std::ostream& os, const Module& m) {
  print_tree(os, m, 0);
  return os;
}

}  // namespace baton::nn
