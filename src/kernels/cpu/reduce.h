// Reduction loops. Two layouts:
//   - rows: the reduced dims are moved last and made contiguous, so every output element
//     reduces one contiguous row (vectorizable), rows split over threads;
//   - columns: when the reduced dims are adjacent in a contiguous tensor but not innermost
//     (a bias gradient summing [64,512] over the batch), x is read in place as
//     [outer, n, inner] and whole rows are accumulated into a vector of inner outputs.
#pragma once
#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <type_traits>
#include <vector>

#include "baton/tensor.h"
#include "kernels/cpu/loops.h"
#include "kernels/cpu/vec8.h"

namespace baton::kernels {

struct ReductionRows {
  Tensor rows;         // contiguous [outer * inner] data: row i is [i*inner, (i+1)*inner)
  int64_t outer = 1;   // number of rows (= output elements)
  int64_t inner = 1;   // row length (= elements reduced into each output)
};

// dims: sorted, normalised dims to reduce.
ReductionRows reduction_rows(const Tensor& x, const std::vector<int64_t>& dims);


// x seen as [outer, n, inner]: each output reduces n elements lying `inner` apart.
struct Strip {
  int64_t outer = 1, n = 1, inner = 1;
};
// The strip of a dense tensor of `shape` (in memory order) reduced over sorted, normalised
// dims (empty: all of them) when they are one run of adjacent dims; nullopt otherwise.
std::optional<Strip> strip_of(const Shape& shape, const std::vector<int64_t>& dims);
// The strip of a contiguous (or channels-last) x whose (sorted) reduced dims are adjacent
// in memory; nullopt otherwise.
std::optional<Strip> adjacent_strip(const Tensor& x, const std::vector<int64_t>& dims);
// Reduced dims in several runs of a contiguous x (a conv bias gradient sums [N,C,H,W]
// over N, H and W): reduce the innermost run into a partial result, then `rest` of it,
// both in place, instead of permuting x into a copy. nullopt when that does not apply.
struct RunSplit {
  std::vector<int64_t> inner, rest;  // the innermost run of reduced dims; the others
  Shape partial_shape;               // x's shape without the inner run
};
std::optional<RunSplit> split_runs(const Tensor& x, const std::vector<int64_t>& dims);
// The same for the dims of a contiguous tensor of `shape`: nullopt where they are one run.
std::optional<RunSplit> split_runs(const Shape& shape, const std::vector<int64_t>& dims);
// Where in sorted, non-empty dims their innermost run of adjacent dims begins (0: they
// are one run).
size_t innermost_run(const std::vector<int64_t>& dims);
// The strip a reduction of a contiguous tensor of `shape` over sorted dims reads first:
// the dims' own, or where they lie in several runs, their innermost run's (whose results
// it then reduces over the rest, as split_runs says).
Strip evaluated_strip(const Shape& shape, const std::vector<int64_t>& dims);

// The strip around one dim of `shape` (softmax and friends).
Strip strip_around(const Shape& shape, int64_t dim);

// term(0) + ... + term(n - 1) in Acc with 8 independent accumulators (vectorizes, and
// sums pairwise enough to keep float error small): accumulator k takes terms k, k + 8, ...,
// they are added pairwise, then the tail in order.
template <class Acc, class Term>
Acc sum_terms(int64_t n, Term term) {
  Acc acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) acc[k] += term(i + k);
  Acc total = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) total += term(i);
  return total;
}

// Sum of n contiguous values, as sum_terms adds them; Acc is the accumulation type.
template <class Acc, class T>
Acc sum_row(const T* p, int64_t n) {
  return sum_terms<Acc>(n, [p](int64_t i) { return Acc(p[i]); });
}

template <class T>
constexpr bool is_nan_value(T v) {
  if constexpr (std::is_floating_point_v<T>) return v != v;
  else return false;
}

