// Statistics of the caching allocator that backs every tensor's storage.
#pragma once
#include <cstddef>
#include <cstdint>

namespace baton {

struct MemoryStats {
  size_t bytes_in_use = 0;       // held by live storages (rounded to their size class)
  size_t peak_bytes_in_use = 0;  // highest bytes_in_use since start or the last reset
  size_t bytes_cached = 0;       // freed blocks kept for reuse
  uint64_t allocations = 0;      // requests served
  uint64_t cache_hits = 0;       // requests served from the cache
};

MemoryStats memory_stats();
void reset_peak_memory_stats();
// Returns every cached block to the system, after dropping the kernels' copies of weights
// that are gone (oneDNN layouts of freed or rewritten weights).
void empty_cache();
// Caps the bytes in use that the allocator may reach (0, the default: no cap). A request
// past it throws OutOfMemoryError naming the bytes, as one the machine refuses does: for
// programs that run models they did not write (a 400-byte ONNX file can ask for 4 GiB), and
// the fuzzers.
void set_memory_limit(size_t bytes);
size_t memory_limit();

}  // namespace baton
