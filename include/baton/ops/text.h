// Ops on token sequences (integer ids).
#pragma once
#include <vector>

#include "baton/tensor.h"

namespace baton {

// A pool of n-grams to count, laid out as ONNX's TfIdfVectorizer lays it out: `tokens`
// holds the 1-grams, then the 2-grams, ...; level_starts[n-1] is where the n-grams begin.
// The k-th n-gram of the pool (counting across levels) is counted at output coordinate
// coordinates[k]; only levels from min_length to max_length are counted. A repeated
// n-gram counts at the coordinate of its last occurrence.
struct NgramPool {
  std::vector<int64_t> tokens;
  std::vector<int64_t> level_starts;
  std::vector<int64_t> coordinates;
  int64_t min_length = 1, max_length = 1;
  int64_t max_skip = 0;  // n-grams may also take every (skip + 1)-th token, skip <= max_skip
};

// How often each n-gram of the pool occurs in x (i32 or i64 ids, [C] or [B, C] for B
// rows): f32 [max(coordinates) + 1] or [B, max(coordinates) + 1]. 1-grams count once;
// longer ones once per skip distance at which they occur. Not differentiable.
Tensor ngram_counts(const Tensor& x, const NgramPool& pool, SourceLoc loc = SourceLoc::current());

}  // namespace baton
