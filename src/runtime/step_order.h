// The order a plan runs its steps in, chosen with memory in mind (docs/graph-mode.md,
// "An order chosen with memory in mind").
//
// Program order keeps every value of a branch alive until the program reaches its
// consumer; a backward graph, for instance, computes each layer's gradients in the order
// the tape recorded them. Any topological order computes the same values, as long as the
// steps that write a buffer in place keep their place relative to the steps that read or
// write it, random draws keep their order, and control flow and the ends of stages stay
// where they were (plans with either keep program order). Among those, a greedy list
// schedule that always runs the ready step which adds the fewest bytes (what it allocates
// minus what it frees) often lowers the peak. The plan takes that order only where it
// lowers the estimated peak; otherwise it keeps program order.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "graph/ir.h"

namespace baton::runtime {

struct StepOrder {
  std::vector<const graph::Node*> nodes;
  // The most bytes live at one step, in program order and in `nodes`' order, estimated
  // with every symbolic dim taken as kSymbolicDimGuess. Equal when program order is kept.
  int64_t program_peak_bytes = 0, chosen_peak_bytes = 0;
  bool reordered() const { return chosen_peak_bytes < program_peak_bytes; }
};

// A symbolic dim's size for the estimate (a batch, most often).
constexpr int64_t kSymbolicDimGuess = 32;

// `program` (topological, as the plan keeps it) or an order that lowers the peak bytes
// of the values the steps make. Values in `fetched` live to the end.
StepOrder order_for_memory(std::vector<const graph::Node*> program, std::span<graph::Value* const> fetched);

}  // namespace baton::runtime
