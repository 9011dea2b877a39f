// ngram_counts (src/ops/tfidf.cpp): counts against a brute-force reference that lists
// every (start, skip distance, length) window and compares it with every n-gram of the pool;
// the worked examples of the ONNX specification; batches, i32 and i64, empty rows, repeated
// n-grams, and errors. Not differentiable (integer ids in).
#include <limits>
#include <map>
#include <random>

#include "harness/op_harness.h"

namespace baton::testing {
namespace {

// Brute force: a window is counted when its tokens equal a counted n-gram of the pool
// (the last occurrence of a repeated one wins); 1-grams only at distance 1.
std::vector<float> brute_counts(const std::vector<int64_t>& ids, const NgramPool& p) {
  std::map<std::vector<int64_t>, int64_t> where;
  size_t id = 0;
  for (size_t n = 1; n <= p.level_starts.size(); ++n) {
    const int64_t end = n < p.level_starts.size() ? p.level_starts[n] : int64_t(p.tokens.size());
    for (int64_t at = p.level_starts[n - 1]; at + int64_t(n) <= end; at += int64_t(n), ++id) {
      if (int64_t(n) < p.min_length || int64_t(n) > p.max_length) continue;
      where[std::vector<int64_t>(p.tokens.begin() + at, p.tokens.begin() + at + int64_t(n))] = p.coordinates[id];
    }
  }
  const int64_t width = *std::max_element(p.coordinates.begin(), p.coordinates.end()) + 1;
  std::vector<float> counts(size_t(width), 0);
  const int64_t length = int64_t(ids.size());
  for (int64_t n = p.min_length; n <= p.max_length; ++n)
    for (int64_t d = 1; d <= (n == 1 ? 1 : p.max_skip + 1); ++d)
      for (int64_t s = 0; s + (n - 1) * d < length; ++s) {
        std::vector<int64_t> window;
        for (int64_t k = 0; k < n; ++k) window.push_back(ids[size_t(s + k * d)]);
        if (auto it = where.find(window); it != where.end()) counts[size_t(it->second)] += 1;
      }
  return counts;
}

// The pool of ONNX's node tests: 1-grams {2, 3, 5, 4}, 2-grams {5 6, 7 8, 6 7}.
NgramPool onnx_pool(int64_t min_length, int64_t max_length, int64_t max_skip) {
  return {{2, 3, 5, 4, 5, 6, 7, 8, 6, 7}, {0, 4}, {0, 1, 2, 3, 4, 5, 6}, min_length, max_length, max_skip};
}

const std::vector<int64_t> kIds = {1, 1, 3, 3, 3, 7, 8, 6, 7, 5, 6, 8};

std::vector<float> counts_of(const Tensor& x, const NgramPool& p) { return ngram_counts(x, p).to_vector<float>(); }

BATON_OP_CASES {
  OpCase c;
  c.name = "text.ngram_counts/batch";
  c.make_inputs = [] {
    std::vector<int64_t> ids;
    for (int k = 0; k < 60; ++k) ids.push_back((k * 5 + k / 7) % 9);
    return Inputs{tensor<int64_t>(ids, Shape{5, 12})};
  };
  c.fn = [](const Inputs& in) { return ngram_counts(in[0], onnx_pool(1, 2, 3)); };
  c.reference = [](const Inputs& in) {
    const std::vector<int64_t> ids = in[0].to_vector<int64_t>();
    std::vector<float> all;
    for (size_t r = 0; r < 5; ++r) {
      const std::vector<float> row =
          brute_counts(std::vector<int64_t>(ids.begin() + std::ptrdiff_t(r * 12), ids.begin() + std::ptrdiff_t(r * 12 + 12)),
                       onnx_pool(1, 2, 3));
      all.insert(all.end(), row.begin(), row.end());
    }
    return tensor<float>(all, Shape{5, 7});
  };
  c.check_grad = false;  // integer ids in
  return {c};
}

TEST(NgramCounts, OnnxNodeTestValues) {
  const Tensor x = tensor<int32_t>(std::vector<int32_t>(kIds.begin(), kIds.end()), Shape{12});
  EXPECT_EQ(counts_of(x, onnx_pool(2, 2, 0)), (std::vector<float>{0, 0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(counts_of(x, onnx_pool(2, 2, 5)), (std::vector<float>{0, 0, 0, 0, 1, 3, 1}));
  EXPECT_EQ(counts_of(x, onnx_pool(1, 2, 5)), (std::vector<float>{0, 3, 1, 0, 1, 3, 1}));
  const Tensor batch = reshape(x, Shape{2, 6});
  EXPECT_EQ(ngram_counts(batch, onnx_pool(2, 2, 0)).shape(), (Shape{2, 7}));
  EXPECT_EQ(counts_of(batch, onnx_pool(1, 2, 5)),
            (std::vector<float>{0, 3, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 1, 1}));
}

TEST(NgramCounts, SpecificationExampleOfSkips) {
  // [94, 17, 36, 12, 28] with 2-grams [94 12] and [17 28] (skip 2) and [36 12] (skip 0).
  NgramPool p{{94, 12, 17, 28, 36, 12}, {0, 0}, {0, 1, 2}, 2, 2, 2};
  const Tensor x = tensor<int64_t>({94, 17, 36, 12, 28});
  EXPECT_EQ(counts_of(x, p), (std::vector<float>{1, 1, 1}));
  p.max_skip = 1;  // skip 2 is out of reach
  EXPECT_EQ(counts_of(x, p), (std::vector<float>{0, 0, 1}));
}

TEST(NgramCounts, RandomPoolsMatchBruteForce) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 40; ++trial) {
    std::uniform_int_distribution<int64_t> token(0, 3), size(0, 4);
    NgramPool p;
    const int64_t levels = 1 + trial % 3;
    int64_t grams = 0;
    for (int64_t n = 1; n <= levels; ++n) {
      p.level_starts.push_back(int64_t(p.tokens.size()));
      const int64_t count = size(rng);
      for (int64_t k = 0; k < count * n; ++k) p.tokens.push_back(token(rng));
      grams += count;
    }
    if (grams == 0) continue;
    for (int64_t k = 0; k < grams; ++k) p.coordinates.push_back(std::uniform_int_distribution<int64_t>(0, 5)(rng));
    p.min_length = 1 + trial % levels;
    p.max_length = std::min<int64_t>(levels, p.min_length + trial % 2);
    p.max_skip = trial % 4;
    std::vector<int64_t> ids(size_t(3 + trial % 9));
    for (auto& v : ids) v = token(rng);
    const Tensor x = tensor<int64_t>(ids, Shape{int64_t(ids.size())});
    EXPECT_EQ(counts_of(x, p), brute_counts(ids, p)) << "trial " << trial;
  }
}

TEST(NgramCounts, RowsAreIndependentAndEmptyRowsCountNothing) {
  NgramPool p = onnx_pool(1, 2, 1);
  std::vector<int64_t> ids;
  for (int r = 0; r < 50; ++r)
    for (int k = 0; k < 8; ++k) ids.push_back((r * 7 + k * 3) % 9);
  const Tensor x = tensor<int64_t>(ids, Shape{50, 8});
  const std::vector<float> all = counts_of(x, p);
  for (int r = 0; r < 50; ++r) {
    const std::vector<int64_t> row(ids.begin() + r * 8, ids.begin() + r * 8 + 8);
    EXPECT_EQ(std::vector<float>(all.begin() + r * 7, all.begin() + r * 7 + 7), brute_counts(row, p)) << r;
  }
  EXPECT_EQ(counts_of(zeros({3, 0}, i64), p), std::vector<float>(21, 0));
  EXPECT_EQ(ngram_counts(zeros({0, 4}, i32), p).shape(), (Shape{0, 7}));
}

TEST(NgramCounts, HugeSkipsAndLengthsStopAtTheRow) {
  NgramPool p = onnx_pool(1, std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::max());
  p.level_starts = {0, 4};
  const Tensor x = tensor<int64_t>(kIds, Shape{12});
  EXPECT_EQ(counts_of(x, p), (std::vector<float>{0, 3, 1, 0, 1, 3, 1}));
}

// Attributes store symbolic dims as reserved negative numbers; a token id with that bit
// pattern is still just a token.
TEST(NgramCounts, TokensThatLookLikeSymbolicDims) {
  const int64_t odd = -((int64_t(1) << 32) | 0x5EB01C5D);
  NgramPool p{{odd, 7}, {0}, {0, 1}, 1, 1, 0};
  EXPECT_EQ(counts_of(tensor<int64_t>({odd, 7, odd}), p), (std::vector<float>{2, 1}));
  Graph g;
  Tensor x = g.placeholder(i64, {3}, "x");
  Session s(g);
  EXPECT_EQ(s.run({ngram_counts(x, p)}, {{x, tensor<int64_t>({odd, 7, odd})}}).at(0).to_vector<float>(),
            (std::vector<float>{2, 1}));
}

TEST(NgramCounts, RepeatedNgramCountsAtItsLastCoordinate) {
  NgramPool p{{5, 6, 5, 6}, {0, 0}, {0, 1}, 2, 2, 0};
  EXPECT_EQ(counts_of(tensor<int64_t>({5, 6, 5, 6}), p), (std::vector<float>{0, 2}));
}

TEST(NgramCounts, InsideAGraph) {
  Graph g;
  Tensor x = g.placeholder(i32, {"batch", 6}, "x");
  Tensor y = ngram_counts(x, onnx_pool(1, 2, 5));
  Session s(g);
  const Tensor ids = tensor<int32_t>({{1, 1, 3, 3, 3, 7}, {8, 6, 7, 5, 6, 8}});
  EXPECT_EQ(s.run({y}, {{x, ids}}).at(0).to_vector<float>(),
            (std::vector<float>{0, 3, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 1, 1}));
}

TEST(NgramCounts, Errors) {
  const Tensor x = tensor<int64_t>({1, 2, 3});
  NgramPool p = onnx_pool(1, 2, 0);
  int line = __LINE__ + 1;
  EXPECT_THROWS_WITH(DTypeError, ngram_counts(tensor({1.0, 2.0}), p), "[ngram_counts]", "f64",
                     "tfidf_test.cpp:" + std::to_string(line));
  EXPECT_THROWS_WITH(ShapeError, ngram_counts(zeros({1, 2, 3}, i64), p), "[ngram_counts]", "[B, C]", "i64[1,2,3]");
  NgramPool bad = p;
  bad.min_length = 3;
  EXPECT_THROWS_WITH(ValueError, ngram_counts(x, bad), "min_length <= max_length");
  bad = p, bad.max_skip = -1;
  EXPECT_THROWS_WITH(ValueError, ngram_counts(x, bad), "max_skip");
  bad = p, bad.level_starts = {0, 5};
  EXPECT_THROWS_WITH(ValueError, ngram_counts(x, bad), "level 2 holds 5 tokens");
  bad = p, bad.level_starts = {0, 11};
  EXPECT_THROWS_WITH(ValueError, ngram_counts(x, bad), "level_starts", "10 tokens");
  bad = p, bad.coordinates = {0, 1};
  EXPECT_THROWS_WITH(ValueError, ngram_counts(x, bad), "7 n-grams but 2 coordinates");
  bad = p, bad.coordinates[3] = -1;
  EXPECT_THROWS_WITH(ValueError, ngram_counts(x, bad), "must lie in [0, 2147483647), got -1");
  bad = p, bad.coordinates[3] = std::numeric_limits<int64_t>::max();
  EXPECT_THROWS_WITH(ValueError, ngram_counts(x, bad), "must lie in [0, 2147483647)");
  bad = NgramPool{{}, {0}, {}, 1, 1, 0};
  EXPECT_THROWS_WITH(ValueError, ngram_counts(x, bad), "no n-grams");
}

}  // namespace
}  // namespace baton::testing
