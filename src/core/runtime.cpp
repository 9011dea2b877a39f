// Threads: one OpenMP pool shared with oneDNN, started lazily, flush-to-zero in every
// worker, and a forked child that stays usable.
#include "baton/runtime.h"

#include <omp.h>
#include <pmmintrin.h>
#include <pthread.h>
#include <xmmintrin.h>

#include <atomic>
#include <mutex>

#include "baton/error.h"
#include "core/runtime_internal.h"

namespace baton {
namespace detail {
std::atomic<bool> pool_started{false};

void set_flush_to_zero_here() {
  _MM_SET_FLUSH_ZERO_MODE(_MM_FLUSH_ZERO_ON);
  _MM_SET_DENORMALS_ZERO_MODE(_MM_DENORMALS_ZERO_ON);
}

void flush_to_zero_in_team(int threads) {
  thread_local int widest = 1;  // the calling thread sets its own mode
  if (threads <= widest) return;
#pragma omp parallel num_threads(threads)
  set_flush_to_zero_here();
  widest = threads;
}
}  // namespace detail
namespace {
using detail::pool_started;
using detail::set_flush_to_zero_here;

// Far above any core count, far below what makes OpenMP hang or crash starting threads.
constexpr int kMaxThreads = 1024;

// A child forked after the pool started: OpenMP's pool cannot be rebuilt there (its worker
// threads do not exist in the child, and the first parallel region would wait for them
// forever), so the child runs on the calling thread only, as PyTorch's forked workers do.
bool single_threaded_child = false;
std::mutex start_mutex;

// Starts (or grows) the pool, setting flush-to-zero on each of its threads.
void start_pool() {
  std::lock_guard lock(start_mutex);
  set_flush_to_zero_here();
  detail::flush_to_zero_in_team(omp_get_max_threads());
  pool_started.store(true, std::memory_order_release);
}

void after_fork_in_child() {
  if (!pool_started.load(std::memory_order_relaxed)) return;  // no pool to lose: start one lazily
  single_threaded_child = true;
  omp_set_num_threads(1);
}

}  // namespace

namespace detail {
// Runs when the first op is registered (library load). It starts no thread: a program that
// forks before its first op gets children with a full pool of their own.
void init_runtime() {
  static const bool done = [] {
    set_flush_to_zero_here();
    pthread_atfork(nullptr, nullptr, after_fork_in_child);
    return true;
  }();
  (void)done;
}

void start_threads_slow_path() {
  if (!pool_started.load(std::memory_order_acquire)) start_pool();
}
}  // namespace detail

void set_num_threads(int n) {
  if (n < 1 || n > kMaxThreads)
    throw ValueError("set_num_threads", str("expects 1 to ", kMaxThreads, " threads, got ", n),
                     SourceLoc::current());
  if (single_threaded_child && n > 1)
    throw RuntimeError("set_num_threads",
                       str("cannot use ", n, " threads in a process forked after baton started its "
                           "threads: OpenMP cannot restart its pool in a forked child, which runs on one thread"),
                       SourceLoc::current());
  omp_set_num_threads(n);
  start_pool();
}

int get_num_threads() { return omp_get_max_threads(); }

bool is_single_threaded_fork() { return single_threaded_child; }

}  // namespace baton
