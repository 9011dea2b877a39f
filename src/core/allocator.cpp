#include "core/allocator.h"

#include <array>
#include <atomic>
#include <bit>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

#include "baton/error.h"
#include "baton/memory.h"

namespace baton::detail {
namespace {

constexpr size_t kAlignment = 64;
constexpr size_t kMinBlock = 256;  // smallest class whose quarters stay 64-byte multiples
constexpr int kClasses = 64 * 4;
// No machine has 2^48 bytes (256 TiB) to give; refusing larger requests up front also keeps
// the size-class arithmetic far from wrapping around.
constexpr size_t kMaxBytes = size_t(1) << 48;

std::atomic<size_t> limit{0};  // set_memory_limit

// Bytes in use, for the limit and the peak: the one counter every allocation writes.
std::atomic<size_t> in_use{0}, peak_in_use{0};

// Class index for a size: 4 classes per power of two.
int class_index(size_t nbytes) {
  nbytes = std::max(nbytes, kMinBlock);
  int k = std::bit_width(nbytes - 1) - 1;  // 2^k < nbytes <= 2^(k+1)
  size_t base = size_t(1) << k;
  size_t quarter = base / 4;
  int q = int((nbytes - base + quarter - 1) / quarter);  // 1..4
  return k * 4 + q - 1;
}

size_t class_bytes(int index) {
  int k = index / 4, q = index % 4 + 1;
  size_t base = size_t(1) << k;
  return base + q * (base / 4);
}

// Requests served, and those served from a cache.
struct Counts {
  uint64_t allocations = 0, hits = 0;
};

// Each thread keeps up to two freed blocks of each class up to 4 MiB for itself (at most
// 54 MiB if it freed every class and asked for none again), so that a thread that frees
// and asks for the same sizes again (a plan's fetched results, run after run; an eager
// op's result) takes no lock. Each slot is an atomic pointer, and whoever exchanges a
// block out of it owns the block: the owner takes and puts blocks without a lock, and
// empty_cache() takes them from any thread. Only the owner writes its counts.
constexpr int kThreadClasses = 22 * 4;  // the classes up to 2^22 bytes
constexpr int kThreadSlots = 2;

struct ThreadCache {
  std::array<std::array<std::atomic<void*>, kThreadSlots>, kThreadClasses> slots{};
  std::atomic<uint64_t> allocations{0}, hits{0};

