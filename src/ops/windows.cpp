// Hann, Hamming and Blackman windows (ONNX HannWindow, HammingWindow, BlackmanWindow):
// generalized cosine windows w[j] = sum_k (-1)^k a_k cos(2 pi k j / N) for j < size, with
// N = size (periodic: one period of a window of size + 1 points, for spectral analysis)
// or N = size - 1 (symmetric, for filter design). Computed in double, then cast to the
// requested dtype. They are constants made from numbers, so they have no gradient; a
// symmetric window of one point is [1] (the limit, where N = 0).
#include <cmath>
#include <initializer_list>

#include "baton/ops.h"

namespace baton {
namespace {

Tensor cosine_window(const char* op, int64_t size, bool periodic, DType dtype, std::initializer_list<double> a,
                     SourceLoc loc) {
  if (sym::is_symbol(size))
    throw ValueError(op, str("the window size ", sym::to_string(size), " is symbolic; give a number"), loc);
  if (size < 0) throw ValueError(op, str("the window size must not be negative, got ", size), loc);
  Tensor w = empty({size}, f64);
  double* values = w.data<double>();
  const double period = double(periodic ? size : size - 1);
  for (int64_t j = 0; j < size; ++j) {
    double sum = 0, sign = 1;
    int k = 0;
    for (double coefficient : a) {
      sum += sign * coefficient * std::cos(2 * M_PI * k * double(j) / period);
      sign = -sign;
      ++k;
    }
    values[j] = period > 0 ? sum : 1.0;
  }
  return dtype == f64 ? w : cast(w, dtype, loc);
}

}  // namespace

Tensor hann_window(int64_t size, bool periodic, DType dtype, SourceLoc loc) {
  return cosine_window("hann_window", size, periodic, dtype, {0.5, 0.5}, loc);
}

Tensor hamming_window(int64_t size, bool periodic, DType dtype, SourceLoc loc) {
  return cosine_window("hamming_window", size, periodic, dtype, {25.0 / 46.0, 21.0 / 46.0}, loc);
}

Tensor blackman_window(int64_t size, bool periodic, DType dtype, SourceLoc loc) {
  return cosine_window("blackman_window", size, periodic, dtype, {0.42, 0.5, 0.08}, loc);
}

}  // namespace baton
