// A row (the reduced dim innermost) is folded to its max or min first, 8 chains as vector
// lanes (fold_row), then searched for the first element equal to it in blocks whose test
// vectorizes; columns (kept dims inside the reduced one) are read once, row after row,
// each column keeping its best value and where it was.
#include "kernels/cpu/arg_extreme.h"

#include <algorithm>
#include <cstring>

#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/reduce.h"

namespace baton::kernels {
namespace {

// Whether v is what the search looks for: equal to the best value, or a NaN where it is NaN
// (-0 and +0 are equal, as the fold's comparisons make them).
template <class T>
bool matches(T v, T best) {
  return (v == best) | (is_nan_value(v) & is_nan_value(best));
}

// Whether any lane of the comparison mask m is set.
template <class M>
bool any_lane(M m) {
  constexpr int kLanes = int(sizeof(M) / sizeof(m[0]));
  auto any = m[0];
  for (int l = 1; l < kLanes; ++l) any |= m[l];
  return any != 0;
}

// The first of n contiguous values that matches best (n if none does). Floats are tested
// four vectors at a time (GCC leaves a search that stops scalar), the hit then found in
// that block.
template <class T>
int64_t first_match(const T* p, int64_t n, T best) {
  int64_t i = 0;
  if constexpr (std::is_floating_point_v<T>) {
    using V = std::conditional_t<std::is_same_v<T, float>, F32x8, F64x4>;
    constexpr int64_t kLanes = int64_t(sizeof(V) / sizeof(T)), kBlock = 4 * kLanes;
    const bool nan = is_nan_value(best);
    auto hits = [&](const T* q) {
      V v;
      std::memcpy(&v, q, sizeof v);
      return nan ? v != v : v == best;
    };
    for (; i + kBlock <= n; i += kBlock)
      if (any_lane(hits(p + i) | hits(p + i + kLanes) | hits(p + i + 2 * kLanes) | hits(p + i + 3 * kLanes)))
        break;
  }
  for (; i < n; ++i)
    if (matches(p[i], best)) return i;
  return n;
}

template <class T, class F>
int64_t arg_row(const T* p, int64_t n) {
  return first_match(p, n, fold_row<T>(p, n, p[0], F{}));
}

template <class T, class F>
int64_t arg_long_row(const T* p, int64_t n) {
  const T best = fold_long_row(p, n, p[0], F{}, [&](const T* q, int64_t len) { return fold_row<T>(q, len, q[0], F{}); });
  return first_match(p, n, best);
}

// Whether v replaces best: it is larger (smaller), or a NaN, and best is not a NaN yet.
template <class T, class F>
bool replaces(T v, T best) {
  const bool beyond = std::is_same_v<F, MaxFn> ? v > best : v < best;
  const bool open = !is_nan_value(best);
  return open & (beyond | is_nan_value(v));
}

constexpr int64_t kColumnChunk = 256;

// Columns [c0, c0 + w) of one [n, inner] block x: out[j] = the row of column j's best.
template <class T, class F>
void arg_columns_chunk(const T* x, int64_t n, int64_t inner, int64_t w, int64_t* out) {
  T best[kColumnChunk];
  int64_t at[kColumnChunk] = {};
  std::copy(x, x + w, best);
  for (int64_t r = 1; r < n; ++r) {
    const T* row = x + r * inner;
    for (int64_t j = 0; j < w; ++j) {
      const bool take = replaces<T, F>(row[j], best[j]);
      best[j] = take ? row[j] : best[j];
      at[j] = take ? r : at[j];
    }
  }
  std::copy(at, at + w, out);
}

template <class T, class F>
void arg_columns(const T* x, const Strip& s, int64_t* out) {
  const int64_t chunks = (s.inner + kColumnChunk - 1) / kColumnChunk;
  parallel_range(s.outer * chunks, [&](int64_t b, int64_t e) {
    for (int64_t item = b; item < e; ++item) {
      const int64_t o = item / chunks, c0 = (item % chunks) * kColumnChunk;
      arg_columns_chunk<T, F>(x + o * s.n * s.inner + c0, s.n, s.inner, std::min(kColumnChunk, s.inner - c0),
                              out + o * s.inner + c0);
    }
  }, grain_for(s.n * kColumnChunk));
}

template <class T, class F>
void arg_into(const Tensor& x, const std::vector<int64_t>& dims, int64_t* out) {
  if (auto s = adjacent_strip(x, dims); s && s->inner > 1)
    return arg_columns<T, F>(static_cast<const T*>(x.raw_data()), *s, out);
  ReductionRows rows = reduction_rows(x, dims);
  const T* p = static_cast<const T*>(rows.rows.raw_data());
  if (rows.outer == 1) {
    *out = arg_long_row<T, F>(p, rows.inner);
    return;
  }
  reduce_rows<int64_t, T>(rows, out, arg_row<T, F>);
}

}  // namespace

void arg_extreme_into(const Tensor& x, const std::vector<int64_t>& dims, bool largest, int64_t* out) {
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (largest) arg_into<T, MaxFn>(x, dims, out);
    else arg_into<T, MinFn>(x, dims, out);
  });
}

}  // namespace baton::kernels
