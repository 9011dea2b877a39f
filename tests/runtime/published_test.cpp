// Published: the value runs read without a lock (runtime/published.h). Readers always see
// one whole value, never a half-made or freed one, and replaced values go once no reader
// is looking.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "runtime/published.h"

namespace baton::runtime {
namespace {

// A value that counts how many of its kind are alive.
struct Counted {
  static inline std::atomic<int> alive{0};
  std::vector<int> items;  // every item equals the generation that wrote the value
  explicit Counted(std::vector<int> v = {}) : items(std::move(v)) { ++alive; }
  Counted(const Counted& o) : items(o.items) { ++alive; }
  Counted& operator=(const Counted&) = default;
  ~Counted() { --alive; }
};

TEST(Published, ReadersSeeWholeValuesWhileAWriterReplacesThem) {
  constexpr int kReaders = 4, kGenerations = 2000;
  {
    Published<Counted> value(Counted(std::vector<int>(64, 0)));
    std::atomic<bool> done{false};
    std::atomic<int> torn{0}, reads{0};
    std::vector<std::thread> readers;
    for (int r = 0; r < kReaders; ++r)
      readers.emplace_back([&] {
        while (!done.load()) {
          value.read([&](const Counted& c) {
            for (int item : c.items)
              if (item != c.items.front()) ++torn;
            return 0;
          });
          ++reads;
        }
      });
    while (reads.load() < kReaders) std::this_thread::yield();  // the readers are in before the writes
    for (int g = 1; g <= kGenerations; ++g)
      value.update([&](const Counted&, Published<Counted>::Draft& next) {
        for (int& item : next.edit().items) item = g;
        return 0;
      });
    done = true;
    for (auto& t : readers) t.join();
    EXPECT_EQ(torn.load(), 0);
    EXPECT_EQ(value.read([](const Counted& c) { return c.items.back(); }), kGenerations);
    // No reader is inside: the retired values went with the last reader or the last write.
    EXPECT_EQ(Counted::alive.load(), 1);
  }
  EXPECT_EQ(Counted::alive.load(), 0);
}

// The last reader of a retired value leaves while someone else holds the writers' mutex
// (here inspect(), as a report would): it cannot take the mutex to free the value, so the
// holder looks again once it lets go, and the value goes then, not at the next write.
TEST(Published, RetiredValuesGoWhenTheirLastReaderLeavesWhileTheMutexIsHeld) {
  {
    Published<Counted> value(Counted(std::vector<int>{0}));
    std::atomic<int> stage{0};  // 1: the reader is inside; 2: it may leave; 3: it left
    std::thread reader([&] {
      value.read([&](const Counted&) {
        stage = 1;
        while (stage.load() != 2) std::this_thread::yield();
        return 0;
      });
      stage = 3;
    });
    while (stage.load() != 1) std::this_thread::yield();
    value.update([](const Counted&, Published<Counted>::Draft& next) {
      next.edit().items = {1};
      return 0;
    });
    EXPECT_EQ(Counted::alive.load(), 2);  // the first value is retired: a reader is inside
    value.inspect([&](const Counted&) {
      stage = 2;
      while (stage.load() != 3) std::this_thread::yield();
      return 0;
    });
    reader.join();
    EXPECT_EQ(Counted::alive.load(), 1);
  }
  EXPECT_EQ(Counted::alive.load(), 0);
}

TEST(Published, AnUpdateThatThrowsPublishesNothing) {
  Published<std::vector<int>> value(std::vector<int>{1, 2});
  EXPECT_THROW(value.update([](const std::vector<int>&, Published<std::vector<int>>::Draft& next) -> int {
    next.edit().push_back(3);
    throw std::runtime_error("planning failed");
  }), std::runtime_error);
  EXPECT_EQ(value.read([](const std::vector<int>& v) { return v.size(); }), 2u);
}

// A writer that only finds what another writer made leaves the value as it is: readers keep
// the same object, and nothing is copied.
TEST(Published, AnUpdateThatChangesNothingPublishesNothing) {
  Published<Counted> value(Counted(std::vector<int>(4, 7)));
  const Counted* before = value.read([](const Counted& c) { return &c; });
  const int alive = Counted::alive.load();
  int found = value.update([](const Counted& now, Published<Counted>::Draft&) { return now.items.front(); });
  EXPECT_EQ(found, 7);
  EXPECT_EQ(value.read([](const Counted& c) { return &c; }), before);
  EXPECT_EQ(Counted::alive.load(), alive);
}

// Entries stamped by use: the one used longest ago goes first.
struct Entry {
  int id;
  mutable std::atomic<uint64_t> last_used{0};
};

TEST(Published, TheLeastRecentlyUsedEntryIsEvicted) {
  std::atomic<uint64_t> clock{0};
  std::vector<std::shared_ptr<const Entry>> entries;
  for (int id = 0; id < 3; ++id) entries.push_back(std::make_shared<const Entry>(id));
  for (int id : {1, 0, 2, 0}) mark_used(*entries[size_t(id)], clock);
  EXPECT_EQ(most_recently_used(entries)->id, 0);
  evict_least_recently_used(entries);
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0]->id, 0);
  EXPECT_EQ(entries[1]->id, 2);
}

}  // namespace
}  // namespace baton::runtime
