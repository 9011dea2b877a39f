// The thread pool's lazy start, for the dispatcher, and the floating-point mode every
// kernel thread sets (core/runtime.cpp).
#pragma once
#include <atomic>

namespace baton::detail {

void init_runtime();  // at library load: flush-to-zero here, fork handlers; starts no thread

// Subnormal floats make SIMD loops many times slower (momentum buffers drift there during
// training): every thread that runs kernels flushes them to zero (MXCSR FTZ and DAZ).
void set_flush_to_zero_here();
// Makes every thread of the calling thread's OpenMP team, up to `threads` of them, flush
// subnormals to zero. A new thread inherits its creator's mode, so this matters for a
// team made before its thread set the mode; OpenMP keeps a team's threads, so a parallel
// region runs only the first time the team reaches a size. Running one every time would
// leave the idle threads polling for milliseconds after it (libgomp's GOMP_SPINCOUNT),
// on the cores a plan's helper threads need.
void flush_to_zero_in_team(int threads);

extern std::atomic<bool> pool_started;
void start_threads_slow_path();
// Called before a kernel runs: starts OpenMP's pool (setting flush-to-zero in each thread)
// the first time. One relaxed load when already started.
inline void ensure_threads_started() {
  if (!pool_started.load(std::memory_order_acquire)) [[unlikely]] start_threads_slow_path();
}

}  // namespace baton::detail
