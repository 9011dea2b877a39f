#include "runtime/memory_plan.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <numeric>

namespace baton::runtime {
namespace {

bool overlap(const Lifetime& a, const Lifetime& b) { return a.first <= b.last && b.first <= a.last; }

// The most bytes live at one step, by a sweep over lifetime starts and ends.
size_t peak_live_bytes(std::span<const Lifetime> buffers) {
  std::map<int, long long> delta;
  for (const Lifetime& b : buffers) {
    delta[b.first] += (long long)align_up(b.bytes);
    delta[b.last + 1] -= (long long)align_up(b.bytes);
  }
  long long live = 0, peak = 0;
  for (auto& [step, d] : delta) peak = std::max(peak, live += d);
  return size_t(peak);
}

}  // namespace

ArenaLayout plan_arena(std::span<const Lifetime> buffers) {
  ArenaLayout layout;
  layout.offsets.assign(buffers.size(), 0);
  for (const Lifetime& b : buffers) layout.naive_bytes += align_up(b.bytes);
  layout.lower_bound_bytes = peak_live_bytes(buffers);

  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return buffers[a].bytes > buffers[b].bytes; });
  std::vector<size_t> placed;  // buffer indices, in placement order
  for (size_t i : order) {
    const size_t size = align_up(buffers[i].bytes);
    // The byte ranges of placed buffers alive at the same time as this one, by offset.
    std::vector<std::pair<size_t, size_t>> taken;
    for (size_t j : placed)
      if (overlap(buffers[i], buffers[j])) taken.emplace_back(layout.offsets[j], layout.offsets[j] + align_up(buffers[j].bytes));
    std::sort(taken.begin(), taken.end());
    size_t best = SIZE_MAX, best_gap = SIZE_MAX, cursor = 0;
    for (auto [begin, end] : taken) {
      if (begin > cursor && begin - cursor >= size && begin - cursor < best_gap) best = cursor, best_gap = begin - cursor;
      cursor = std::max(cursor, end);
    }
    layout.offsets[i] = best != SIZE_MAX ? best : cursor;
    layout.arena_bytes = std::max(layout.arena_bytes, layout.offsets[i] + size);
    placed.push_back(i);
  }
  return layout;
}

}  // namespace baton::runtime
