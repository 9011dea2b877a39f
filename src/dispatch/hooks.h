// Where higher layers plug into dispatch (ops::call). Dispatch sits below everything that
// records or observes op calls, so it cannot name them: graph building (trace/), autograd
// history (autograd/) and the profiler (runtime/) each register a hook at start-up, and
// ops::call calls whichever is set. An unset hook costs one load.
#pragma once
#include <chrono>
#include <span>
#include <string_view>

#include "dispatch/registry.h"

namespace baton::dispatch {

// One op call: the op, its inputs and attributes, its (filled) outputs, the caller.
using OpCallFn = void (*)(const ops::OpDef& op, std::span<const Tensor> inputs, const ops::Attrs& attrs,
                          std::span<Tensor> outputs, SourceLoc loc);

// Graph building (DESIGN.md idea 3): while `active()` says a trace is running on this
// thread, or when an input is symbolic, ops::call hands the call to `record` (which appends
// a node) instead of running it; Tensor::copy_/fill_ go to `copy_into` (`op` names which).
struct GraphCapture {
  bool (*active)() = nullptr;
  OpCallFn record = nullptr;
  void (*copy_into)(std::string_view op, Tensor& dst, const Tensor& src, SourceLoc loc) = nullptr;
};
void set_graph_capture(const GraphCapture& hooks);
const GraphCapture& graph_capture();
// True while a graph is being built on this thread (false when no trace layer is linked).
bool capturing();

// Autograd: called after a kernel ran, when grad mode is on and an input requires grad.
void set_autograd_recorder(OpCallFn record);

// Profiling: while set, ops::call times every call it runs and reports it here, and so
// does the executor for each step of a plan.
using Clock = std::chrono::steady_clock;
// Who made a timed call. Eager: the op's name and the caller's line. A planned step: its
// label (the node's op, or a fused step's name), the line that built the graph node, and
// the plan and step index, which identify the step while the plan lives (explain() shows
// the time the profiler recorded for it).
struct TimedCall {
  std::string_view label;
  std::string_view file;  // the user's file ("" when unknown); the profiler copies it
  int line = 0;
  const void* plan = nullptr;  // nullptr: an eager call
  size_t step = 0;
};
using OpTimedFn = void (*)(const ops::OpDef& op, std::span<const Tensor> inputs, const ops::Attrs& attrs,
                           std::span<const Tensor> outputs, const TimedCall& call, Clock::time_point start,
                           Clock::time_point end);
void set_op_observer(OpTimedFn observer);  // nullptr stops observing
OpTimedFn op_observer();  // the executor reports its planned steps to it too

}  // namespace baton::dispatch
