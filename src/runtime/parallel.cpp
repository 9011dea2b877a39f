// Running a plan's step graph on several threads: the calling thread and helpers from one
// process-wide pool of std::threads, made on first use and kept. Helpers are optional: a
// run is correct with whatever number of them joins (none in a forked child, or while
// another run holds them), which keeps nested and concurrent runs free of deadlocks.
#include "runtime/parallel.h"

#include <pthread.h>
#include <xmmintrin.h>  // _mm_pause

#include <algorithm>
#include <chrono>
#include <exception>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <thread>

#include "baton/autograd.h"
#include "core/runtime_internal.h"
#include "kernels/cpu/threads.h"
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
  for (size_t i = 0; i < n; ++i)
    if (g.num_preds[i] == 0) g.sources.push_back(int(i));
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

void flatten(const std::vector<std::vector<int>>& per_step, std::vector<uint32_t>& offsets, std::vector<int>& items) {
  offsets.assign(1, 0);
  items.clear();
  for (const std::vector<int>& of_step : per_step) {
    items.insert(items.end(), of_step.begin(), of_step.end());
    offsets.push_back(uint32_t(items.size()));
  }
}

StepLists StepLists::make(const StepGraph& g, const std::vector<int>& order, const std::vector<uint8_t>& list_of,
                          size_t lists) {
  StepLists l;
  const size_t n = g.size();
  l.list_of = list_of;
  l.position.assign(n, 0);
  for (size_t k = 0; k < order.size(); ++k) l.position[size_t(order[k])] = uint32_t(k);
  l.offsets.assign(lists + 1, 0);
  for (int s : order) ++l.offsets[size_t(list_of[size_t(s)]) + 1];
  for (size_t k = 0; k < lists; ++k) l.offsets[k + 1] += l.offsets[k];
  l.steps.resize(n);
  std::vector<uint32_t> fill(l.offsets.begin(), l.offsets.end() - 1);
  for (int s : order) l.steps[fill[list_of[size_t(s)]]++] = s;
  std::vector<std::vector<int>> preds(n), succs(n);
  for (size_t p = 0; p < n; ++p)
    for (int s : g.successors(p))
      if (list_of[p] != list_of[size_t(s)]) preds[size_t(s)].push_back(int(p)), succs[p].push_back(s);
  l.counter_of.assign(n, -1);
  flatten(preds, l.remote_pred_offsets, l.remote_preds);
  flatten(succs, l.remote_succ_offsets, l.remote_succs);
  for (size_t s = 0; s < n; ++s)
    if (!preds[s].empty()) l.counter_of[s] = int(l.arrivals.size()), l.arrivals.push_back(uint32_t(preds[s].size()));
  l.drop_segments();  // until find_segments() is asked for them
  return l;
}

void StepLists::drop_segments() {
  segment_begin.clear(), segment_end.clear();
  list_segment_offsets.assign(size() + 1, 0);
  segment_counter_offsets.assign(1, 0), segment_counters.clear();
  segment_of.assign(steps.size(), -1);
  segment_dep_offsets.assign(steps.size() + 1, 0), segment_deps.clear();
}

void StepLists::find_segments(const StepGraph& g, const std::function<bool(std::span<const int>)>& worth) {
  const size_t n = g.size();
  std::vector<uint32_t> at(n);  // each step's index in `steps`
  for (uint32_t k = 0; k < steps.size(); ++k) at[size_t(steps[k])] = k;
  constexpr uint32_t kNone = UINT32_MAX;
  std::vector<uint32_t> earliest_pred(n, kNone);  // the earliest step of its own list it waits for
  for (size_t p = 0; p < n; ++p)
    for (int s : g.successors(p))
      if (list_of[p] == list_of[size_t(s)]) earliest_pred[size_t(s)] = std::min(earliest_pred[size_t(s)], at[p]);
  drop_segments();
  auto close = [&](uint32_t begin, uint32_t end) {
    if (begin == kNone || !worth({steps.data() + begin, steps.data() + end})) return;
    for (uint32_t k = begin; k < end; ++k) segment_of[size_t(steps[k])] = int(segment_begin.size());
    segment_begin.push_back(begin), segment_end.push_back(end);
  };
  // A step that waits for no earlier step of its list starts a segment; the steps after it
  // that wait only for steps since then extend it; any other step ends it.
  for (size_t l = 0; l < size(); ++l) {
    uint32_t begin = kNone;
    for (uint32_t k = offsets[l]; k < offsets[l + 1]; ++k) {
      const uint32_t e = earliest_pred[size_t(steps[k])];
      if (e == kNone) {
        close(begin, k);
        begin = k;
      } else if (begin == kNone || e < begin) {
        close(begin, k);
        begin = kNone;
      }
    }
    close(begin, offsets[l + 1]);
    list_segment_offsets[l + 1] = uint32_t(segment_begin.size());
  }
  std::vector<std::vector<int>> counters(segments()), deps(n);
  for (size_t seg = 0; seg < segments(); ++seg)
    for (uint32_t k = segment_begin[seg]; k < segment_end[seg]; ++k)
      if (counter_of[size_t(steps[k])] >= 0) counters[seg].push_back(counter_of[size_t(steps[k])]);
  for (size_t p = 0; p < n; ++p)
    for (int s : g.successors(p)) {
      const int seg = segment_of[p];
      std::vector<int>& d = deps[size_t(s)];
      if (seg >= 0 && seg != segment_of[size_t(s)] && list_of[p] == list_of[size_t(s)] &&
          std::find(d.begin(), d.end(), seg) == d.end())
        d.push_back(seg);
    }
  flatten(counters, segment_counter_offsets, segment_counters);
  flatten(deps, segment_dep_offsets, segment_deps);
}

