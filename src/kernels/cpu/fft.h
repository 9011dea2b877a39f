// Discrete Fourier transforms of complex sequences of any length n, in double precision.
//
// Lengths whose prime factors are all at most kMaxRadix run a recursive mixed-radix
// Cooley-Tukey transform (decimation in time: the p sub-sequences x[r], x[r + p], ... are
// transformed first, then combined by one p-point butterfly per output group), which costs
// O(n * (sum of the factors)): O(n log n) for smooth lengths. Other lengths (a large prime
// factor) run Bluestein's algorithm: the transform becomes a circular convolution with a
// chirp, computed with power-of-two transforms of size m >= 2n - 1, again O(n log n).
//
// A plan is built once per (length, direction) and is read-only afterwards, so threads
// share it; each thread brings its own scratch of scratch_size() values.
#pragma once
#include <complex>
#include <cstdint>
#include <memory>
#include <vector>

namespace baton::kernels {

using Complex = std::complex<double>;

class FftPlan {
 public:
  static constexpr int64_t kMaxRadix = 31;

  // sign -1: the forward transform X[k] = sum_t x[t] e^{-2 pi i k t / n};
  // sign +1: the same with e^{+2 pi i k t / n} (the inverse without its 1/n).
  FftPlan(int64_t n, int sign);
  ~FftPlan();
  FftPlan(const FftPlan&) = delete;
  FftPlan& operator=(const FftPlan&) = delete;

  int64_t size() const { return n_; }
  int64_t scratch_size() const;
  // Transforms data[0, n) in place; scratch holds scratch_size() values.
  void run(Complex* data, Complex* scratch) const;

 private:
  void transform(const Complex* in, int64_t stride, Complex* out, int64_t n, size_t level) const;
  void combine(Complex* out, int64_t n, int64_t p) const;
  void bluestein(Complex* data, Complex* scratch) const;

  int64_t n_;
  int sign_;
  std::vector<int64_t> factors_;   // mixed radix: n = product of factors_, outermost first
  std::vector<Complex> twiddles_;  // e^{sign 2 pi i j / n} for j < n
  // Bluestein: a forward plan of size m, the chirp c[j] = e^{sign pi i j^2 / n}, and the
  // spectrum of conj(c) wrapped around m, divided by m.
  std::unique_ptr<FftPlan> convolution_;
  std::vector<Complex> chirp_, chirp_spectrum_;
};

}  // namespace baton::kernels
