// Reductions as rows: the reduced dims are moved last and made contiguous, so every
// output element reduces one contiguous row (vectorizable), rows split over threads.
#pragma once
#include <vector>

#include "baton/tensor.h"
#include "kernels/cpu/loops.h"

namespace baton::kernels {

struct ReductionRows {
  Tensor rows;         // contiguous [outer * inner] data: row i is [i*inner, (i+1)*inner)
  int64_t outer = 1;   // number of rows (= output elements)
  int64_t inner = 1;   // row length (= elements reduced into each output)
};

// dims: sorted, normalised dims to reduce.
ReductionRows reduction_rows(const Tensor& x, const std::vector<int64_t>& dims);

// Sum of n contiguous values with 8 independent accumulators (vectorizes, and sums
// pairwise enough to keep float error small); Acc is the accumulation type.
template <class Acc, class T>
Acc sum_row(const T* p, int64_t n) {
  Acc acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) acc[k] += Acc(p[i + k]);
  Acc total = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) total += Acc(p[i]);
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
      std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(r.inner, 1)));
}

}  // namespace baton::kernels
