// Running a plan's step graph on several threads: the calling thread and helpers from one
// process-wide pool of std::threads, made on first use and kept. Helpers are optional: a
// run is correct with whatever number of them joins (none in a forked child, or while
// another run holds them), which keeps nested and concurrent runs free of deadlocks.
#include "runtime/parallel.h"

#include <omp.h>
#include <pmmintrin.h>
#include <pthread.h>
#include <xmmintrin.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "baton/autograd.h"
#include "trace/builder.h"

namespace baton::runtime {

StepGraph StepGraph::from_preds(std::vector<std::vector<int>> preds) {
  StepGraph g;
  const size_t n = preds.size();
  g.num_preds.assign(n, 0);
  g.stage.assign(n, 0);
  g.succ_offsets.assign(n + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    std::sort(preds[i].begin(), preds[i].end());
    preds[i].erase(std::unique(preds[i].begin(), preds[i].end()), preds[i].end());
    g.num_preds[i] = uint32_t(preds[i].size());
    for (int p : preds[i]) ++g.succ_offsets[size_t(p) + 1];
  }
  for (size_t i = 0; i < n; ++i) g.succ_offsets[i + 1] += g.succ_offsets[i];
  g.succ.resize(g.succ_offsets[n]);
  std::vector<uint32_t> fill(g.succ_offsets.begin(), g.succ_offsets.end() - 1);
  for (size_t i = 0; i < n; ++i)
    for (int p : preds[i]) g.succ[fill[size_t(p)]++] = int(i);
  for (size_t i = 0; i < n; ++i) {
    if (g.num_preds[i] == 0) g.sources.push_back(int(i));
    if (g.successors(i).empty()) ++g.num_sinks;
  }
  // Stages in topological order (Kahn): a step comes after every step it waits for.
  std::vector<uint32_t> waiting = g.num_preds;
  std::vector<int> todo = g.sources;
  for (size_t k = 0; k < todo.size(); ++k)
    for (int s : g.successors(size_t(todo[k]))) {
      g.stage[size_t(s)] = std::max(g.stage[size_t(s)], g.stage[size_t(todo[k])] + 1);
      if (--waiting[size_t(s)] == 0) todo.push_back(s);
    }
  if (todo.size() != n) throw std::logic_error("StepGraph: the steps wait for each other in a cycle");
  return g;
}

bool StepGraph::reaches(int from, int to) const {
  std::vector<char> seen(size(), 0);
  std::vector<int> todo{from};
  while (!todo.empty()) {
    int s = todo.back();
    todo.pop_back();
    if (s == to) return true;
    for (int next : successors(size_t(s)))
      if (!seen[size_t(next)]) seen[size_t(next)] = 1, todo.push_back(next);
  }
  return false;
}

StepCounters::StepCounters(const StepGraph& g)
    : arrived(new std::atomic<uint64_t>[g.size()]), last_worker(new std::atomic<uint8_t>[g.size()]) {
  for (size_t i = 0; i < g.size(); ++i) {
    arrived[i].store(0, std::memory_order_relaxed);
    last_worker[i].store(0, std::memory_order_relaxed);
  }
  ready.reserve(g.size());
}

int intra_op_threads_per_worker(int num_threads, size_t workers) {
  return std::max(1, num_threads / int(std::max<size_t>(workers, 1)));
}

namespace {

// How a thread with nothing to do waits: it polls with the pause instruction for a few
// microseconds (the next step is usually that close: another worker is finishing the step
// it needs), then polls yielding its core to any thread that wants it (a kernel's OpenMP
// threads, another process) for a while longer, then sleeps in the kernel. Waking a
// sleeping thread takes tens of microseconds on a virtual machine, as long as a whole run
// of small steps; polling with sched_yield costs a core nothing another thread wants.
struct WaitPolicy {
  std::chrono::microseconds pause, yield;
};
constexpr WaitPolicy kWaitInRun{std::chrono::microseconds(20), std::chrono::microseconds(200)};
constexpr WaitPolicy kWaitBetweenRuns{std::chrono::microseconds(20), std::chrono::microseconds(1000)};

// A counter that threads wait on for "something changed": a waiter polls for a bounded
// time, then sleeps on the counter (a futex); notify() makes a system call only when some
// thread sleeps.
class Signal {
 public:
  uint32_t current() const { return value_.load(std::memory_order_seq_cst); }

  void notify() {
    value_.fetch_add(1, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) value_.notify_all();
  }

  // Returns once the counter differs from `seen` (or spuriously).
  void wait(uint32_t seen, WaitPolicy policy) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 1;; ++i) {
      if (value_.load(std::memory_order_acquire) != seen) return;
      _mm_pause();
      if (i % 64 == 0 && std::chrono::steady_clock::now() - start > policy.pause) break;
    }
    while (std::chrono::steady_clock::now() - start < policy.pause + policy.yield) {
      if (value_.load(std::memory_order_acquire) != seen) return;
      std::this_thread::yield();
    }
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    value_.wait(seen, std::memory_order_seq_cst);
    sleepers_.fetch_sub(1, std::memory_order_seq_cst);
  }

