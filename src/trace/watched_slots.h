// Tensor slots of long-lived objects, a module's parameters and buffers, that traces
// guard. A trace binds the tensor a slot holds when the function reads it, so a compiled
// plan serves a call only while the slot still holds that tensor: `Module::to()` or
// assigning the member puts another there, and the next call traces again
// (docs/graph-mode.md, "Guards"). Owners register their slots here; compile() asks, when
// a trace ends, which of them hold tensors the trace bound.
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "baton/tensor.h"

namespace baton::trace {

class Builder;

class WatchedSlots {
 public:
  // A new owner's (empty) set of slots, seen by every later trace. `describe_owner` names
  // the owner in a retrace's explanation; it is called only while the owner lives.
  static std::shared_ptr<WatchedSlots> make(std::function<std::string()> describe_owner);

  void add(std::string name, const Tensor* slot);
  // From the owner's destructor: its slots are never read again (plans that bound their
  // tensors keep them and may outlive it).
  void owner_gone();

 private:
  explicit WatchedSlots(std::function<std::string()> describe_owner) : describe_owner_(std::move(describe_owner)) {}
  friend void guard_watched_slots(Builder& b);

  std::function<std::string()> describe_owner_;
  std::vector<std::pair<std::string, const Tensor*>> slots_;
  std::atomic<bool> alive_{true};
};

// A guard on `b` for each watched slot of a living owner that holds a tensor `b` binds:
// the slot still holds it.
void guard_watched_slots(Builder& b);

}  // namespace baton::trace
