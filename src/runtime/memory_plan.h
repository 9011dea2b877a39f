// Memory planning: the intermediate values of a plan share one arena (DESIGN.md idea 5).
//
// Each buffer lives from the step that writes it to the last step that reads it. Buffers
// whose lifetimes overlap get disjoint byte ranges; the others may share. Offsets come from
// a greedy best-fit over buffers sorted largest first (the strategy TFLite and ONNX Runtime
// use for their arenas): each buffer takes the smallest gap between the placed buffers it
// overlaps in time that fits it, or goes on top of them.
#pragma once
#include <cstddef>
#include <span>
#include <vector>

namespace baton::runtime {

struct Lifetime {
  size_t bytes = 0;
  int first = 0, last = 0;  // steps, inclusive
};

struct ArenaLayout {
  std::vector<size_t> offsets;  // per buffer, 64-byte aligned
  size_t arena_bytes = 0;
  size_t naive_bytes = 0;        // every buffer on its own, rounded up to 64 bytes (a plan
                                 // counts every intermediate value, in-place ones too)
  size_t lower_bound_bytes = 0;  // the most bytes live at one step: no layout needs less
};

constexpr size_t kArenaAlignment = 64;
constexpr size_t align_up(size_t n) { return (n + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment; }

ArenaLayout plan_arena(std::span<const Lifetime> buffers);

}  // namespace baton::runtime
