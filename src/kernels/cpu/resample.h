// Resampling one axis of a dense tensor, seen as [outer, in, inner], onto [outer, out,
// inner]: each output row o is the weighted sum of a few input rows, its taps (the
// resize op's nearest, linear and cubic interpolation), and the adjoint of that map.
#pragma once
#include <vector>

#include "baton/tensor.h"

namespace baton::kernels {

// `count` taps per output row: row o reads input rows index[o * count + k], each in
// [0, in), weighted by weight[o * count + k].
struct RowTaps {
  int count = 1;
  std::vector<int64_t> index;
  std::vector<double> weight;
  int64_t rows() const { return int64_t(index.size()) / count; }
};

struct AxisExtent {
  int64_t outer = 1, in = 1, inner = 1;
};

// y [outer, taps.rows(), inner] from x [outer, in, inner], both contiguous: f32 and f64;
// one tap of weight 1 (nearest) copies rows of any dtype.
void resample_rows(const Tensor& x, const Tensor& y, const AxisExtent& e, const RowTaps& taps);
// The adjoint: gx [outer, in, inner] gets weight * gy's row o added to row index, for
// every row o and tap (f32, f64).
void resample_rows_adjoint(const Tensor& gy, const Tensor& gx, const AxisExtent& e, const RowTaps& taps);

}  // namespace baton::kernels
