// A value that every run reads and that changes rarely (a cache of plans), read without a
// lock: readers never block and never wait for a writer.
//
// Writers replace the whole value (copy, change, publish) under a mutex of their own. A
// replaced value is retired, not freed, while a reader may still be looking at it; it goes
// once no reader is inside `read` (seen by a writer, or by the last reader to leave). Every
// access to the two atomics is sequentially consistent, which is what makes that safe: a
// writer that sees no reader after publishing knows every later reader sees the new value.
// Freeing takes the mutex, which a leaving reader only tries: whoever holds it looks for
// readers again after releasing it, so that a reader who left meanwhile, and could not take
// it, leaves nothing retired behind.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace baton::runtime {

template <class T>
class Published {
 public:
  explicit Published(T initial = T()) : current_(new T(std::move(initial))) {}
  Published(const Published&) = delete;
  Published& operator=(const Published&) = delete;
  ~Published() {
    delete current_.load();
    reclaim_retired();
  }

  // f(const T&) on the current value. f may run alongside a writer's update; what it
  // returns must not point into the value (copy out shared_ptrs, not references).
  template <class F>
  auto read(F&& f) const {
    readers_.fetch_add(1);
    struct Leave {
      const Published* self;
      ~Leave() {
        if (self->readers_.fetch_sub(1) == 1 && self->has_retired_.load()) self->try_reclaim();
      }
    } leave{this};
    return f(*current_.load());
  }

  // The next value: a copy of the current one, made when a writer first asks to change it.
  class Draft {
   public:
    explicit Draft(const T& now) : now_(now) {}
    T& edit() {
      if (!copy_) copy_ = std::make_unique<T>(now_);
      return *copy_;
    }

   private:
    friend class Published;
    const T& now_;
    std::unique_ptr<T> copy_;
  };

  // Under the writers' mutex: f(const T& now, Draft& next) returns a result; what it changed
  // through next.edit() is published unless f throws. A writer that finds what it needs
  // (made by another writer meanwhile) changes nothing and publishes nothing.
  template <class F>
  auto update(F&& f) {
    auto result = [&] {
      std::lock_guard lock(writer_);
      const T& now = *current_.load();
      Draft next(now);
      auto changed = f(now, next);
      if (!next.copy_) return changed;
      retired_.reserve(retired_.size() + 1);  // nothing after the exchange may throw
      retired_.emplace_back(current_.exchange(next.copy_.release()));
      has_retired_.store(true);
      return changed;
    }();
    try_reclaim();
    return result;
  }

  // The current value, read under the writers' mutex (for reports: not on a run's path).
  template <class F>
  auto inspect(F&& f) const {
    auto result = [&] {
      std::lock_guard lock(writer_);
      return f(std::as_const(*current_.load()));
    }();
    try_reclaim();  // a reader may have left while this held the mutex
    return result;
  }

 private:
  // Frees the retired values while no reader is inside and nobody else holds the mutex
  // (whoever does looks again after releasing it). A failed look releases the mutex and
  // looks again: a reader may have left meanwhile without taking it. (A test with four
  // readers saw retired values left behind, once in some thousands of runs, when a leaving
  // reader gave up on the mutex that another reader held only to find it inside.)
  void try_reclaim() const {
    while (readers_.load() == 0 && has_retired_.load()) {
      std::unique_lock lock(writer_, std::try_to_lock);
      if (!lock) return;
      if (readers_.load() == 0) reclaim_retired();
    }
  }
  void reclaim_retired() const {
    retired_.clear();
    has_retired_.store(false);
  }

  std::atomic<const T*> current_;
  mutable std::atomic<int> readers_{0};
  mutable std::atomic<bool> has_retired_{false};
  mutable std::mutex writer_;
  mutable std::vector<std::unique_ptr<const T>> retired_;  // under writer_
};

// Caches whose readers cannot reorder their entries (Published) keep "least recently used"
// by stamps: each entry has a member `mutable std::atomic<uint64_t> last_used`, which a
// reader sets from the cache's clock (a relaxed store) when it takes the entry.
template <class Ptr>
Ptr most_recently_used(const std::vector<Ptr>& entries) {
  Ptr best{};
  for (const Ptr& e : entries)
    if (!best || e->last_used.load(std::memory_order_relaxed) > best->last_used.load(std::memory_order_relaxed))
      best = e;
  return best;
}

template <class Ptr>
void evict_least_recently_used(std::vector<Ptr>& entries) {
  auto oldest = entries.begin();
  for (auto it = entries.begin(); it != entries.end(); ++it)
    if ((*it)->last_used.load(std::memory_order_relaxed) < (*oldest)->last_used.load(std::memory_order_relaxed))
      oldest = it;
  if (oldest != entries.end()) entries.erase(oldest);
}

template <class Entry>
void mark_used(const Entry& entry, std::atomic<uint64_t>& clock) {
  entry.last_used.store(clock.fetch_add(1, std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

}  // namespace baton::runtime