// max and min as the reductions fold them. NaN wins, as in PyTorch: once the accumulator
// is NaN it stays NaN. `|` rather than `||` keeps the select branch-free, so the columns'
// loops vectorize (a row's chains run as vector lanes, below). Between -0 and +0, and
// between two NaNs, the one folded in first stays, so the order of the fold decides those
// bits (fold_row's, which the fused kernel keeps).
struct MaxFn {
  template <class T> T operator()(T a, T b) const { return ((b > a) | is_nan_value(b)) ? b : a; }
};
struct MinFn {
  template <class T> T operator()(T a, T b) const { return ((b < a) | is_nan_value(b)) ? b : a; }
};
// prod's fold (the fused reductions share it).
struct MulFn {
  template <class T> T operator()(T a, T b) const { return T(a * b); }
};
// The larger of two values, a NaN b passed over: the max softmax shifts a row by.
struct MaxPassingNaN {
  template <class T> T operator()(T a, T b) const { return b > a ? b : a; }
};

// max's and min's 8 chains (below) as the lanes of one vector of floats or two of
// doubles, the select of F (MaxFn, MinFn, MaxPassingNaN) on each lane: GCC leaves the
// chains' selects scalar (a row max over 1M floats took 650 us). The same operation on the
// same chain per lane, so the same bits, -0 against +0 and NaN payloads included.
using F64x4 = double __attribute__((vector_size(32)));  // (vec8.h's F32x8 for doubles)
template <class F>
constexpr bool is_lane_select_v =
    std::is_same_v<F, MaxFn> || std::is_same_v<F, MinFn> || std::is_same_v<F, MaxPassingNaN>;

// F on each lane of a and v.
template <class F, class V>
V select_lanes(V a, V v) {
  auto take = v > a;
  if constexpr (std::is_same_v<F, MinFn>) take = v < a;
  if constexpr (!std::is_same_v<F, MaxPassingNaN>) take |= v != v;  // NaN wins
  return take ? v : a;
}

// A long row's chains are each cut into kSegments runs of consecutive steps, folded side by
// side from F's identity and then folded into the chain in order: one chain's selects wait
// on each other (3 dependent operations per 8 elements for MaxFn), four are independent.
// The folds keep the last NaN, else the first of the largest (MaxPassingNaN: the first of
// the largest), so runs folded apart and combined in order give the same bits.
inline constexpr int64_t kSegments = 4, kMinSegmentSteps = 4;
template <class T, class F, class V, int kParts>
int64_t fold_segments(V (&a)[kParts], const T* p, int64_t len) {
  constexpr int64_t kLanes = int64_t(sizeof(V) / sizeof(T));
  const int64_t steps = len / 8 / kSegments;  // each segment's steps of 8 elements
  constexpr T identity = std::is_same_v<F, MinFn> ? std::numeric_limits<T>::infinity()
                                                  : -std::numeric_limits<T>::infinity();
  V seg[kSegments][kParts];
  for (int64_t s = 1; s < kSegments; ++s)
    for (int h = 0; h < kParts; ++h) seg[s][h] = V{} + identity;
  std::memcpy(seg[0], a, sizeof a);
  for (int64_t i = 0; i < steps; ++i)
    for (int64_t s = 0; s < kSegments; ++s)
      for (int h = 0; h < kParts; ++h) {
        V v;
        std::memcpy(&v, p + (s * steps + i) * 8 + h * kLanes, sizeof v);
        seg[s][h] = select_lanes<F>(seg[s][h], v);
      }
  for (int64_t s = 1; s < kSegments; ++s)
    for (int h = 0; h < kParts; ++h) seg[0][h] = select_lanes<F>(seg[0][h], seg[s][h]);
  std::memcpy(a, seg[0], sizeof a);
  return steps * kSegments * 8;
}

// The lanes of `a` folded over len values, one vector of 8 after another.
template <class T, class F, class V, int kParts>
void fold_steps(V (&a)[kParts], const T* p, int64_t len) {
  constexpr int64_t kLanes = int64_t(sizeof(V) / sizeof(T));
  for (int64_t j = 0; j < len; j += 8)
    for (int h = 0; h < kParts; ++h) {
      V v;
      std::memcpy(&v, p + j + h * kLanes, sizeof v);
      a[h] = select_lanes<F>(a[h], v);
    }
}

