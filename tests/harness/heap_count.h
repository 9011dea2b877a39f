// Counting heap allocations: the test binary replaces the global operator new with one
// that counts calls (from every thread) while a count is running. Kernels and plans use
// `new` (containers, make_unique) for whatever they allocate outside the tensor allocator.
#pragma once
#include <cstddef>
#include <functional>

namespace baton::testing {

// The calls of operator new and the bytes they asked for, on any thread, while f runs.
// (Counts threads that allocate at the same moment for other reasons too: only the tests'
// own threads run here.)
struct HeapUse {
  size_t allocations = 0, bytes = 0;
};
HeapUse heap_use_during(const std::function<void()>& f);
inline size_t heap_allocations_during(const std::function<void()>& f) { return heap_use_during(f).allocations; }

}  // namespace baton::testing
