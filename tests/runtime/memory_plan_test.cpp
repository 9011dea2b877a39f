// The arena layout: buffers alive at the same step never overlap, and the arena stays
// between the most bytes alive at one step and one buffer each.
#include <gtest/gtest.h>

#include <random>

#include "runtime/memory_plan.h"

namespace baton::runtime {
namespace {

void expect_no_overlap(std::span<const Lifetime> buffers, const ArenaLayout& layout) {
  for (size_t i = 0; i < buffers.size(); ++i)
    for (size_t j = i + 1; j < buffers.size(); ++j) {
      const bool same_time = buffers[i].first <= buffers[j].last && buffers[j].first <= buffers[i].last;
      const size_t a = layout.offsets[i], b = layout.offsets[j];
      const bool same_bytes = a < b + align_up(buffers[j].bytes) && b < a + align_up(buffers[i].bytes);
      EXPECT_FALSE(same_time && same_bytes && buffers[i].bytes && buffers[j].bytes)
          << "buffers " << i << " and " << j << " overlap at offsets " << a << ", " << b;
    }
}

TEST(MemoryPlan, BuffersThatNeverMeetShareBytes) {
  // A chain a -> b -> c: a dies when c is written, so c takes a's place.
  std::vector<Lifetime> chain{{1024, 0, 1}, {1024, 1, 2}, {1024, 2, 3}};
  ArenaLayout layout = plan_arena(chain);
  EXPECT_EQ(layout.naive_bytes, 3072u);
  EXPECT_EQ(layout.lower_bound_bytes, 2048u);
  EXPECT_EQ(layout.arena_bytes, 2048u);
  EXPECT_EQ(layout.offsets[0], layout.offsets[2]);
  expect_no_overlap(chain, layout);
}

TEST(MemoryPlan, AShortBufferFillsAHoleInsteadOfGrowingTheArena) {
  // p2 and p3 never meet, so both sit above p1; p4 goes on top. At step 4 only p1 and p4
  // are alive, and the 200-byte buffer takes the hole p2 and p3 leave between them.
  std::vector<Lifetime> b{{4096, 0, 9}, {2048, 5, 9}, {1024, 0, 3}, {512, 0, 9}, {200, 4, 4}};
  ArenaLayout layout = plan_arena(b);
  expect_no_overlap(b, layout);
  EXPECT_EQ(layout.offsets[4], 4096u);
  EXPECT_EQ(layout.arena_bytes, 4096u + 2048u + 512u);
}

TEST(MemoryPlan, EmptyAndZeroByteBuffers) {
  EXPECT_EQ(plan_arena({}).arena_bytes, 0u);
  std::vector<Lifetime> b{{0, 0, 3}, {64, 1, 2}};
  ArenaLayout layout = plan_arena(b);
  EXPECT_EQ(layout.arena_bytes, 64u);
  EXPECT_EQ(layout.offsets[1] % kArenaAlignment, 0u);
}

// Random lifetimes: never an overlap, always within [lower bound, naive].
TEST(MemoryPlan, RandomLifetimesNeverOverlap) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 500; ++trial) {
    std::vector<Lifetime> b(size_t(1 + rng() % 40));
    for (Lifetime& l : b) {
      l.first = int(rng() % 30);
      l.last = l.first + int(rng() % 10);
      l.bytes = size_t(rng() % 5000);
    }
    ArenaLayout layout = plan_arena(b);
    expect_no_overlap(b, layout);
    EXPECT_GE(layout.arena_bytes, layout.lower_bound_bytes);
    EXPECT_LE(layout.arena_bytes, layout.naive_bytes);
    for (size_t o : layout.offsets) EXPECT_EQ(o % kArenaAlignment, 0u);
    if (HasFailure()) FAIL() << "trial " << trial;
  }
}

}  // namespace
}  // namespace baton::runtime
