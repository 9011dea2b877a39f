// FftPlan (fft.h): mixed-radix Cooley-Tukey for lengths with small prime factors,
// Bluestein's chirp convolution for the rest.
#include "kernels/cpu/fft.h"

#include <algorithm>
#include <cmath>

namespace baton::kernels {
namespace {

// e^{sign 2 pi i j / n} for j < n, each from its own angle (no error builds up).
std::vector<Complex> unit_roots(int64_t n, int sign) {
  std::vector<Complex> w(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) w[size_t(j)] = std::polar(1.0, double(sign) * 2 * M_PI * double(j) / double(n));
  return w;
}

// a * b without std::complex's checks for infinite parts (a library call per product);
// the transforms multiply finite numbers, and non-finite inputs still come out non-finite.
inline Complex mul(Complex a, Complex b) {
  return {a.real() * b.real() - a.imag() * b.imag(), a.real() * b.imag() + a.imag() * b.real()};
}

}  // namespace

FftPlan::FftPlan(int64_t n, int sign) : n_(n), sign_(sign) {
  int64_t rest = n;
  auto take = [&](int64_t p) {
    while (rest > 1 && rest % p == 0) {
      factors_.push_back(p);
      rest /= p;
    }
  };
  take(4);
  take(2);
  for (int64_t p = 3; p <= kMaxRadix; p += 2) take(p);
  if (rest == 1) {
    twiddles_ = unit_roots(n, sign);
    return;
  }
  // Bluestein: k t = (k^2 + t^2 - (k - t)^2) / 2, so X[k] = c[k] sum_t (x[t] c[t]) conj(c[k - t]).
  factors_.clear();
  int64_t m = 1;
  while (m < 2 * n - 1) m *= 2;
  convolution_ = std::make_unique<FftPlan>(m, -1);
  chirp_.resize(size_t(n));
  for (int64_t j = 0; j < n; ++j) {
    const uint64_t square = uint64_t(j) * uint64_t(j) % uint64_t(2 * n);  // exact angle modulo 2 pi
    chirp_[size_t(j)] = std::polar(1.0, double(sign) * M_PI * double(square) / double(n));
  }
  chirp_spectrum_.assign(size_t(m), Complex(0));
  chirp_spectrum_[0] = std::conj(chirp_[0]);
  for (int64_t j = 1; j < n; ++j)
    chirp_spectrum_[size_t(j)] = chirp_spectrum_[size_t(m - j)] = std::conj(chirp_[size_t(j)]);
  std::vector<Complex> scratch(size_t(convolution_->scratch_size()));
  convolution_->run(chirp_spectrum_.data(), scratch.data());
  for (Complex& v : chirp_spectrum_) v /= double(m);
}

FftPlan::~FftPlan() = default;

int64_t FftPlan::scratch_size() const {
  return convolution_ ? convolution_->size() + convolution_->scratch_size() : n_;
}

void FftPlan::run(Complex* data, Complex* scratch) const {
  if (convolution_) return bluestein(data, scratch);
  if (n_ <= 1) return;
  std::copy(data, data + n_, scratch);
  transform(scratch, 1, data, n_, 0);
}

// out[0, n) = the transform of in[0], in[stride], ..., in[(n - 1) stride] (n = product of
// factors_ from `level` on): the p decimated sub-sequences first, then the butterflies.
void FftPlan::transform(const Complex* in, int64_t stride, Complex* out, int64_t n, size_t level) const {
  const int64_t p = factors_[level], m = n / p;
  if (m == 1) {
    for (int64_t r = 0; r < p; ++r) out[r] = in[r * stride];
  } else {
    for (int64_t r = 0; r < p; ++r) transform(in + r * stride, stride * p, out + r * m, m, level + 1);
  }
  combine(out, n, p);
}

// out holds p transforms of length m = n / p one after another; each output group q
// (the values q, q + m, ..., q + (p - 1) m) becomes a p-point transform of the twiddled
// sub-results, written back in place.
void FftPlan::combine(Complex* out, int64_t n, int64_t p) const {
  const int64_t m = n / p, step = n_ / n;
  const Complex* w = twiddles_.data();
  const Complex rotate(0, double(sign_));  // e^{sign 2 pi i / 4}
  Complex t[kMaxRadix];
  for (int64_t q = 0; q < m; ++q) {
    t[0] = out[q];
    for (int64_t r = 1; r < p; ++r) t[r] = mul(out[r * m + q], w[r * q * step]);
    if (p == 2) {
      out[q] = t[0] + t[1];
      out[q + m] = t[0] - t[1];
    } else if (p == 4) {
      const Complex even_sum = t[0] + t[2], even_diff = t[0] - t[2];
      const Complex odd_sum = t[1] + t[3], odd_diff = mul(rotate, t[1] - t[3]);
      out[q] = even_sum + odd_sum;
      out[q + m] = even_diff + odd_diff;
      out[q + 2 * m] = even_sum - odd_sum;
      out[q + 3 * m] = even_diff - odd_diff;
    } else {
      for (int64_t s = 0; s < p; ++s) {
        Complex acc = t[0];
        for (int64_t r = 1; r < p; ++r) acc += mul(t[r], w[(r * s % p) * m * step]);
        out[q + s * m] = acc;
      }
    }
  }
}

// scratch: the convolution buffer a (m values), then the inner plan's scratch. The inverse
// transform of the convolution is conj(forward(conj(.))), so one inner plan serves both.
void FftPlan::bluestein(Complex* data, Complex* scratch) const {
  const int64_t m = convolution_->size();
  Complex* a = scratch;
  Complex* inner = scratch + m;
  for (int64_t j = 0; j < n_; ++j) a[j] = mul(data[j], chirp_[size_t(j)]);
  std::fill(a + n_, a + m, Complex(0));
  convolution_->run(a, inner);
  for (int64_t j = 0; j < m; ++j) a[j] = std::conj(mul(a[j], chirp_spectrum_[size_t(j)]));
  convolution_->run(a, inner);
  for (int64_t k = 0; k < n_; ++k) data[k] = mul(std::conj(a[k]), chirp_[size_t(k)]);
}

}  // namespace baton::kernels
