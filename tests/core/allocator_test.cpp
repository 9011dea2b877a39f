// The caching allocator behind every tensor: statistics, reuse, alignment, size classes.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include <baton/baton.h>
#include "core/allocator.h"
#include "harness/op_harness.h"

namespace baton {
namespace {

TEST(Allocator, BytesInUseGrowAndShrinkWithStorages) {
  const size_t before = memory_stats().bytes_in_use;
  const size_t bytes = detail::size_class(1000 * 1000 * 4);
  {
    Tensor t = empty({1000, 1000});
    EXPECT_EQ(memory_stats().bytes_in_use, before + bytes);
    Tensor view = t.t();  // a view allocates nothing
    EXPECT_EQ(memory_stats().bytes_in_use, before + bytes);
  }
  EXPECT_EQ(memory_stats().bytes_in_use, before);
}

TEST(Allocator, PeakRemembersTheHighestUse) {
  reset_peak_memory_stats();
  const size_t base = memory_stats().bytes_in_use;
  EXPECT_EQ(memory_stats().peak_bytes_in_use, base);
  { Tensor big = empty({1 << 20}); }
  MemoryStats s = memory_stats();
  EXPECT_EQ(s.bytes_in_use, base);
  EXPECT_GE(s.peak_bytes_in_use, base + (size_t(1) << 22));
  reset_peak_memory_stats();
  EXPECT_EQ(memory_stats().peak_bytes_in_use, base);
}

TEST(Allocator, RepeatedSameSizeAllocationsHitTheCache) {
  { Tensor warm = empty({12345}); }  // leaves a block of this class in the cache
  MemoryStats before = memory_stats();
  EXPECT_GE(before.bytes_cached, detail::size_class(12345 * 4));
  for (int i = 0; i < 10; ++i) Tensor t = empty({12345});
  MemoryStats after = memory_stats();
  EXPECT_EQ(after.allocations - before.allocations, 10u);
  EXPECT_EQ(after.cache_hits - before.cache_hits, 10u);
  // A slightly different size in the same class is served from the cache too.
  { Tensor t = empty({12340}); }
  EXPECT_EQ(memory_stats().cache_hits - after.cache_hits, 1u);
}

TEST(Allocator, EmptyCacheReturnsCachedBlocks) {
  { Tensor t = empty({50000}); }
  EXPECT_GT(memory_stats().bytes_cached, 0u);
  empty_cache();
  EXPECT_EQ(memory_stats().bytes_cached, 0u);
  MemoryStats before = memory_stats();
  { Tensor t = empty({50000}); }
  EXPECT_EQ(memory_stats().cache_hits, before.cache_hits);  // a fresh block
}

// A block a thread freed waits in that thread's own cache: the statistics count it, the
// thread takes it again without the shared lists, and empty_cache() called from another
// thread releases it while its thread still runs.
TEST(Allocator, ThreadCachesAreCountedAndEmptiedFromAnyThread) {
  empty_cache();
  const size_t block = detail::size_class(30000 * 4);
  std::atomic<int> phase{0};
  MemoryStats in_thread_before, in_thread_after;
  std::thread worker([&] {
    { Tensor t = empty({30000}); }
    phase = 1;
    while (phase.load() != 2) std::this_thread::yield();
    { Tensor again = empty({30000}); }  // the cache is empty now: a fresh block
    phase = 3;
  });
  while (phase.load() != 1) std::this_thread::yield();
  EXPECT_GE(memory_stats().bytes_cached, block);
  empty_cache();
  EXPECT_EQ(memory_stats().bytes_cached, 0u);
  const MemoryStats before = memory_stats();
  phase = 2;
  while (phase.load() != 3) std::this_thread::yield();
  const MemoryStats after = memory_stats();
  EXPECT_EQ(after.allocations - before.allocations, 1u);
  EXPECT_EQ(after.cache_hits, before.cache_hits);
  worker.join();
  // The thread ended: its cached block went to the shared lists, where this thread finds it.
  EXPECT_GE(memory_stats().bytes_cached, block);
  const uint64_t hits = memory_stats().cache_hits;
  { Tensor t = empty({30000}); }
  EXPECT_EQ(memory_stats().cache_hits, hits + 1);
}

// Threads allocate, free, and hand storages to each other (freed on another thread than
// the one that allocated them) while another empties the caches and reads the statistics:
// every byte in use comes back, and nothing stays cached after a last empty_cache().
TEST(Allocator, ThreadsSharingStoragesLoseNoBytes) {
  empty_cache();
  const size_t before = memory_stats().bytes_in_use;
  constexpr int kThreads = 4, kRounds = 2000;
  std::vector<Tensor> handed(kThreads);
  std::vector<std::atomic<bool>> full(kThreads);
  std::atomic<int> finished{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] {
      std::mt19937 rng{uint32_t(i)};
      for (int r = 0; r < kRounds; ++r) {
        Tensor t = empty({int64_t(rng() % 70000) + 1});
        if (!full[size_t(i)].load(std::memory_order_acquire)) {  // hand it to the next thread
          handed[size_t(i)] = std::move(t);
          full[size_t(i)].store(true, std::memory_order_release);
        }
        const size_t from = size_t((i + kThreads - 1) % kThreads);
        if (full[from].load(std::memory_order_acquire)) {  // free one the previous thread made
          handed[from] = Tensor();
          full[from].store(false, std::memory_order_release);
        }
      }
      ++finished;
    });
  while (finished.load() < kThreads) {
    empty_cache();
    (void)memory_stats();
  }
  for (auto& t : threads) t.join();
  handed.clear();
  EXPECT_EQ(memory_stats().bytes_in_use, before);
  empty_cache();
  EXPECT_EQ(memory_stats().bytes_cached, 0u);
}

TEST(Allocator, StoragesAre64ByteAligned) {
  std::vector<Tensor> keep;
  for (int64_t n : {1, 3, 17, 100, 1000, 4097, 100000}) {
    for (DType t : {b8, i32, f64}) {
      keep.push_back(empty({n}, t));
      EXPECT_EQ(reinterpret_cast<uintptr_t>(keep.back().raw_data()) % 64, 0u) << n << " " << t;
    }
  }
  EXPECT_EQ(reinterpret_cast<uintptr_t>(empty({0}).raw_data()) % 64, 0u);
}

TEST(Allocator, SizeClassesWasteAtMostAQuarter) {
  for (size_t n : {size_t(1), size_t(255), size_t(256), size_t(257), size_t(1000), size_t(4096),
                   size_t(5000), size_t(1) << 20, (size_t(1) << 20) + 1, size_t(123456789)}) {
    size_t c = detail::size_class(n);
    EXPECT_GE(c, n);
    EXPECT_EQ(c % 64, 0u) << n;
    if (n > 256) {
      EXPECT_LE(double(c), 1.25 * double(n)) << n;
    }
  }
}

// A plan keeps its convolution weights in oneDNN's layout between runs; once the plan and
// its weights are gone, empty_cache() frees those copies too.
TEST(Allocator, EmptyCacheDropsCopiesOfWeightsThatAreGone) {
  empty_cache();
  const size_t before = memory_stats().bytes_in_use;
  {
    Graph g("conv");
    Tensor x = g.placeholder(f32, {1, 8, 9, 9}, "x");
    Tensor y = relu(conv2d(x, rand({16, 8, 3, 3})));  // conv2d_fused keeping its weights
    Session(g).run({y}, {{x, rand({1, 8, 9, 9})}});
  }
  empty_cache();
  EXPECT_EQ(memory_stats().bytes_in_use, before);
}

// set_memory_limit caps the bytes in use: a request past it is an OutOfMemoryError naming
// the bytes and the limit; freeing makes room again, and 0 lifts the cap.
TEST(Allocator, MemoryLimitRefusesWhatWouldPassIt) {
  empty_cache();
  const size_t before = memory_stats().bytes_in_use;
  set_memory_limit(before + (size_t(1) << 20));  // 1 MiB more than in use
  {
    Tensor fits = empty({196608}, f32);  // 768 KiB
    EXPECT_THROWS_WITH(OutOfMemoryError, empty({196608}, f32), "cannot allocate 786432 bytes", "set_memory_limit");
  }
  Tensor again = empty({196608}, f32);  // the first one's bytes are free again
  EXPECT_EQ(memory_limit(), before + (size_t(1) << 20));
  set_memory_limit(0);
  Tensor large = empty({1 << 19}, f32);  // 2 MiB: no cap now
  EXPECT_EQ(large.numel(), 1 << 19);
}

}  // namespace
}  // namespace baton
