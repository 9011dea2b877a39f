// The exponentials run as softmax's (exp_shifted: vectorized, float where x is float) and
// add up in double, so a row of any length loses no more than float's rounding of each
// exponential. Rows are read in place where the reduced dims are innermost; reduced dims
// with kept ones inside them (columns) are read in place too, the max down the columns
// first and then the sums, the exponentials computed piece by piece as reduce_columns_by
// reads them.
#include "kernels/cpu/logsumexp.h"

#include <cmath>
#include <limits>

#include "kernels/cpu/exp_shifted.h"
#include "kernels/cpu/reduce.h"

namespace baton::kernels {
namespace {

constexpr int64_t kExpBlock = 1024;  // exponentials computed at a time, then added

// sum(exp(x - m)) over n contiguous values, in double.
template <class T>
double sum_exp_shifted(const T* x, int64_t n, T m) {
  T block[kExpBlock];
  double total = 0;
  for (int64_t i = 0; i < n; i += kExpBlock) {
    const int64_t len = std::min(kExpBlock, n - i);
    exp_shifted(x + i, block, len, m);
    total += sum_row<double>(block, len);
  }
  return total;
}

// m + log(s), or m itself where the shift is infinite or NaN (all -inf, some +inf, a NaN).
template <class T>
T shifted_log(T m, double s) {
  return std::isfinite(m) ? T(double(m) + std::log(s)) : m;
}

template <class T>
T logsumexp_row(const T* x, int64_t n) {
  const T m = fold_row<T>(x, n, -std::numeric_limits<T>::infinity(), MaxFn{});
  return std::isfinite(m) ? shifted_log(m, sum_exp_shifted(x, n, m)) : m;
}

// One long row (everything reduced) with threads splitting it, for the max and the sum.
template <class T>
T logsumexp_long_row(const T* x, int64_t n) {
  const T lowest = -std::numeric_limits<T>::infinity();
  const T m = fold_long_row(x, n, lowest, MaxFn{}, [&](const T* p, int64_t len) {
    return fold_row<T>(p, len, lowest, MaxFn{});
  });
  if (!std::isfinite(m)) return m;
  const double s = fold_long_range(n, 0.0, std::plus<double>{}, [&](int64_t begin, int64_t len) {
    return sum_exp_shifted(x + begin, len, m);
  });
  return shifted_log(m, s);
}

template <class T>
void logsumexp_columns(const T* x, const Strip& s, T* out) {
  const int64_t outputs = s.outer * s.inner;
  std::vector<T> m(static_cast<size_t>(outputs));
  reduce_columns<T, T>(x, s, m.data(), -std::numeric_limits<T>::infinity(), MaxFn{});
  // Reads hand out exp(x - m) for elements [begin, begin + len) of x: one outer block's
  // whole rows, or a piece of one row.
  auto exponentials = [&] {
    return [&, block = std::vector<T>(size_t(kMaxColumnChunk))](int64_t begin, int64_t len) mutable {
      const T* shift = m.data() + begin / (s.n * s.inner) * s.inner;
      for (int64_t i = 0, j = begin % s.inner; i < len; j = 0) {
        const int64_t run = std::min(len - i, s.inner - j);
        exp_shifted_each(x + begin + i, shift + j, block.data() + i, run);
        i += run;
      }
      return static_cast<const T*>(block.data());
    };
  };
  std::vector<double> sums(static_cast<size_t>(outputs));
  reduce_columns_by<double, T>(exponentials, s, sums.data(), 0.0, std::plus<double>{});
  for (int64_t i = 0; i < outputs; ++i) out[i] = shifted_log(m[size_t(i)], sums[size_t(i)]);
}

}  // namespace

template <class T>
void logsumexp_into(const Tensor& x, const std::vector<int64_t>& dims, T* out) {
  if (auto s = adjacent_strip(x, dims); s && s->inner > 1)
    return logsumexp_columns(static_cast<const T*>(x.raw_data()), *s, out);
  ReductionRows rows = reduction_rows(x, dims);
  const T* p = static_cast<const T*>(rows.rows.raw_data());
  if (rows.outer == 1) {
    *out = logsumexp_long_row(p, rows.inner);
    return;
  }
  reduce_rows<T, T>(rows, out, logsumexp_row<T>);
}

template void logsumexp_into<float>(const Tensor&, const std::vector<int64_t>&, float*);
template void logsumexp_into<double>(const Tensor&, const std::vector<int64_t>&, double*);

}  // namespace baton::kernels
