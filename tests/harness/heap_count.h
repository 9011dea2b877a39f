// Counting heap allocations: the test binary replaces the global operator new with one
// that counts calls (from every thread) while a count is running. Kernels and plans use
// `new` (containers, make_unique) for whatever they allocate outside the tensor allocator.
#pragma once
#include <cstddef>
#include <functional>

namespace baton::testing {

// The calls of operator new, on any thread, while f runs. (Counts from threads that
// allocate at the same moment for other reasons too: only the tests' own threads run here.)
size_t heap_allocations_during(const std::function<void()>& f);

}  // namespace baton::testing