size_t StepLists::non_empty() const {
  size_t count = 0;
  for (size_t k = 0; k < size(); ++k) count += offsets[k + 1] > offsets[k];
  return count;
}

StepCounters::StepCounters(const StepLists& lists)
    : arrived(new Counter[std::max<size_t>(lists.arrivals.size(), 1)]),
      claimed(new Counter[lists.size()]),
      segment_claim(new Counter[std::max<size_t>(lists.segments(), 1)]),
      segment_done(new Counter[std::max<size_t>(lists.segments(), 1)]) {}

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

// Work a run offers the pool: help() is called by each helper that joins.
class Job {
 public:
  virtual void help() = 0;
  std::atomic<uint32_t> left{0};  // helpers that joined and have returned from help()
  int intra_op_threads = 1;       // of each worker

 protected:
  ~Job() = default;
};

// One job on offer at a time, held in one atomic word with how many more helpers may join
// it and how many did: lending, joining and withdrawing are each one atomic operation on
// that word, so a run takes no lock to share its work. Another run that lends while a job
// is on offer runs alone (helpers are optional).
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
    n = std::min(n, kMaxHelpers);
    if (lost_in_fork || n == 0) return;  // the helpers do not exist in a forked child
    if (uintptr_t(&job) >> 48) return;   // an address the offer's word cannot hold: run alone
    if (threads_.load(std::memory_order_acquire) < n) start_threads(n);
    uint64_t none = 0;
    if (offer_.compare_exchange_strong(none, Offer{&job, n, 0}.word(), std::memory_order_acq_rel)) posted_.notify();
  }

  // No helper joins `job` after this; returns once those that joined have left it.
  void retract(Job& job) {
    uint64_t word = offer_.load(std::memory_order_acquire);
    while (Offer::of(word).job == &job && !offer_.compare_exchange_weak(word, 0, std::memory_order_acq_rel)) {}
    const size_t joined = Offer::of(word).job == &job ? Offer::of(word).joined : 0;
    for (;;) {
      const uint32_t seen = left_.current();
      if (job.left.load(std::memory_order_acquire) == joined) return;
      left_.wait(seen, kWaitInRun);
    }
  }

 private:
  static constexpr size_t kMaxHelpers = 255;
  static inline std::atomic<bool> lost_in_fork{false};

  // [job address: 48 bits | helpers that may still join: 8 | helpers that joined: 8].
  struct Offer {
    Job* job;
    size_t wanted, joined;
    uint64_t word() const { return uint64_t(reinterpret_cast<uintptr_t>(job)) << 16 | wanted << 8 | joined; }
    static Offer of(uint64_t w) { return {reinterpret_cast<Job*>(uintptr_t(w >> 16)), (w >> 8) & 0xff, w & 0xff}; }
  };

  void start_threads(size_t n) {
    std::lock_guard lock(start_mutex_);  // only while the pool grows: the first wide runs
    // A new helper waits for the counter to move past its value now, before lend() posts
    // the job it was started for: read on the thread, after that post, the run that
    // started it (a process's first wide run) ran alone.
    for (size_t started = threads_.load(std::memory_order_relaxed); started < n; ++started) {
      std::thread(&HelperPool::helper_main, this, posted_.current()).detach();
      threads_.store(started + 1, std::memory_order_release);
    }
  }

  void helper_main(uint32_t seen) {
    detail::set_flush_to_zero_here();
    NoGradGuard no_grad;      // as on the calling thread of execute()
    trace::NoTrace no_trace;
    for (;;) {
      posted_.wait(seen, kWaitBetweenRuns);
      seen = posted_.current();
      if (Job* job = join()) {
        kernels::use_threads_here(job->intra_op_threads);
        job->help();
        // The job may be gone once the count is up: what wakes its owner is the pool's.
        job->left.fetch_add(1, std::memory_order_acq_rel);
        left_.notify();
      }
    }
  }

  // Joining counts this helper in the offer itself, so the owner's retract sees it.
  Job* join() {
    uint64_t word = offer_.load(std::memory_order_acquire);
    for (;;) {
      const Offer o = Offer::of(word);
      if (!o.job || o.wanted == 0) return nullptr;
      if (offer_.compare_exchange_weak(word, Offer{o.job, o.wanted - 1, o.joined + 1}.word(),
                                       std::memory_order_acq_rel))
        return o.job;
    }
  }

  std::atomic<uint64_t> offer_{0};
  std::atomic<size_t> threads_{0};  // started
  std::mutex start_mutex_;
  Signal posted_;  // bumped when a job is lent
  Signal left_;    // bumped when a helper leaves a job
};

