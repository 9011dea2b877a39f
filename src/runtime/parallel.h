// Inter-op parallelism: the steps of a plan as a dependency graph, and a run of that
// graph by the calling thread with helpers from a small persistent pool
// (docs/graph-mode.md, "Parallel steps").
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

namespace baton::runtime {

// Which steps must finish before which (built per specialization, runtime/specialize.cpp).
// Data and ordering edges go from a lower step index to a higher one; an edge that only
// protects memory (a buffer's bytes reused) may go the other way, but always to a later
// stage, so the graph has no cycle.
struct StepGraph {
  std::vector<uint32_t> num_preds;     // per step: the steps it waits for
  std::vector<uint32_t> succ_offsets;  // successors of step i: succ[succ_offsets[i], succ_offsets[i+1])
  std::vector<int> succ;
  std::vector<int> stage;              // per step: 1 + the latest stage it waits for (sources: 0)
  std::vector<int> sources;            // steps that wait for none, in plan order

  size_t size() const { return num_preds.size(); }
  std::span<const int> successors(size_t step) const {
    return {succ.data() + succ_offsets[step], succ.data() + succ_offsets[step + 1]};
  }
  // From per-step predecessor lists (acyclic; duplicates allowed).
  static StepGraph from_preds(std::vector<std::vector<int>> preds);
  // Whether step `to` is `from` or waits for it, directly or not (tests).
  bool reaches(int from, int to) const;
};

// Per-step lists as offsets and items: step i's items are items[offsets[i], offsets[i+1]).
void flatten(const std::vector<std::vector<int>>& per_step, std::vector<uint32_t>& offsets, std::vector<int>& items);

// The steps each worker runs (runtime/step_assignment.h), in one order that all lists
// follow, and the waits between lists: a step waits only for its predecessors on other
// lists, since those on its own list ran before it.
struct StepLists {
  // From a topological order of g and a list per step (below `lists`).
  static StepLists make(const StepGraph& g, const std::vector<int>& order, const std::vector<uint8_t>& list_of,
                        size_t lists);

  std::vector<uint32_t> offsets;  // list l: steps[offsets[l], offsets[l+1])
  std::vector<int> steps;
  std::vector<uint8_t> list_of;   // per step
  std::vector<uint32_t> position; // per step: its place in the common order
  // Per step that waits for another list: its counter (else -1), and per counter the
  // arrivals that make its step ready.
  std::vector<int> counter_of;
  std::vector<uint32_t> arrivals;
  // Per step, its predecessors and successors on other lists (offsets as in StepGraph).
  std::vector<uint32_t> remote_pred_offsets, remote_succ_offsets;
  std::vector<int> remote_preds, remote_succs;

  // Segments: runs of consecutive steps of one list that wait for no earlier step of their
  // list (a chain of steps from graph inputs), each of which a worker with nothing else to
  // do may run in its list's place (ListRun, "stealing"): only those find_segments() kept.
  // Per segment, its steps are steps[segment_begin, segment_end) and segment_counters (at
  // segment_counter_offsets) the counters they wait on; list l's segments are
  // [list_segment_offsets[l], list_segment_offsets[l+1]), in list order. Per step, its
  // segment (-1: none) and segment_deps (at segment_dep_offsets): the segments of its own
  // list, other than its own, whose steps it waits for.
  std::vector<uint32_t> segment_begin, segment_end, list_segment_offsets;
  std::vector<uint32_t> segment_counter_offsets{0};
  std::vector<int> segment_counters;
  std::vector<int> segment_of;
  std::vector<uint32_t> segment_dep_offsets;
  std::vector<int> segment_deps;

