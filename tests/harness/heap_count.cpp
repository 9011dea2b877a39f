// The test binary's operator new: malloc, counted while heap_use_during runs.
// Every form without an alignment is replaced, new and delete alike, so that each pair
// meets in malloc and free (AddressSanitizer's own nothrow new would otherwise meet this
// delete); the aligned forms stay the library's, pairing among themselves.
#include "harness/heap_count.h"

#include <atomic>
#include <cstdlib>
#include <new>

namespace {

std::atomic<bool> counting{false};
std::atomic<size_t> allocations{0}, allocated_bytes{0};

void* counted_malloc(size_t bytes) noexcept {
  if (counting.load(std::memory_order_relaxed)) {
    allocations.fetch_add(1, std::memory_order_relaxed);
    allocated_bytes.fetch_add(bytes, std::memory_order_relaxed);
  }
  return std::malloc(bytes ? bytes : 1);
}

void* counted_or_throw(size_t bytes) {
  if (void* p = counted_malloc(bytes)) return p;
  throw std::bad_alloc();
}

}  // namespace

void* operator new(size_t bytes) { return counted_or_throw(bytes); }
void* operator new[](size_t bytes) { return counted_or_throw(bytes); }
void* operator new(size_t bytes, const std::nothrow_t&) noexcept { return counted_malloc(bytes); }
void* operator new[](size_t bytes, const std::nothrow_t&) noexcept { return counted_malloc(bytes); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace baton::testing {

HeapUse heap_use_during(const std::function<void()>& f) {
  allocations.store(0), allocated_bytes.store(0);
  counting.store(true);
  f();
  counting.store(false);
  return {allocations.load(), allocated_bytes.load()};
}

}  // namespace baton::testing