// One run of a schedule's lists: which lists threads took, and the first failure.
class ListRun final : public Job {
 public:
  ListRun(const StepLists& lists, StepCounters& c, StepRunner& runner) : lists_(lists), c_(c), runner_(runner) {
    run_ = ++c_.runs;
    lists_left_.store(lists.non_empty(), std::memory_order_relaxed);
  }

  void help() override {
    const size_t worker = next_worker_.fetch_add(1, std::memory_order_relaxed);
    const std::optional<size_t> first = take_any();
    retake_last_runs_segments(worker);
    if (first) work(worker, *first);
    take_lists(worker);
    while (lists_left_.load(std::memory_order_acquire) > 0 && steal(worker, {})) {}
  }

  // The calling thread takes its list before helpers may join: list 0, which the
  // assignment gave the work that starts at once (runtime/step_assignment.h).
  std::optional<size_t> take_first() { return take_any(); }

  // The calling thread: the segments it took first last time, its list, lists as long as
  // some are left untaken, then the end of the others (segments of theirs it can take
  // meanwhile).
  void run_as_caller(std::optional<size_t> first) {
    retake_last_runs_segments(0);
    if (first) work(0, *first);
    take_lists(0);
    for (;;) {
      const uint32_t seen = signal_.current();
      // A list is done once its thread has passed its last step; a segment taken from it
      // may still be running (counted before it is claimed, so never missed here).
      if (lists_left_.load(std::memory_order_acquire) == 0 && segments_running_.load(std::memory_order_acquire) == 0)
        return;
      if (steal(0, {})) continue;
      signal_.wait(seen, kWaitInRun);
    }
  }

