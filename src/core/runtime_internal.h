// The thread pool's lazy start, for the dispatcher, and the floating-point mode every
// kernel thread sets (core/runtime.cpp).
#pragma once
#include <atomic>

namespace baton::detail {

void init_runtime();  // at library load: flush-to-zero here, fork handlers; starts no thread

// Subnormal floats make SIMD loops many times slower (momentum buffers drift there during
// training): every thread that runs kernels flushes them to zero (MXCSR FTZ and DAZ).
void set_flush_to_zero_here();

extern std::atomic<bool> pool_started;
void start_threads_slow_path();
// Called before a kernel runs: starts OpenMP's pool (setting flush-to-zero in each thread)
// the first time. One relaxed load when already started.
inline void ensure_threads_started() {
  if (!pool_started.load(std::memory_order_acquire)) [[unlikely]] start_threads_slow_path();
}

}  // namespace baton::detail
