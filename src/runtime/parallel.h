// Inter-op parallelism: the steps of a plan as a dependency graph, and a run of that
// graph by the calling thread with helpers from a small persistent pool
// (docs/graph-mode.md, "Parallel steps").
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
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
  size_t num_sinks = 0;                // steps that none waits for

  size_t size() const { return num_preds.size(); }
  std::span<const int> successors(size_t step) const {
    return {succ.data() + succ_offsets[step], succ.data() + succ_offsets[step + 1]};
  }
  // From per-step predecessor lists (acyclic; duplicates allowed).
  static StepGraph from_preds(std::vector<std::vector<int>> preds);
  // Whether step `to` is `from` or waits for it, directly or not (tests).
  bool reaches(int from, int to) const;
};

// How a specialization runs on several threads (PlanOptions::inter_op_threads > 1).
struct ParallelSchedule {
  StepGraph graph;
  size_t workers = 1;
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

// Per-run state of a StepGraph, kept with an executor so that runs allocate nothing.
struct StepCounters {
  explicit StepCounters(const StepGraph& g);
  // Per step, predecessors done over all runs: in run r a step is ready once it reaches
  // r * num_preds. Counting on across runs means no thread resets the counters before a
  // run, which would pull every counter's cache line to its core.
  std::unique_ptr<std::atomic<uint64_t>[]> arrived;
  // Per step, the worker that ran it last: a worker prefers the steps it ran before, so
  // a branch's buffers stay in the cache of one core from run to run.
  std::unique_ptr<std::atomic<uint8_t>[]> last_worker;
  uint64_t runs = 0;
  std::vector<int> ready;  // the run's queue (capacity kept)
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

// Runs every step of `graph` on the calling thread plus up to workers - 1 pool helpers,
// each running kernels on intra_op_threads_per_worker(num_threads, workers) OpenMP
// threads. Returns when every step is done. When steps fail, steps after the first failing one (in plan order) are skipped,
// steps already running finish, and the error of the failing step with the lowest index
// is rethrown: the one the sequential executor would have reported.
void run_steps(const StepGraph& graph, StepCounters& counters, size_t workers, int num_threads, StepRunner& runner);

// Kernel threads per inter-op worker so that workers * threads stays within
// `num_threads` (at least 1 each).
int intra_op_threads_per_worker(int num_threads, size_t workers);

}  // namespace baton::runtime