 private:
  std::atomic<uint32_t> value_{0};
  std::atomic<int> sleepers_{0};
};

void set_flush_to_zero_here() {
  _MM_SET_FLUSH_ZERO_MODE(_MM_FLUSH_ZERO_ON);
  _MM_SET_DENORMALS_ZERO_MODE(_MM_DENORMALS_ZERO_ON);
}

// Kernels on this thread use `n` OpenMP threads from now on. OpenMP gives each std::thread
// a team of its own; its threads start with the default floating-point mode, so the first
// time this thread's team grows, every thread of it sets flush-to-zero as the main pool's
// threads do (results must not depend on which thread ran a step). omp_get_max_threads()
// is this thread's setting, so set_num_threads() in between is seen.
void use_intra_op_threads_here(int n) {
  thread_local int widest = 1;
  if (omp_get_max_threads() == n) return;
  omp_set_num_threads(n);
  if (n > widest) {
#pragma omp parallel num_threads(n)
    set_flush_to_zero_here();
    widest = n;
  }
}

// Work a run offers the pool: help() is called by each helper that joins.
class Job {
 public:
  virtual void help() = 0;
  std::atomic<int> helpers{0};  // joined and not yet returned
  int intra_op_threads = 1;     // of each worker

 protected:
  ~Job() = default;
};

class HelperPool {
 public:
  static HelperPool& get() {
    static HelperPool* pool = [] {
      pthread_atfork(nullptr, nullptr, [] { lost_in_fork = true; });
      return new HelperPool;  // never destroyed: its threads are detached and may sleep forever
    }();
    return *pool;
  }

  // Up to `n` helpers may join `job` (each calls job.help()) until retract(job).
  void lend(Job& job, size_t n) {
    if (lost_in_fork || n == 0) return;  // the helpers do not exist in a forked child
    {
      std::lock_guard lock(mutex_);
      while (threads_ < std::min(n, kMaxHelpers)) {
        std::thread(&HelperPool::helper_main, this).detach();
        ++threads_;
      }
      job_ = &job;
      wanted_ = n;
    }
    posted_.notify();
  }

  // No helper joins `job` after this; returns once those that joined have left it.
  void retract(Job& job) {
    if (!lost_in_fork) {
      std::lock_guard lock(mutex_);
      if (job_ == &job) job_ = nullptr, wanted_ = 0;
    }
    for (;;) {
      const uint32_t seen = left_.current();
      if (job.helpers.load(std::memory_order_acquire) == 0) return;
      left_.wait(seen, kWaitInRun);
    }
  }

 private:
  static constexpr size_t kMaxHelpers = 255;
  static inline std::atomic<bool> lost_in_fork{false};

  void helper_main() {
    set_flush_to_zero_here();
    NoGradGuard no_grad;      // as on the calling thread of execute()
    trace::NoTrace no_trace;
    uint32_t seen = posted_.current();
    for (;;) {
      posted_.wait(seen, kWaitBetweenRuns);
      seen = posted_.current();
      if (Job* job = join()) {
        use_intra_op_threads_here(job->intra_op_threads);
        job->help();
        // The job may be gone once the count is down: what wakes its owner is the pool's.
        job->helpers.fetch_sub(1, std::memory_order_acq_rel);
        left_.notify();
      }
    }
  }

  Job* join() {
    std::lock_guard lock(mutex_);
    if (!job_ || wanted_ == 0) return nullptr;
    --wanted_;
    job_->helpers.fetch_add(1, std::memory_order_relaxed);
    return job_;
  }

  std::mutex mutex_;
  Job* job_ = nullptr;
  size_t wanted_ = 0;   // helpers job_ may still take
  size_t threads_ = 0;  // started
  Signal posted_;       // bumped when a job is lent
  Signal left_;         // bumped when a helper leaves a job
};

// One run of a step graph: a queue of ready steps (a worker takes the first in plan order
// of those it ran in the last run, else the first of all), counts of predecessors done,
// and the first failure.
class Scheduler final : public Job {
 public:
  Scheduler(const StepGraph& g, StepCounters& c, StepRunner& runner) : g_(g), c_(c), runner_(runner) {
    run_ = ++c_.runs;
    c_.ready.assign(g.sources.begin(), g.sources.end());
    sinks_left_.store(g.num_sinks, std::memory_order_relaxed);
    queued_.store(uint32_t(c_.ready.size()), std::memory_order_relaxed);
  }

  void help() override { work(next_worker_.fetch_add(1, std::memory_order_relaxed)); }

  // Runs steps until every step is done (by any worker).
  void work(size_t worker) {
    int next = -1;
    for (;;) {
      if (next < 0) {
        const uint32_t seen = signal_.current();  // before looking: a step queued after it wakes us
        next = pop(worker);
        if (next < 0) {
          if (sinks_left_.load(std::memory_order_acquire) == 0) return;
          signal_.wait(seen, kWaitInRun);
          continue;
        }
      }
      execute(next, worker);
      next = complete(next, worker);
    }
  }

  void rethrow_failure() {
    if (error_) std::rethrow_exception(error_);
  }

