// Which worker runs each step when a plan's steps run side by side, fixed when the plan is
// specialized (docs/graph-mode.md, "Parallel steps").
//
// A step graph is assigned to workers by a cost model: each step's estimated time, and for
// each edge that carries data the bytes that must move to another core when producer and
// consumer run on different workers. On the machines measured, one cache line takes about
// 250 ns to reach another core and 16 KiB about 2.4 us, as long as ten elementwise steps on
// that data: where a value is consumed matters as much as how the work is split.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "runtime/parallel.h"

namespace baton::runtime {

// The bytes a step reads of a value another step made (data edges only: an edge that only
// orders two steps carries none).
struct DataEdge {
  int from = 0, to = 0;
  double bytes = 0;
};

// The cost model's figures for one core, as measured on the 2-core AVX-512 EPYC of
// 2026-12-02 (docs/graph-mode.md, "Who runs what").
struct CoreCosts {
  double step_us = 0.05;                 // a step's fixed cost: the executor, the kernel's setup
  double local_bytes_per_us = 200e3;     // bytes a kernel streams through its core's caches (an add
                                         // of 4096 floats: 48 KiB in 0.22 us)
  double flops_per_us = 100e3;           // a kernel's arithmetic, half the core's FMA peak
  double handoff_us = 0.5;               // a step on one core waiting for one on another
  double remote_bytes_per_us = 7e3;      // bytes another core's cache hands over
  double join_us = 1.0;                  // a pool helper starting on a run (the caller starts at once)
  // A step at least this big splits its work over the intra-op threads (baton's loops split
  // from 2 x 32768 elements; oneDNN's kernels split big problems).
  double split_bytes = 256 << 10, split_flops = 1e6;
};

// The figures plans use: CoreCosts{} unless set otherwise for the process (tests make
// hand-offs free, so that small graphs run side by side too).
CoreCosts core_costs();
void set_core_costs(const CoreCosts& costs);

// What the model knows of one step.
struct StepEstimate {
  double us = 0;        // on one thread
  bool splits = false;  // whether its kernel splits its work over the intra-op threads
  // Its time when its kernel may use `threads` (the fixed cost does not split).
  double on(int threads, const CoreCosts& costs) const {
    return splits && threads > 1 ? costs.step_us + (us - costs.step_us) / threads : us;
  }
};

// A step's estimate: its fixed cost plus the longer of moving its bytes and doing its FLOPs
// at one core's rates (a roofline).
StepEstimate estimate_step(double flops, double bytes, const CoreCosts& costs = core_costs());

struct WorkerAssignment {
  std::vector<int> order;        // every step, in a topological order that every worker follows
  std::vector<uint8_t> worker;   // per step
  double estimated_us = 0;       // the model's time of a run with this assignment
  double sequential_us = 0;      // and of one worker running every step
  double spread_us = 0;          // and of the best assignment to several workers
  const char* strategy = "";     // which of the candidates below won
};

// The assignment of the least estimated time among: every step on one worker, whose
// kernels then use all `threads`; the order split into `workers` runs of equal work along a
// walk from the graph's sinks (subtrees that meet late stay on one worker); and
// earliest-finish list scheduling. Side by side, each worker's kernels use threads /
// workers. The split candidates are improved by moving whole chains of steps between
// workers while the estimate drops.
WorkerAssignment assign_workers(const StepGraph& g, std::span<const StepEstimate> steps,
                                std::span<const DataEdge> edges, size_t workers, int threads,
                                const CoreCosts& costs = core_costs());

}  // namespace baton::runtime