  void* take(int c) {
    for (std::atomic<void*>& slot : slots[size_t(c)])
      if (slot.load(std::memory_order_relaxed))
        if (void* block = slot.exchange(nullptr, std::memory_order_acquire)) return block;
    return nullptr;
  }
  bool put(int c, void* block) {
    for (std::atomic<void*>& slot : slots[size_t(c)]) {
      void* empty = nullptr;
      if (!slot.load(std::memory_order_relaxed) &&
          slot.compare_exchange_strong(empty, block, std::memory_order_release))
        return true;
    }
    return false;
  }
  void count(bool hit) {  // by the owner only: a load and a store, no read-modify-write
    allocations.store(allocations.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    if (hit) hits.store(hits.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  size_t cached_bytes() const {
    size_t bytes = 0;
    for (int c = 0; c < kThreadClasses; ++c)
      for (const std::atomic<void*>& slot : slots[size_t(c)])
        if (slot.load(std::memory_order_relaxed)) bytes += class_bytes(c);
    return bytes;
  }
  // Hands every block to f(class, block).
  template <class F>
  void drain(F f) {
    for (int c = 0; c < kThreadClasses; ++c)
      for (std::atomic<void*>& slot : slots[size_t(c)])
        if (void* block = slot.exchange(nullptr, std::memory_order_acquire)) f(c, block);
  }
};

// The shared free lists, and the threads' caches (so that empty_cache() and the
// statistics reach them).
struct Pool {
  std::mutex mutex;
  std::vector<void*> free_lists[kClasses];
  size_t list_bytes = 0;
  Counts counts;  // of threads that ended, and of those past their cache
  std::vector<ThreadCache*> thread_caches;

  void push(int c, void* block) {
    free_lists[c].push_back(block);
    list_bytes += class_bytes(c);
  }
  // Under the mutex: every cached block back to the system.
  void release_cached() {
    for (ThreadCache* t : thread_caches) t->drain([](int, void* block) { std::free(block); });
    for (int c = 0; c < kClasses; ++c) {
      for (void* block : free_lists[c]) std::free(block);
      free_lists[c].clear();
    }
    list_bytes = 0;
  }
};

Pool& pool() {
  static Pool* p = new Pool;  // never destroyed: storages may die during static teardown
  return *p;
}

// This thread's cache, made on first use and drained into the shared lists when the thread
// ends; null from then on (a thread's last storages may die after its cache).
thread_local ThreadCache* this_thread = nullptr;
thread_local bool thread_ended = false;

struct ThreadCacheOwner {
  ~ThreadCacheOwner() {
    Pool& p = pool();
    std::lock_guard lock(p.mutex);
    this_thread->drain([&](int c, void* block) { p.push(c, block); });
    p.counts.allocations += this_thread->allocations.load();
    p.counts.hits += this_thread->hits.load();
    std::erase(p.thread_caches, this_thread);
    delete std::exchange(this_thread, nullptr);
    thread_ended = true;
  }
};

ThreadCache* thread_cache() {
  if (this_thread || thread_ended) return this_thread;
  auto made = std::make_unique<ThreadCache>();
  {
    Pool& p = pool();
    std::lock_guard lock(p.mutex);
    p.thread_caches.push_back(made.get());
  }
  this_thread = made.release();
  static thread_local ThreadCacheOwner owner;  // drains and frees it when the thread ends
  return this_thread;
}

[[noreturn]] void out_of_memory(size_t nbytes) {
  const size_t cap = limit.load(std::memory_order_relaxed);
  throw OutOfMemoryError("allocate", str("cannot allocate ", nbytes, " bytes (", double(nbytes) / (1 << 30),
                                         " GiB); baton holds ", in_use.load(), " bytes in use",
                                         cap ? str(" of the ", cap, " set_memory_limit allows") : ""),
                         SourceLoc::current());
}

struct Block {
  void* ptr = nullptr;
  bool cached = false;  // taken from a cache, not from the system
};

// A block of class c from the shared lists, or from the system (nullptr: it has none). A
// thread without a cache counts the request here.
Block shared_block(int c, bool count) {
  Pool& p = pool();
  std::lock_guard lock(p.mutex);
  Block block;
  if (auto& list = p.free_lists[c]; !list.empty()) {
    block = {list.back(), true};
    list.pop_back();
    p.list_bytes -= class_bytes(c);
  } else {
    block.ptr = std::aligned_alloc(kAlignment, class_bytes(c));
    if (!block.ptr) {  // out of memory: give the caches back and try once more
      p.release_cached();
      block.ptr = std::aligned_alloc(kAlignment, class_bytes(c));
    }
  }
  if (count && block.ptr) {
    p.counts.allocations++;
    p.counts.hits += block.cached;
  }
  return block;
}

}  // namespace

size_t size_class(size_t nbytes) { return class_bytes(class_index(nbytes)); }

void* allocate(size_t nbytes) {
  if (nbytes > kMaxBytes) out_of_memory(nbytes);
  const int c = class_index(nbytes);
  const size_t bytes = class_bytes(c);
  const size_t now = in_use.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  if (const size_t cap = limit.load(std::memory_order_relaxed); cap && now > cap) {
    in_use.fetch_sub(bytes, std::memory_order_relaxed);
    out_of_memory(nbytes);
  }
  ThreadCache* t = c < kThreadClasses ? thread_cache() : nullptr;
  Block block;
  if (t) block = {t->take(c), true};
  if (!block.ptr) block = shared_block(c, !t);
  if (!block.ptr) {
    in_use.fetch_sub(bytes, std::memory_order_relaxed);
    out_of_memory(nbytes);
  }
  if (t) t->count(block.cached);
  for (size_t peak = peak_in_use.load(std::memory_order_relaxed);
       now > peak && !peak_in_use.compare_exchange_weak(peak, now, std::memory_order_relaxed);) {
  }
  return block.ptr;
}

void deallocate(void* ptr, size_t nbytes) {
  if (!ptr) return;
  const int c = class_index(nbytes);
  in_use.fetch_sub(class_bytes(c), std::memory_order_relaxed);
  if (ThreadCache* t = c < kThreadClasses ? thread_cache() : nullptr; t && t->put(c, ptr)) return;
  Pool& p = pool();
  std::lock_guard lock(p.mutex);
  p.push(c, ptr);
}

}  // namespace baton::detail

namespace baton {

// A snapshot: exact when no thread allocates meanwhile.
MemoryStats memory_stats() {
  auto& p = detail::pool();
  std::lock_guard lock(p.mutex);
  MemoryStats s{.bytes_in_use = detail::in_use.load(),
                .peak_bytes_in_use = detail::peak_in_use.load(),
                .bytes_cached = p.list_bytes,
                .allocations = p.counts.allocations,
                .cache_hits = p.counts.hits};
  for (const detail::ThreadCache* t : p.thread_caches) {
    s.bytes_cached += t->cached_bytes();
    s.allocations += t->allocations.load(std::memory_order_relaxed);
    s.cache_hits += t->hits.load(std::memory_order_relaxed);
  }
  return s;
}

void reset_peak_memory_stats() { detail::peak_in_use.store(detail::in_use.load()); }

void set_memory_limit(size_t bytes) { detail::limit.store(bytes, std::memory_order_relaxed); }
size_t memory_limit() { return detail::limit.load(std::memory_order_relaxed); }

namespace detail {

std::vector<std::function<void()>>& cache_trimmers() {
  static auto* trimmers = new std::vector<std::function<void()>>;  // registered at static init
  return *trimmers;
}

void on_empty_cache(std::function<void()> trim) { cache_trimmers().push_back(std::move(trim)); }

}  // namespace detail

void empty_cache() {
  for (const auto& trim : detail::cache_trimmers()) trim();
  auto& p = detail::pool();
  std::lock_guard lock(p.mutex);
  p.release_cached();
}

}  // namespace baton