template <class T, class F>
void fold_chains_as_lanes(T (&acc)[8], const T* p, int64_t len) {
  constexpr int kLanes = int(32 / sizeof(T));
  using V = std::conditional_t<std::is_same_v<T, float>, F32x8, F64x4>;
  static_assert(sizeof(V) == kLanes * sizeof(T));
  V a[8 / kLanes];
  std::memcpy(a, acc, sizeof acc);
  if (len < 8 * kSegments * kMinSegmentSteps) {  // a short row would pay to set segments up
    fold_steps<T, F>(a, p, len);
  } else {
    const int64_t done = fold_segments<T, F>(a, p, len);
    fold_steps<T, F>(a, p + done, len - done);
  }
  std::memcpy(acc, a, sizeof acc);
}

// len (a multiple of 8) values folded into fold_row's 8 chains: chain k takes p[k],
// p[k + 8], ... in order.
template <class Acc, class T, class F>
void fold_chains(Acc (&acc)[8], const T* p, int64_t len, F f) {
  constexpr bool lanes = std::is_same_v<Acc, T> && (std::is_same_v<T, float> || std::is_same_v<T, double>);
  if constexpr (lanes && is_lane_select_v<F>) return fold_chains_as_lanes<T, F>(acc, p, len);
  for (int64_t j = 0; j < len; j += 8)
    for (int k = 0; k < 8; ++k) acc[k] = f(acc[k], Acc(p[j + k]));
}

// f folded over n contiguous values from init, with 8 independent chains like sum_row.
template <class Acc, class T, class F>
Acc fold_row(const T* p, int64_t n, Acc init, F f) {
  Acc acc[8] = {init, init, init, init, init, init, init, init};
  const int64_t body = n / 8 * 8;
  fold_chains(acc, p, body, f);
  Acc total = f(f(f(acc[0], acc[1]), f(acc[2], acc[3])), f(f(acc[4], acc[5]), f(acc[6], acc[7])));
  for (int64_t i = body; i < n; ++i) total = f(total, Acc(p[i]));
  return total;
}

// fold_row's fold of n values that read(begin, len) hands out piece by piece (len <= piece,
// a multiple of 8; a pointer valid until the next read): the same 8 chains, the same order
// (with f adding, sum_row's sum).
template <class Acc, class Read, class F>
Acc fold_row_by(Read& read, int64_t begin, int64_t n, int64_t piece, Acc init, F f) {
  Acc acc[8] = {init, init, init, init, init, init, init, init};
  const int64_t body = n / 8 * 8;
  for (int64_t i = 0; i < body;) {
    const int64_t len = std::min(piece, body - i);
    fold_chains(acc, read(begin + i, len), len, f);
    i += len;
  }
  Acc total = f(f(f(acc[0], acc[1]), f(acc[2], acc[3])), f(f(acc[4], acc[5]), f(acc[6], acc[7])));
  if (body == n) return total;
  const auto* p = read(begin + body, n - body);
  for (int64_t j = 0; j < n - body; ++j) total = f(total, Acc(p[j]));
  return total;
}

// out[i] = f(row i, inner) for every row, rows over threads.
template <class Out, class T, class F>
void reduce_rows(const ReductionRows& r, Out* out, F f) {
  const T* base = static_cast<const T*>(r.rows.raw_data());
  parallel_range(
      r.outer,
      [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) out[i] = f(base + i * r.inner, r.inner);
      },
      grain_for(r.inner));
}

// The most columns reduce_columns reads of one row at a time.
inline constexpr int64_t kMaxColumnChunk = 1024;