  void rethrow_failure() {
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void take_lists(size_t worker) {
    while (std::optional<size_t> list = take_any()) work(worker, *list);
  }

  bool take(size_t list) {
    std::atomic<uint64_t>& claimed = c_.claimed[list].value;
    uint64_t before = claimed.load(std::memory_order_relaxed);
    return before != run_ && claimed.compare_exchange_strong(before, run_, std::memory_order_acq_rel);
  }

  std::optional<size_t> take_any() {
    for (size_t l = 0; l < lists_.size(); ++l)
      if (!lists_.list(l).empty() && take(l)) return l;
    return std::nullopt;
  }

  // A list's steps still to run by the thread that took it: steps[next, end).
  struct Cursor {
    uint32_t next, end;
  };

  // Runs the steps of `first` and of the lists it takes on the way, in the common order,
  // but for the segments other threads took from them.
  void work(size_t worker, size_t first) {
    std::vector<Cursor> mine{{lists_.offsets[first], lists_.offsets[first + 1]}};
    for (;;) {
      Cursor* cursor = nullptr;
      for (Cursor& k : mine)
        if (k.next < k.end && (!cursor || lists_.position[size_t(lists_.steps[k.next])] <
                                              lists_.position[size_t(lists_.steps[cursor->next])]))
          cursor = &k;
      if (!cursor) return;
      const int step = lists_.steps[cursor->next];
      if (const int seg = lists_.segment_of[size_t(step)];
          seg >= 0 && lists_.segment_begin[size_t(seg)] == cursor->next &&
          (!claim(size_t(seg), worker) || taken_and_done(size_t(seg)))) {
        cursor->next = lists_.segment_end[size_t(seg)];  // another thread runs it, or this one ran it
        if (cursor->next == cursor->end) list_done();
        continue;
      }
      if (std::optional<size_t> taken = wait_for_other_lists(step, worker, mine)) {
        mine.push_back({lists_.offsets[*taken], lists_.offsets[*taken + 1]});
        continue;
      }
      wait_for_taken_segments(step, worker);
      execute(step, worker);
      arrive(step);
      if (++cursor->next == cursor->end) list_done();
    }
  }

  // Counts `step` as done for the steps on other lists that wait for it.
  void arrive(int step) {
    for (int s : lists_.succs_elsewhere(size_t(step)))
      c_.arrived[size_t(lists_.counter_of[size_t(s)])].value.fetch_add(1, std::memory_order_acq_rel);
    if (!lists_.succs_elsewhere(size_t(step)).empty()) signal_.notify();
  }

  void list_done() {
    lists_left_.fetch_sub(1, std::memory_order_acq_rel);
    signal_.notify();
  }

  // Returns once `step`'s predecessors on other lists are done, or with a list this thread
  // took because one of them is on it and no thread had taken it. Meanwhile the thread
  // runs segments it can take from other threads' lists.
  std::optional<size_t> wait_for_other_lists(int step, size_t worker, std::span<const Cursor> mine) {
    const int counter = lists_.counter_of[size_t(step)];
    if (counter < 0) return std::nullopt;
    for (;;) {
      const uint32_t seen = signal_.current();  // before looking: an arrival after it wakes us
      if (arrived(counter)) return std::nullopt;
      for (int p : lists_.preds_elsewhere(size_t(step)))
        if (take(lists_.list_of[size_t(p)])) return lists_.list_of[size_t(p)];
      if (steal(worker, mine)) continue;
      signal_.wait(seen, kWaitInRun);
    }
  }

  bool arrived(int counter) const {
    return c_.arrived[size_t(counter)].value.load(std::memory_order_acquire) >=
           run_ * lists_.arrivals[size_t(counter)];
  }

  // --- stealing: a thread with nothing to do runs a segment of a list another thread has.
  // Each segment is claimed once a run, by its list's thread when it reaches it or by a
  // thief before; the claim holds run * 256 + the claiming worker. A thief takes only a
  // segment whose waits on other lists are all met (it never waits while it holds one, so
  // the list's thread, which waits for the segment's steps where its later steps need
  // them, always sees it finish), the last such of its list: the list's thread would
  // reach it last.

  // A claim or done mark: the run and the worker, run * kWorkersPerRun + worker.
  static constexpr uint64_t kWorkersPerRun = 256;
  uint64_t claim_of(size_t worker) const { return run_ * kWorkersPerRun + worker; }
  bool claimed_this_run(size_t seg) const {
    return c_.segment_claim[seg].value.load(std::memory_order_acquire) >= claim_of(0);
  }

  // Whether `worker` holds the segment's claim this run, claiming it if no thread has (a
  // list's thread comes back to a segment's first step after taking another list).
  bool claim(size_t seg, size_t worker) {
    const uint64_t mine = claim_of(worker);
    std::atomic<uint64_t>& word = c_.segment_claim[seg].value;
    uint64_t before = word.load(std::memory_order_acquire);
    while (before < claim_of(0))
      if (word.compare_exchange_weak(before, mine, std::memory_order_acq_rel)) return true;
    return before == mine;
  }

  // Claims a segment to run it (run_segment) from another list, counted as running before
  // the claim, so that the run's end never misses it; where another thread claimed it
  // first, the count is taken back and the calling thread, which may have seen it, woken.
  bool claim_to_run(size_t seg, size_t worker) {
    segments_running_.fetch_add(1, std::memory_order_acq_rel);
    if (claim(seg, worker)) return true;
    segments_running_.fetch_sub(1, std::memory_order_acq_rel);
    signal_.notify();
    return false;
  }

  // Whether a thread that took the segment from its list has run it this run (this one
  // too, taking it first, from a list it took later).
  bool taken_and_done(size_t seg) const {
    return c_.segment_done[seg].value.load(std::memory_order_acquire) >= claim_of(0);
  }

  // Waits until the segments of its own list that `step` waits for and another thread
  // took are done.
  void wait_for_taken_segments(int step, size_t worker) {
    for (int seg : lists_.segments_waited_for(size_t(step))) {
      if (c_.segment_claim[size_t(seg)].value.load(std::memory_order_acquire) == claim_of(worker)) continue;
      for (;;) {
        const uint32_t seen = signal_.current();
        if (taken_and_done(size_t(seg))) break;
        signal_.wait(seen, kWaitInRun);
      }
    }
  }

  // Runs first the segments this worker took from other lists in the last run (their
  // segment_done marks), when no other worker took any: its core was then faster than
  // another's (unequal cores, or one busy with something else), which usually lasts, and
  // at the start it runs them in parallel with their list's thread instead of after its
  // own list. Where two workers took from each other's lists, the lists were even: none is
  // taken early. One that its list's thread has claimed already stays with it.
  void retake_last_runs_segments(size_t worker) {
    if (lists_.segments() == 0 || run_ == 1) return;
    const uint64_t last = run_ - 1;
    auto ran_last_run = [&](size_t seg) {
      return c_.segment_done[seg].value.load(std::memory_order_acquire) / kWorkersPerRun == last;
    };
    for (size_t seg = 0; seg < lists_.segments(); ++seg) {
      const uint64_t mark = c_.segment_done[seg].value.load(std::memory_order_acquire);
      if (mark / kWorkersPerRun == last && mark % kWorkersPerRun != worker) return;
    }
    for (size_t seg = 0; seg < lists_.segments(); ++seg) {
      if (!ran_last_run(seg) || claimed_this_run(seg) || !waits_met(seg)) continue;
      if (claim_to_run(seg, worker)) run_segment(seg, worker);
    }
  }

  bool waits_met(size_t seg) const {
    const std::span<const int> waits = lists_.counters_of_segment(seg);
    return std::all_of(waits.begin(), waits.end(), [&](int c) { return arrived(c); });
  }

  // Runs one segment taken from a list another thread runs (not one of `mine`), if any is
  // free to take; returns whether it did.
  bool steal(size_t worker, std::span<const Cursor> mine) {
    if (lists_.segments() == 0) return false;
    for (size_t l = 0; l < lists_.size(); ++l) {
      const bool runs_it = std::any_of(mine.begin(), mine.end(),
                                       [&](const Cursor& k) { return k.end == lists_.offsets[l + 1] && k.next < k.end; });
      if (runs_it || c_.claimed[l].value.load(std::memory_order_acquire) != run_) continue;
      for (uint32_t seg = lists_.list_segment_offsets[l + 1]; seg-- > lists_.list_segment_offsets[l];) {
        if (claimed_this_run(seg) || !waits_met(seg)) continue;
        if (claim_to_run(seg, worker)) {
          run_segment(seg, worker);
          return true;
        }
      }
    }
    return false;
  }

  void run_segment(size_t seg, size_t worker) {
    for (uint32_t k = lists_.segment_begin[seg]; k < lists_.segment_end[seg]; ++k) {
      execute(lists_.steps[k], worker);
      arrive(lists_.steps[k]);
    }
    c_.segment_done[seg].value.store(claim_of(worker), std::memory_order_release);
    segments_running_.fetch_sub(1, std::memory_order_acq_rel);
    signal_.notify();
  }

  // A step after a failing one (in plan order) is skipped: the sequential executor would
  // not have reached it. It still counts as done for the steps that wait for it.
  void execute(int step, size_t worker) {
    if (size_t(step) > failed_at_.load(std::memory_order_acquire)) return;
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

  // Fields that one thread writes while others read get a cache line each: a line two cores
  // keep writing moves between them on every write (about 250 ns each on the machines
  // measured, as long as a small step).
  const StepLists& lists_;
  StepCounters& c_;
  StepRunner& runner_;
  uint64_t run_ = 0;                    // c_.runs of this run
  std::atomic<size_t> next_worker_{1};  // the id the next helper gets
  alignas(64) std::atomic<size_t> lists_left_{0};  // lists with steps not yet all done
  std::atomic<size_t> segments_running_{0};        // taken by thieves, not yet done
  alignas(64) std::mutex mutex_;                   // the failure
  std::exception_ptr error_;
  std::atomic<size_t> failed_at_{SIZE_MAX};        // written only on failure
  alignas(64) Signal signal_;  // a step another list waits for is done, or a list is
};

}  // namespace

void run_steps(const StepLists& lists, StepCounters& counters, int num_threads, StepRunner& runner) {
  ListRun run(lists, counters, runner);
  const size_t workers = std::max<size_t>(lists.non_empty(), 1);
  run.intra_op_threads = intra_op_threads_per_worker(num_threads, workers);
  {
    const kernels::ThreadsScope on_this_thread(run.intra_op_threads);
    HelperPool& pool = HelperPool::get();
    const std::optional<size_t> first = run.take_first();
    pool.lend(run, workers - 1);
    run.run_as_caller(first);
    pool.retract(run);
  }
  run.rethrow_failure();
}

}  // namespace baton::runtime