 private:
  int pop(size_t worker) {
    if (queued_.load(std::memory_order_acquire) == 0) return -1;
    std::lock_guard lock(mutex_);
    std::vector<int>& ready = c_.ready;
    size_t best = ready.size();
    for (size_t k = 0; k < ready.size(); ++k)
      if (best == ready.size() || better_for(worker, ready[k], ready[best])) best = k;
    if (best == ready.size()) return -1;
    const int step = ready[best];
    ready[best] = ready.back();
    ready.pop_back();
    queued_.store(uint32_t(ready.size()), std::memory_order_release);
    return step;
  }

  // Whether `worker` should run step a rather than b: the one it ran last time, then the
  // first in plan order.
  bool better_for(size_t worker, int a, int b) const {
    const bool mine_a = c_.last_worker[size_t(a)].load(std::memory_order_relaxed) == worker;
    const bool mine_b = c_.last_worker[size_t(b)].load(std::memory_order_relaxed) == worker;
    return mine_a != mine_b ? mine_a : a < b;
  }

  void push(std::span<const int> steps) {
    {
      std::lock_guard lock(mutex_);
      c_.ready.insert(c_.ready.end(), steps.begin(), steps.end());
      queued_.store(uint32_t(c_.ready.size()), std::memory_order_release);
    }
    signal_.notify();
  }

  // A step after a failing one (in plan order) is skipped: the sequential executor would
  // not have reached it.
  void execute(int step, size_t worker) {
    if (size_t(step) > failed_at_.load(std::memory_order_acquire)) return;
    std::atomic<uint8_t>& last = c_.last_worker[size_t(step)];
    if (last.load(std::memory_order_relaxed) != worker) last.store(uint8_t(worker), std::memory_order_relaxed);
    try {
      runner_.run_step(size_t(step), worker);
    } catch (...) {
      std::lock_guard lock(mutex_);
      if (size_t(step) < failed_at_.load(std::memory_order_relaxed)) {
        failed_at_.store(size_t(step), std::memory_order_release);
        error_ = std::current_exception();
      }
    }
  }

  // Counts `step` as done; returns a successor it made ready for this worker to run next
  // (the branch stays on one thread), having queued the others.
  int complete(int step, size_t worker) {
    int next = -1;
    int others[16];
    size_t n_others = 0;
    for (int s : g_.successors(size_t(step))) {
      const uint64_t ready_at = run_ * g_.num_preds[size_t(s)];
      if (c_.arrived[size_t(s)].fetch_add(1, std::memory_order_acq_rel) + 1 != ready_at) continue;
      if (next < 0) {
        next = s;
        continue;
      }
      int queued = s;
      if (better_for(worker, s, next)) std::swap(queued, next);
      if (n_others < std::size(others)) others[n_others++] = queued;
      else push({&queued, 1});
    }
    if (n_others) push({others, n_others});
    if (g_.successors(size_t(step)).empty() && sinks_left_.fetch_sub(1, std::memory_order_acq_rel) == 1)
      signal_.notify();  // the run is over
    return next;
  }

  // Each group of fields that one worker writes while others read gets a cache line of
  // its own: a line two cores keep writing moves between them on every write, which cost
  // as much as a small kernel per step.
  const StepGraph& g_;
  StepCounters& c_;
  StepRunner& runner_;
  uint64_t run_ = 0;                         // c_.runs of this run
  std::atomic<size_t> next_worker_{1};       // the id the next helper gets
  alignas(64) std::mutex mutex_;     // the queue and the failure
  std::atomic<uint32_t> queued_{0};  // c_.ready.size(), read without the lock
  std::exception_ptr error_;
  // The run is over when every step nothing waits for is done: each of the others comes
  // before one of them, so it ran too (and counting only these keeps the count quiet).
  alignas(64) std::atomic<size_t> sinks_left_{0};
  alignas(64) std::atomic<size_t> failed_at_{SIZE_MAX};  // written only on failure
  alignas(64) Signal signal_;  // a step was queued, or the run is over
};

// The calling thread's OpenMP threads come back after a run.
class RestoreIntraOpThreads {
 public:
  RestoreIntraOpThreads() : previous_(omp_get_max_threads()) {}
  ~RestoreIntraOpThreads() { use_intra_op_threads_here(previous_); }
  RestoreIntraOpThreads(const RestoreIntraOpThreads&) = delete;
  RestoreIntraOpThreads& operator=(const RestoreIntraOpThreads&) = delete;

 private:
  int previous_;
};

}  // namespace

void run_steps(const StepGraph& graph, StepCounters& counters, size_t workers, int num_threads, StepRunner& runner) {
  Scheduler run(graph, counters, runner);
  run.intra_op_threads = intra_op_threads_per_worker(num_threads, workers);
  {
    RestoreIntraOpThreads restore;
    use_intra_op_threads_here(run.intra_op_threads);
    HelperPool& pool = HelperPool::get();
    pool.lend(run, workers - 1);
    run.work(0);
    pool.retract(run);
  }
  run.rethrow_failure();
}

}  // namespace baton::runtime