// out[o*inner + j] = f folded over x[o][0..n)[j]. Each work item owns a chunk of up to
// kMaxChunk columns (whole rows where they are no wider) and streams along its rows;
// rows go in blocks of 64 whose partial results are then combined, so a float sum's error
// grows with n/64 + 64, not with n. When there are fewer chunks than threads (a bias
// gradient: 512 columns of 64 rows, or 32 of 40,000), the rows are split between threads
// and their partial results combined in order.
// x is read through `make_reader`: each work item calls it once for a reader, then
// read(begin, n) for the n <= kMaxColumnChunk elements of x (in x's flat order) from
// `begin` on, a pointer valid until the next read: whole rows at a time where the chunk
// is whole rows. reduce_columns reads x in memory; fused_elementwise_sum computes the
// elements there (pieces of whole rows evaluate far faster than half rows), so it sums
// in the very same order.
template <class Acc, class T, class Out, class F, class MakeReader>
void reduce_columns_by(MakeReader make_reader, const Strip& s, Out* out, Acc init, F f) {
  constexpr int64_t kMaxChunk = kMaxColumnChunk, kBlock = 64;
  const int64_t total_work = s.outer * s.n * s.inner;
  const bool large = total_work >= 2 * kParallelGrain;
  // Whole rows where they fit, else chunks of equal width (1,500 columns: two of 750).
  const int64_t fewest_chunks = (s.inner + kMaxChunk - 1) / kMaxChunk;
  const int64_t chunk = (s.inner + fewest_chunks - 1) / fewest_chunks;
  const int64_t chunks = (s.inner + chunk - 1) / chunk;
  const int64_t rows_per_read = chunk == s.inner ? kMaxChunk / chunk : 1;
  const int64_t row_splits = large && s.outer * chunks < max_threads() ? std::min<int64_t>(max_threads(), s.n) : 1;
  // (not std::vector: Acc may be bool)
  std::unique_ptr<Acc[]> partials(row_splits > 1 ? new Acc[size_t(row_splits * s.outer * s.inner)] : nullptr);
  auto run = [&](int64_t b, int64_t e) {
    auto read = make_reader();
    Acc total[kMaxChunk], part[kMaxChunk];
    for (int64_t t = b; t < e; ++t) {
      const int64_t item = t / row_splits, rows = t % row_splits;
      const int64_t o = item / chunks, c0 = (item % chunks) * chunk;
      const int64_t w = std::min(chunk, s.inner - c0);
      const int64_t first = s.n * rows / row_splits, last = s.n * (rows + 1) / row_splits;
      const int64_t base = o * s.n * s.inner + c0;
      std::fill(total, total + w, init);
      for (int64_t r0 = first; r0 < last; r0 += kBlock) {
        std::fill(part, part + w, init);
        for (int64_t r = r0, r1 = std::min(last, r0 + kBlock); r < r1; r += rows_per_read) {
          const int64_t k = std::min(rows_per_read, r1 - r);
          const T* rows = read(base + r * s.inner, k * w);  // k whole rows, or one piece of a row
          for (int64_t i = 0; i < k; ++i)
            for (int64_t j = 0; j < w; ++j) part[j] = f(part[j], Acc(rows[i * w + j]));
        }
        for (int64_t j = 0; j < w; ++j) total[j] = f(total[j], part[j]);
      }
      if (row_splits > 1) std::copy(total, total + w, partials.get() + (rows * s.outer + o) * s.inner + c0);
      else
        for (int64_t j = 0; j < w; ++j) out[o * s.inner + c0 + j] = Out(total[j]);
    }
  };
  const int64_t work_per_item = std::max<int64_t>(1, (s.n / row_splits) * chunk);
  parallel_range(s.outer * chunks * row_splits, run, std::max<int64_t>(1, kParallelGrain / work_per_item));
  if (row_splits == 1) return;
  for (int64_t i = 0; i < s.outer * s.inner; ++i) {
    Acc total = partials[i];
    for (int64_t r = 1; r < row_splits; ++r) total = f(total, partials[r * s.outer * s.inner + i]);
    out[i] = Out(total);
  }
}

template <class Acc, class T, class Out, class F>
void reduce_columns(const T* x, const Strip& s, Out* out, Acc init, F f) {
  auto in_place = [x] { return [x](int64_t begin, int64_t) { return x + begin; }; };
  reduce_columns_by<Acc, T>(in_place, s, out, init, f);
}

