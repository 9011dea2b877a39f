// mel_weight_matrix (ONNX MelWeightMatrix): the [dft_length / 2 + 1, num_mel_bins] matrix
// that turns a one-sided spectrum into mel bands. num_mel_bins + 2 edges are spaced evenly
// in mel (mel = 2595 log10(1 + hz / 700)) from lower_edge_hertz, by a step of
// (mel(upper) - mel(lower)) / (num_mel_bins + 2) as ONNX defines it; each edge becomes the
// spectrum bin floor((dft_length + 1) hz / sample_rate). Band i is the triangle that
// rises from 0 at edge i to 1 at edge i + 1 and falls back to 0 at edge i + 2 (a band whose
// two lower edges share a bin is 1 there). Computed in double, then cast. A constant made
// from numbers: no gradient.
#include <cmath>
#include <vector>

#include "baton/ops.h"

namespace baton {
namespace {

double hertz_to_mel(double hz) { return 2595 * std::log10(1 + hz / 700); }
double mel_to_hertz(double mel) { return 700 * (std::pow(10.0, mel / 2595) - 1); }

// The spectrum bin of each of the num_mel_bins + 2 edges; fails when one falls outside
// the spectrum (an upper edge above the Nyquist frequency, a negative lower edge).
std::vector<int64_t> edge_bins(int64_t num_mel_bins, int64_t dft_length, int64_t sample_rate, double lower,
                               double upper, SourceLoc loc) {
  const int64_t edges = num_mel_bins + 2, spectrum_bins = dft_length / 2 + 1;
  const double low_mel = hertz_to_mel(lower), step = (hertz_to_mel(upper) - low_mel) / double(edges);
  std::vector<int64_t> bins(static_cast<size_t>(edges));
  for (int64_t b = 0; b < edges; ++b) {
    const double hz = mel_to_hertz(double(b) * step + low_mel);
    const double bin = std::floor(double(dft_length + 1) * hz / double(sample_rate));
    if (!(bin >= 0 && bin < double(spectrum_bins)))
      throw ValueError("mel_weight_matrix",
                       str("edge ", b, " (", hz, " Hz) falls at spectrum bin ", bin, ", outside [0, ", spectrum_bins,
                           ") for dft_length ", dft_length, " and sample_rate ", sample_rate,
                           "; the edges must lie in [0, sample_rate / 2]"),
                       loc);
    bins[size_t(b)] = int64_t(bin);
  }
  return bins;
}

}  // namespace

Tensor mel_weight_matrix(int64_t num_mel_bins, int64_t dft_length, int64_t sample_rate, double lower_edge_hertz,
                         double upper_edge_hertz, DType dtype, SourceLoc loc) {
  constexpr int64_t kMaxSize = int64_t(1) << 24;
  if (num_mel_bins < 0 || num_mel_bins > kMaxSize || dft_length < 1 || dft_length > kMaxSize || sample_rate < 1)
    throw ValueError("mel_weight_matrix",
                     str("needs num_mel_bins >= 0, dft_length >= 1 and sample_rate >= 1 (each at most ", kMaxSize,
                         "), got ", num_mel_bins, ", ", dft_length, " and ", sample_rate),
                     loc);
  const std::vector<int64_t> bins =
      edge_bins(num_mel_bins, dft_length, sample_rate, lower_edge_hertz, upper_edge_hertz, loc);
  const int64_t rows = dft_length / 2 + 1, cols = num_mel_bins;
  Tensor m = zeros({rows, cols}, f64);
  double* w = m.data<double>();
  for (int64_t i = 0; i < cols; ++i) {
    const int64_t left = bins[size_t(i)], center = bins[size_t(i + 1)], right = bins[size_t(i + 2)];
    if (center == left) w[center * cols + i] = 1;
    for (int64_t j = left; j <= center && center > left; ++j) w[j * cols + i] = double(j - left) / double(center - left);
    for (int64_t j = center; j < right; ++j) w[j * cols + i] = double(right - j) / double(right - center);
  }
  return dtype == f64 ? m : cast(m, dtype, loc);
}

}  // namespace baton
