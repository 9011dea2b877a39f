// Ops on token sequences (integer ids) and on string tensors (UTF-8 text).
#pragma once
#include <string>
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

// Every string of x upper- or lower-cased, code point by code point (simple Unicode case
// mapping; bytes that are not UTF-8 stay). A graph op.
enum class CaseChange { lower, upper };
Tensor change_case(const Tensor& x, CaseChange to, SourceLoc loc = SourceLoc::current());

// The position of each element of x in the 1-D tensor `vocabulary` of x's dtype (of its
// first occurrence there), -1 where it is absent: i64 of x's shape, ids for ngram_counts.
// Strings, or numbers (i32, i64, f32, f64) compared with ==: -0 finds 0, NaN finds
// nothing (ONNX's LabelEncoder with number keys).
Tensor vocabulary_index(const Tensor& x, const Tensor& vocabulary, SourceLoc loc = SourceLoc::current());

// The strings of the 1-D tensor x that are none of `words` (compared ignoring case unless
// case_sensitive), in order; with keep_one_empty, one empty string where none is left
// (ONNX's StringNormalizer). How many remain depends on the values: in a graph their count
// is a fresh symbol (`kept_1`), bound when a run has removed the words.
Tensor remove_words(const Tensor& x, const std::vector<std::string>& words, bool case_sensitive = true,
                    bool keep_one_empty = false, SourceLoc loc = SourceLoc::current());

}  // namespace baton
