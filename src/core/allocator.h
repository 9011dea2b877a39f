// The caching allocator: 64-byte aligned blocks in size classes of a quarter power of
// two (at most 25% slack), kept on per-class free lists when freed. Training loops ask
// for the same sizes every step, so after the first step allocation is a list pop.
#pragma once
#include <cstddef>
#include <functional>

namespace baton::detail {

// Caches above the allocator (a kernel's copies of weights in its own layout) register a
// function that frees what nothing can use any more; empty_cache() calls them first.
void on_empty_cache(std::function<void()> trim);

void* allocate(size_t nbytes);
void deallocate(void* ptr, size_t nbytes);  // nbytes as passed to allocate
size_t size_class(size_t nbytes);

}  // namespace baton::detail