// f folded over elements [0, n) of one long row with threads splitting it (full reductions
// have one row): range(begin, len) folds one piece.
template <class Acc, class F, class RangeFn>
Acc fold_long_range(int64_t n, Acc init, F f, RangeFn range) {
  if (n < 2 * kParallelGrain || max_threads() < 2) return range(0, n);
  std::vector<Acc> partial(size_t(max_threads()), init);
  parallel_range(int64_t(partial.size()), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      int64_t begin = n * t / int64_t(partial.size()), end = n * (t + 1) / int64_t(partial.size());
      partial[size_t(t)] = range(begin, end - begin);
    }
  }, 1);
  Acc total = init;
  for (Acc v : partial) total = f(total, v);
  return total;
}

template <class Acc, class T, class F, class RowFn>
Acc fold_long_row(const T* p, int64_t n, Acc init, F f, RowFn row) {
  return fold_long_range(n, init, f, [&](int64_t begin, int64_t len) { return row(p + begin, len); });
}

// out[i] = f folded (in Acc) over the elements of x that output i reduces (dims sorted
// and normalised), reading x in place when the columns layout applies.
template <class Acc, class T, class Out, class F>
void fold(const Tensor& x, const std::vector<int64_t>& dims, Out* out, Acc init, F f) {
  auto strip = adjacent_strip(x, dims);
  if (strip && strip->inner > 1) {
    reduce_columns<Acc, T>(static_cast<const T*>(x.raw_data()), *strip, out, init, f);
    return;
  }
  if constexpr (requires { dtype_of<Acc>::value; }) {
    if (auto runs = split_runs(x, dims)) {
      Tensor partial = empty(runs->partial_shape, dtype_v<Acc>);
      fold<Acc, T>(x, runs->inner, partial.data<Acc>(), init, f);
      fold<Acc, Acc>(partial, runs->rest, out, init, f);
      return;
    }
  }
  ReductionRows rows = reduction_rows(x, dims);
  auto row = [&](const T* p, int64_t n) { return fold_row<Acc>(p, n, init, f); };
  if (rows.outer == 1) {
    *out = Out(fold_long_row(static_cast<const T*>(rows.rows.raw_data()), rows.inner, init, f, row));
    return;
  }
  reduce_rows<Out, T>(rows, out, [&](const T* p, int64_t n) { return Out(row(p, n)); });
}

// What a sum of T accumulates in: float sums run in double, which costs little (the loop
// is memory-bound) and keeps 1e5 floats summing to within 1e-7 relative.
template <class T>
using SumAcc = std::conditional_t<std::is_same_v<T, float>, double, T>;

// Sum of the elements of x that output i reduces, with the accuracy of SumAcc.
template <class T, class Out>
void sum_into(const Tensor& x, const std::vector<int64_t>& dims, Out* out) {
  using Acc = SumAcc<Out>;
  if (auto s = adjacent_strip(x, dims); s && s->inner > 1) {
    reduce_columns<Acc, T>(static_cast<const T*>(x.raw_data()), *s, out, Acc(0),
                           [](Acc a, Acc b) { return a + b; });
    return;
  }
  if (auto runs = split_runs(x, dims)) {
    Tensor partial = empty(runs->partial_shape, dtype_v<Acc>);
    sum_into<T>(x, runs->inner, partial.data<Acc>());
    sum_into<Acc>(partial, runs->rest, out);
    return;
  }
  ReductionRows rows = reduction_rows(x, dims);
  auto row = [](const T* p, int64_t n) { return sum_row<Acc>(p, n); };
  if (rows.outer == 1) {
    auto plus = [](Acc a, Acc b) { return Acc(a + b); };
    *out = Out(fold_long_row(static_cast<const T*>(rows.rows.raw_data()), rows.inner, Acc(0), plus, row));
    return;
  }
  reduce_rows<Out, T>(rows, out, [&](const T* p, int64_t n) { return Out(row(p, n)); });
}

}  // namespace baton::kernels
