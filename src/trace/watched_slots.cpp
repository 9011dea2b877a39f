// The registry of watched tensor slots (trace/watched_slots.h).
#include "trace/watched_slots.h"

#include <algorithm>
#include <mutex>

#include "baton/error.h"
#include "trace/builder.h"

namespace baton::trace {
namespace {

// Every owner's slots, behind one lock: owners register and leave rarely (a module's
// construction and destruction), traces read them once each.
struct Registry {
  std::mutex mu;
  std::vector<std::weak_ptr<WatchedSlots>> owners;
  size_t size_after_pruning = 0;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: modules may outlive static destruction
  return *r;
}

}  // namespace

std::shared_ptr<WatchedSlots> WatchedSlots::make(std::function<std::string()> describe_owner) {
  std::shared_ptr<WatchedSlots> slots(new WatchedSlots(std::move(describe_owner)));
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  if (r.owners.size() >= 2 * r.size_after_pruning + 64) {
    std::erase_if(r.owners, [](const std::weak_ptr<WatchedSlots>& w) { return w.expired(); });
    r.size_after_pruning = r.owners.size();
  }
  r.owners.push_back(slots);
  return slots;
}

void WatchedSlots::add(std::string name, const Tensor* slot) {
  std::lock_guard lock(registry().mu);
  slots_.emplace_back(std::move(name), slot);
}

void WatchedSlots::owner_gone() {
  std::lock_guard lock(registry().mu);  // a trace reading the slots now finishes first
  alive_.store(false, std::memory_order_relaxed);
}

void guard_watched_slots(Builder& b) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  for (const std::weak_ptr<WatchedSlots>& weak : r.owners) {
    const std::shared_ptr<WatchedSlots> owner = weak.lock();
    if (!owner || !owner->alive_.load(std::memory_order_relaxed)) continue;
    for (const auto& [name, slot] : owner->slots_) {
      if (!slot->defined() || !b.bound_value(*slot)) continue;
      // The plan holds the bound tensor, so no other tensor takes its address while the
      // guard lives: comparing addresses is comparing tensors.
      b.add_guard({slot, str(owner->describe_owner_(), ".", name, " held a tensor ", slot->dtype(), slot->shape(),
                             " when traced, which the plan reads,"),
                   [owner, slot, held = slot->impl()] {
                     return !owner->alive_.load(std::memory_order_relaxed) || slot->impl() == held;
                   }});
    }
  }
}

}  // namespace baton::trace