  size_t size() const { return offsets.size() - 1; }
  std::span<const int> list(size_t l) const { return {steps.data() + offsets[l], steps.data() + offsets[l + 1]}; }
  size_t non_empty() const;
  // No segments: the state make() returns.
  void drop_segments();
  // Finds the segments and keeps those `worth` says repay running on another core (their
  // steps, in order).
  void find_segments(const StepGraph& g, const std::function<bool(std::span<const int>)>& worth);
  size_t segments() const { return segment_begin.size(); }
  std::span<const int> counters_of_segment(size_t seg) const {
    return {segment_counters.data() + segment_counter_offsets[seg],
            segment_counters.data() + segment_counter_offsets[seg + 1]};
  }
  std::span<const int> segments_waited_for(size_t step) const {
    return {segment_deps.data() + segment_dep_offsets[step], segment_deps.data() + segment_dep_offsets[step + 1]};
  }
  std::span<const int> preds_elsewhere(size_t step) const {
    return {remote_preds.data() + remote_pred_offsets[step], remote_preds.data() + remote_pred_offsets[step + 1]};
  }
  std::span<const int> succs_elsewhere(size_t step) const {
    return {remote_succs.data() + remote_succ_offsets[step], remote_succs.data() + remote_succ_offsets[step + 1]};
  }
};

// How a specialization runs on several threads (PlanOptions::inter_op_threads > 1).
struct ParallelSchedule {
  StepGraph graph;
  StepLists lists;
  size_t workers = 1;  // lists with steps
  // The cost model's time for a run of these lists, for one worker, and for the best
  // spread over several (explain()).
  double estimated_us = 0, sequential_us = 0, spread_us = 0;
  const char* strategy = "";
  // Fresh and view slots get their per-run handle dropped once every step that reads or
  // writes them is done: `uses` per slot (0: never dropped), and per step the slots it
  // counts down (touched_offsets as in StepGraph).
  std::vector<uint32_t> uses;
  std::vector<uint32_t> touched_offsets;
  std::vector<int> touched;
  // Input slots some step writes in place. A run whose inputs share storage with one of
  // them runs sequentially: the ordering edges only know the slots apart.
  std::vector<int> written_inputs;

  std::span<const int> touched_by(size_t step) const {
    return {touched.data() + touched_offsets[step], touched.data() + touched_offsets[step + 1]};
  }
};

// Per-run state of a schedule's lists, kept with an executor so that runs allocate nothing.
// Counts go on across runs (a step is ready in run r once its counter reaches r times its
// arrivals), so no thread resets them before a run, which would pull every counter's cache
// line to its core. Each counter has a cache line of its own: the line moves between two
// cores once per wait, never because a neighbour was written.
struct StepCounters {
  explicit StepCounters(const StepLists& lists);
  struct alignas(64) Counter {
    std::atomic<uint64_t> value{0};
  };
  std::unique_ptr<Counter[]> arrived;  // per counter of StepLists
  std::unique_ptr<Counter[]> claimed;  // per list: the last run a thread took it in
  // Per segment: run * 256 + the worker that claimed it in its last run, and run * 256 +
  // the worker that last ran all its steps having taken it from its list.
  std::unique_ptr<Counter[]> segment_claim, segment_done;
  uint64_t runs = 0;
};

// What runs one step. run_step is called from several threads at once, never twice for
// one step in a run; it may throw. `worker` tells the threads of a run apart: 0 is the
// calling thread, helpers count up from 1 (below the run's `workers`).
class StepRunner {
 public:
  virtual void run_step(size_t step, size_t worker) = 0;

 protected:
  ~StepRunner() = default;
};

// Runs every list on the calling thread plus up to one pool helper per other list with
// steps, each running kernels on intra_op_threads_per_worker(num_threads, lists with steps)
// OpenMP threads. A thread takes a list and runs its steps in order; one that would wait
// for a list no thread took yet takes that list too (helpers are optional: without them
// the calling thread runs every list, in the common order), and one with nothing to do
// runs segments of lists other threads have (StepLists::find_segments); a thread that
// alone did so in the last run starts this one with the same segments. Returns when
// every step is done. When steps fail, steps after the first failing one (in plan order)
// are skipped, steps already running finish, and the error of the failing step with the
// lowest index is rethrown: the one the sequential executor would have reported.
void run_steps(const StepLists& lists, StepCounters& counters, int num_threads, StepRunner& runner);

// Kernel threads per inter-op worker so that workers * threads stays within
// `num_threads` (at least 1 each).
int intra_op_threads_per_worker(int num_threads, size_t workers);

}  // namespace baton::runtime
