#include "core/allocator.h"

#include <atomic>
#include <bit>
#include <cstdlib>
#include <mutex>
#include <new>
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

[[noreturn]] void out_of_memory(size_t nbytes, const MemoryStats& stats) {
  const size_t cap = limit.load(std::memory_order_relaxed);
  throw OutOfMemoryError("allocate", str("cannot allocate ", nbytes, " bytes (", double(nbytes) / (1 << 30),
                                         " GiB); baton holds ", stats.bytes_in_use, " bytes in use",
                                         cap ? str(" of the ", cap, " set_memory_limit allows") : ""),
                         SourceLoc::current());
}

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

struct Pool {
  std::mutex mutex;
  std::vector<void*> free_lists[kClasses];
  MemoryStats stats;

  void release_cached() {
    for (int c = 0; c < kClasses; ++c) {
      for (void* p : free_lists[c]) std::free(p);
      stats.bytes_cached -= free_lists[c].size() * class_bytes(c);
      free_lists[c].clear();
    }
  }
};

Pool& pool() {
  static Pool* p = new Pool;  // never destroyed: storages may die during static teardown
  return *p;
}

}  // namespace

size_t size_class(size_t nbytes) { return class_bytes(class_index(nbytes)); }

void* allocate(size_t nbytes) {
  if (nbytes > kMaxBytes) out_of_memory(nbytes, memory_stats());
  int c = class_index(nbytes);
  size_t bytes = class_bytes(c);
  Pool& p = pool();
  std::lock_guard lock(p.mutex);
  if (const size_t cap = limit.load(std::memory_order_relaxed); cap && p.stats.bytes_in_use + bytes > cap)
    out_of_memory(nbytes, p.stats);
  void* ptr = nullptr;
  if (auto& list = p.free_lists[c]; !list.empty()) {
    ptr = list.back();
    list.pop_back();
    p.stats.cache_hits++;
    p.stats.bytes_cached -= bytes;
  } else {
    ptr = std::aligned_alloc(kAlignment, bytes);
    if (!ptr) {  // out of memory: give the cache back and try once more
      p.release_cached();
      ptr = std::aligned_alloc(kAlignment, bytes);
    }
    if (!ptr) out_of_memory(nbytes, p.stats);
  }
  p.stats.allocations++;
  p.stats.bytes_in_use += bytes;
  p.stats.peak_bytes_in_use = std::max(p.stats.peak_bytes_in_use, p.stats.bytes_in_use);
  return ptr;
}

void deallocate(void* ptr, size_t nbytes) {
  if (!ptr) return;
  int c = class_index(nbytes);
  Pool& p = pool();
  std::lock_guard lock(p.mutex);
  p.stats.bytes_in_use -= class_bytes(c);
  p.stats.bytes_cached += class_bytes(c);
  p.free_lists[c].push_back(ptr);
}

}  // namespace baton::detail

namespace baton {

MemoryStats memory_stats() {
  auto& p = detail::pool();
  std::lock_guard lock(p.mutex);
  return p.stats;
}

void reset_peak_memory_stats() {
  auto& p = detail::pool();
  std::lock_guard lock(p.mutex);
  p.stats.peak_bytes_in_use = p.stats.bytes_in_use;
}

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
