// Assigning steps to workers (runtime/step_assignment.h) and running the lists
// (runtime/parallel.h): subtrees that meet late stay on one worker, a graph with nothing to
// gain stays on one, every list follows one topological order, and a run finishes every
// step after its predecessors whichever threads take the lists.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <set>
#include <string>
#include <thread>

#include "runtime/parallel.h"
#include "runtime/step_assignment.h"

namespace baton::runtime {
namespace {

// n steps of `us` each, on one thread (they do not split over threads unless `splits`).
std::vector<StepEstimate> steps_of(size_t n, double us, bool splits = false) {
  return std::vector<StepEstimate>(n, StepEstimate{us, splits});
}


// `branches` chains of `length` steps summed pairwise (the parallel_branches benchmark's
// shape): steps of a chain are consecutive, the sums come last.
struct BranchesAndSums {
  std::vector<std::vector<int>> preds;
  std::vector<DataEdge> edges;
  std::vector<int> last_of_branch;

  BranchesAndSums(int branches, int length, double bytes) {
    for (int b = 0; b < branches; ++b) {
      for (int k = 0; k < length; ++k) {
        preds.emplace_back();
        if (k) add(int(preds.size()) - 2, int(preds.size()) - 1, bytes);
      }
      last_of_branch.push_back(int(preds.size()) - 1);
    }
    std::vector<int> level = last_of_branch;
    while (level.size() > 1) {
      std::vector<int> next;
      for (size_t i = 0; i + 1 < level.size(); i += 2) {
        preds.emplace_back();
        add(level[i], int(preds.size()) - 1, bytes);
        add(level[i + 1], int(preds.size()) - 1, bytes);
        next.push_back(int(preds.size()) - 1);
      }
      level = next;
    }
  }
  void add(int from, int to, double bytes) {
    preds[size_t(to)].push_back(from);
    edges.push_back({from, to, bytes});
  }
  StepGraph graph() const { return StepGraph::from_preds(preds); }
  // The lists of `workers`, every step costing the same.
  StepLists lists(size_t workers) const {
    const StepGraph g = graph();
    const WorkerAssignment a = assign_workers(g, steps_of(g.size(), 1.0), edges, workers, 1, CoreCosts{});
    return StepLists::make(g, a.order, a.worker, workers);
  }
};

int cross_edges(const std::vector<DataEdge>& edges, const WorkerAssignment& a) {
  int n = 0;
  for (const DataEdge& e : edges) n += a.worker[size_t(e.from)] != a.worker[size_t(e.to)];
  return n;
}

TEST(StepAssignment, BranchesThatMeetLateStayOnOneWorkerEach) {
  BranchesAndSums p(8, 20, 16384);
  const StepGraph g = p.graph();
  const WorkerAssignment a = assign_workers(g, steps_of(g.size(), 0.6), p.edges, 2, 2, CoreCosts{});
  for (int b = 0; b < 8; ++b)  // a whole chain on one worker
    for (int k = 0; k < 20; ++k) EXPECT_EQ(a.worker[size_t(b * 20 + k)], a.worker[size_t(b * 20)]) << "branch " << b;
  // Four branches each, and only the last sum reads from the other worker (round-robin
  // branches would hand over four values).
  int on_first = 0;
  for (int b = 0; b < 8; ++b) on_first += a.worker[size_t(b * 20)] == 0;
  EXPECT_EQ(on_first, 4);
  EXPECT_EQ(cross_edges(p.edges, a), 1);
  EXPECT_LT(a.estimated_us, 0.6 * a.sequential_us);
}

TEST(StepAssignment, AChainOrSmallStepsStayOnOneWorker) {
  BranchesAndSums chain(1, 30, 16384);
  WorkerAssignment a = assign_workers(chain.graph(), steps_of(30, 0.6), chain.edges, 2, 2, CoreCosts{});
  EXPECT_EQ(std::string(a.strategy), "one worker");
  EXPECT_EQ(std::count(a.worker.begin(), a.worker.end(), 0), 30);
  // Branches of steps shorter than a hand-off: not worth a second core.
  BranchesAndSums tiny(4, 2, 64);
  const StepGraph g = tiny.graph();
  a = assign_workers(g, steps_of(g.size(), 0.05), tiny.edges, 2, 2, CoreCosts{});
  EXPECT_EQ(std::count(a.worker.begin(), a.worker.end(), 0), int(g.size()));
}

// Branches of big kernels (matmuls): on one worker each kernel uses both threads, side by
// side one each, so splitting the branches gains nothing and the plan keeps one worker.
TEST(StepAssignment, KernelsThatUseEveryThreadStayOnOneWorker) {
  BranchesAndSums big(2, 4, 1 << 20);
  const StepGraph g = big.graph();
  const WorkerAssignment a = assign_workers(g, steps_of(g.size(), 100.0, true), big.edges, 2, 2, CoreCosts{});
  EXPECT_EQ(std::string(a.strategy), "one worker");
  // With one kernel thread they are worth spreading (the last sum pulls 1 MiB across).
  const WorkerAssignment one_thread = assign_workers(g, steps_of(g.size(), 100.0, true), big.edges, 2, 1, CoreCosts{});
  EXPECT_NE(std::string(one_thread.strategy), "one worker");
  EXPECT_LT(one_thread.estimated_us, 0.8 * one_thread.sequential_us);
}

TEST(StepAssignment, ListsFollowOneTopologicalOrderAndKnowTheirWaits) {
  BranchesAndSums p(4, 5, 4096);
  const StepGraph g = p.graph();
  const StepLists lists = p.lists(2);
  ASSERT_EQ(lists.non_empty(), 2u);
  for (size_t l = 0; l < 2; ++l) {
    std::span<const int> steps = lists.list(l);
    for (size_t k = 1; k < steps.size(); ++k)
      EXPECT_LT(lists.position[size_t(steps[k - 1])], lists.position[size_t(steps[k])]);
  }
  for (size_t s = 0; s < g.size(); ++s) {
    size_t elsewhere = 0;
    for (int q : p.preds[s]) elsewhere += lists.list_of[size_t(q)] != lists.list_of[s];
    EXPECT_EQ(lists.preds_elsewhere(s).size(), elsewhere) << "step " << s;
    EXPECT_EQ(lists.counter_of[s] >= 0, elsewhere > 0) << "step " << s;
    for (int next : g.successors(s)) EXPECT_LT(lists.position[s], lists.position[size_t(next)]);
  }
}

// Records, per step, the order in which steps finished and how often each ran.
class Recorder final : public StepRunner {
 public:
  explicit Recorder(size_t n) : done_at(n), runs(n) {}
  void run_step(size_t step, size_t) override {
    runs[step].fetch_add(1);
    done_at[step].store(clock.fetch_add(1) + 1);
  }
  std::vector<std::atomic<uint64_t>> done_at, runs;
  std::atomic<uint64_t> clock{0};
};

void expect_every_step_after_its_predecessors(const BranchesAndSums& p, const Recorder& r) {
  for (size_t s = 0; s < p.preds.size(); ++s) {
    ASSERT_EQ(r.runs[s].load(), 1u) << "step " << s;
    for (int q : p.preds[s]) EXPECT_LT(r.done_at[size_t(q)].load(), r.done_at[s].load()) << q << " -> " << s;
  }
}

// Two runs at once: the pool lends its helpers to one of them, so the caller of the other
// must take the lists no helper took, and still respect every wait. Helpers that join
// late take segments of lists a caller took, and take them first in the next run.
TEST(StepAssignment, CallersTakeTheListsNoHelperTook) {
  BranchesAndSums p(8, 6, 16384);
  const size_t steps = p.preds.size();
  StepLists lists = p.lists(4);
  lists.find_segments(p.graph(), [](std::span<const int>) { return true; });
  ASSERT_GT(lists.non_empty(), 1u);
  auto runs = [&] {
    StepCounters counters(lists);
    for (int run = 0; run < 200; ++run) {
      Recorder r(steps);
      run_steps(lists, counters, 4, r);
      expect_every_step_after_its_predecessors(p, r);
    }
  };
  std::thread other(runs);
  runs();
  other.join();
}

// Segments are runs of a list that wait for nothing earlier on it: each chain of the
// benchmark's shape is one, the sums that join chains are none, and a sum waits for the
// segments of its list it joins.
TEST(StepAssignment, ChainsFromGraphInputsAreSegments) {
  BranchesAndSums p(4, 6, 16384);
  const StepGraph g = p.graph();
  StepLists lists = p.lists(2);
  ASSERT_EQ(lists.non_empty(), 2u);
  EXPECT_EQ(lists.segments(), 0u);  // none until asked
  lists.find_segments(g, [](std::span<const int>) { return true; });
  ASSERT_EQ(lists.segments(), 4u);
  for (size_t seg = 0; seg < lists.segments(); ++seg) {
    ASSERT_EQ(lists.segment_end[seg] - lists.segment_begin[seg], 6u) << "segment " << seg;
    const int head = lists.steps[lists.segment_begin[seg]];
    EXPECT_EQ(head % 6, 0) << "segment " << seg << " starts a chain";
    for (uint32_t k = lists.segment_begin[seg]; k < lists.segment_end[seg]; ++k)
      EXPECT_EQ(lists.steps[k], head + int(k - lists.segment_begin[seg]));
  }
  for (size_t s = 24; s < g.size(); ++s) EXPECT_EQ(lists.segment_of[s], -1) << "sum " << s;
  for (size_t l = 0; l < 2; ++l) {  // the first sum of each list joins its two chains
    const int sum = *std::find_if(lists.list(l).begin(), lists.list(l).end(), [](int s) { return s >= 24; });
    const std::span<const int> waits = lists.segments_waited_for(size_t(sum));
    EXPECT_EQ(std::set<int>(waits.begin(), waits.end()),
              (std::set<int>{int(lists.list_segment_offsets[l]), int(lists.list_segment_offsets[l]) + 1}));
  }
  lists.find_segments(g, [](std::span<const int> steps) { return steps.size() > 6; });
  EXPECT_EQ(lists.segments(), 0u);
}

// Records when each step started and ended, which worker ran it, and how often; the
// calling thread's steps are slow. The caller's first step also waits (up to 2 s, once a
// run) for the helper's first, so that on a loaded machine the caller does not claim the
// segments the helper would have taken before the helper's thread gets a core: which
// thread runs what is then the step scheduler's decision, not the operating system's.
class SlowCaller final : public StepRunner {
 public:
  explicit SlowCaller(size_t n, std::chrono::seconds patience = std::chrono::seconds(2))
      : start(n), end(n), worker(n), runs(n), patience_(patience) {}
  void run_step(size_t step, size_t w) override {
    start[step].store(clock.fetch_add(1) + 1);
    if (w != 0) helper_started.store(true);
    if (w == 0) {
      wait_for_the_helper();
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    worker[step].store(w);
    runs[step].fetch_add(1);
    end[step].store(clock.fetch_add(1) + 1);
  }
  std::vector<std::atomic<uint64_t>> start, end, worker, runs;
  std::atomic<uint64_t> clock{0};
  std::atomic<bool> helper_started{false}, helper_late{false};

 private:
  std::chrono::seconds patience_;
  void wait_for_the_helper() {
    const auto deadline = std::chrono::steady_clock::now() + patience_;
    while (!helper_started.load() && !helper_late.load())
      if (std::chrono::steady_clock::now() > deadline) return helper_late.store(true);
      else std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
};

// Runs the benchmark's shape (four chains of six) on two lists with segments 20 times,
// the calling thread's steps slow, and checks that every step runs once, after every step
// it waits for; `look` sees each run's record and its lists.
template <class Look>
void run_with_a_slow_caller(Look look) {
  BranchesAndSums p(4, 6, 16384);
  const StepGraph g = p.graph();
  StepLists lists = p.lists(2);
  lists.find_segments(g, [](std::span<const int>) { return true; });
  StepCounters counters(lists);
  for (int run = 0; run < 20; ++run) {
    SlowCaller r(g.size());
    run_steps(lists, counters, 2, r);
    for (size_t s = 0; s < g.size(); ++s) {
      ASSERT_EQ(r.runs[s].load(), 1u) << "step " << s << ", run " << run;
      for (int q : p.preds[s]) EXPECT_LT(r.end[size_t(q)].load(), r.start[s].load()) << q << " -> " << s;
    }
    look(r, lists, run);
  }
}

// A helper done with its own list runs the slow caller's last chains.
TEST(StepAssignment, AThreadWithNothingToDoRunsSegmentsOfAnotherList) {
  int stolen = 0;
  run_with_a_slow_caller([&](const SlowCaller& r, const StepLists& lists, int) {
    for (size_t s = 0; s < lists.list_of.size(); ++s) stolen += lists.list_of[s] == 0 && r.worker[s].load() != 0;
  });
  EXPECT_GT(stolen, 0) << "the helper never took a segment of the calling thread's list";
}

// A helper that alone took segments of the slow caller's list in one run takes them first
// in the next, before its own list.
TEST(StepAssignment, AThreadTakesFirstWhatItTookFromAnotherListLastRun) {
  int eligible_runs = 0, started_with_the_callers = 0;
  bool helper_alone_took_segments = false;  // in the run before
  run_with_a_slow_caller([&](const SlowCaller& r, const StepLists& lists, int) {
    int first = -1;  // the helper's first step
    bool helper_took = false, caller_took = false;
    for (size_t s = 0; s < lists.list_of.size(); ++s) {
      const bool by_helper = r.worker[s].load() != 0;
      if (by_helper && (first < 0 || r.start[s].load() < r.start[size_t(first)].load())) first = int(s);
      helper_took |= by_helper && lists.list_of[s] == 0;
      caller_took |= !by_helper && lists.list_of[s] != 0;
    }
    if (helper_alone_took_segments && first >= 0 && !r.helper_late.load()) {
      ++eligible_runs;
      started_with_the_callers += lists.list_of[size_t(first)] == 0;
    }
    helper_alone_took_segments = helper_took && !caller_took;
  });
  if (eligible_runs < 3) GTEST_SKIP() << "the helper alone took segments before " << eligible_runs << " runs";
  EXPECT_EQ(started_with_the_callers, eligible_runs)
      << "of " << eligible_runs << " runs after one where the helper alone took segments of the caller's list, it "
      << "started with them in " << started_with_the_callers;
}

// The first run with several lists in a process gets its helper: the pool thread started
// for it must not miss the job it was started for (it did: it read the pool's counter
// after the job was posted and waited for the next). In a process of its own, which the
// death test's "threadsafe" style starts afresh; the caller waits up to 20 s for it.
TEST(StepAssignmentDeathTest, AProcesssFirstWideRunGetsItsHelper) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        BranchesAndSums p(4, 6, 16384);
        StepLists lists = p.lists(2);
        StepCounters counters(lists);
        SlowCaller r(p.graph().size(), std::chrono::seconds(20));
        run_steps(lists, counters, 2, r);
        std::_Exit(r.helper_started.load() ? 0 : 1);
      },
      testing::ExitedWithCode(0), "")
      << "the helper did not join the process's first run";
}

}  // namespace
}  // namespace baton::runtime
