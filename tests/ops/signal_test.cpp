// Signal ops (src/ops/dft.cpp, stft.cpp, windows.cpp, mel.cpp). dft and stft against the
// defining sums evaluated directly in double (O(n^2)), for smooth lengths (mixed radix),
// prime lengths past the largest radix (Bluestein), padding, cutting, every form (full,
// onesided, inverse, IRFFT) and gradients by the harness; windows and the mel matrix
// against their closed forms; errors.
#include <cmath>
#include <complex>

#include "harness/op_harness.h"

namespace baton::testing {
namespace {

struct Around {
  int64_t outer = 1, n = 1, inner = 1, c = 1;
};

Around around(const Shape& s, int64_t dim) {
  Around a;
  for (int64_t d = 0; d < int64_t(s.size()); ++d) {
    if (d < dim) a.outer *= s[size_t(d)];
    else if (d == dim) a.n = s[size_t(d)];
    else if (d + 1 < int64_t(s.size())) a.inner *= s[size_t(d)];
  }
  a.c = s.back();
  return a;
}

// The DFT by its definition. irfft: X[k] for k <= L/2 from x (zero past n), conj(X[L - k])
// above, and the real part of the inverse sum.
Tensor dft_by_definition(const Tensor& x, int64_t dim, int64_t length, bool inverse, bool onesided) {
  const std::vector<double> v = x.contiguous().to_vector<double>();
  const Around a = around(x.shape(), dim);
  const bool irfft = inverse && onesided;
  const int64_t bins = irfft ? length : onesided ? length / 2 + 1 : length, c_out = irfft ? 1 : 2;
  Shape shape = x.shape();
  shape[size_t(dim)] = bins;
  shape.back() = c_out;
  std::vector<double> out(size_t(shape.numel()));
  const double sign = inverse ? 1 : -1, scale = inverse ? 1.0 / double(length) : 1.0;
  auto value = [&](int64_t o, int64_t t, int64_t i) -> std::complex<double> {
    if (t >= a.n) return 0;
    const size_t at = size_t(((o * a.n + t) * a.inner + i) * a.c);
    return {v[at], a.c == 2 ? v[at + 1] : 0.0};
  };
  for (int64_t o = 0; o < a.outer; ++o)
    for (int64_t i = 0; i < a.inner; ++i)
      for (int64_t k = 0; k < bins; ++k) {
        std::complex<double> sum = 0;
        for (int64_t t = 0; t < length; ++t) {
          std::complex<double> xt = value(o, t, i);
          if (irfft) xt = t <= length / 2 ? value(o, t, i) : std::conj(value(o, length - t, i));
          sum += xt * std::polar(1.0, sign * 2 * M_PI * double((k * t) % length) / double(length));
        }
        const size_t at = size_t(((o * bins + k) * a.inner + i) * c_out);
        out[at] = sum.real() * scale;
        if (c_out == 2) out[at + 1] = sum.imag() * scale;
      }
  return tensor(out, shape);
}

OpCase dft_case(const std::string& what, Shape shape, int64_t dim, int64_t length, bool inverse = false,
                bool onesided = false) {
  OpCase c;
  c.name = str("signal.dft/", what);
  c.make_inputs = [shape] { return Inputs{uniform(shape, -2, 2, 3)}; };
  c.fn = [=](const Inputs& in) { return dft(in[0], dim, length, inverse, onesided); };
  c.reference = [=](const Inputs& in) {
    const int64_t d = dim < 0 ? dim + in[0].dim() : dim;
    const int64_t n = in[0].shape()[size_t(d)];
    const int64_t l = length > 0 ? length : inverse && onesided ? 2 * (n - 1) : n;
    return dft_by_definition(in[0], d, l, inverse, onesided);
  };
  return c;
}

// The STFT by its definition: frame f is signal[f * step + j], j < frame_length.
Tensor stft_by_definition(const Tensor& signal, int64_t step, const Tensor& window, int64_t frame_length,
                          bool onesided) {
  const int64_t batch = signal.shape()[0], n = signal.shape()[1], c = signal.shape()[2];
  const int64_t frames = 1 + (n - frame_length) / step;
  const std::vector<double> v = signal.contiguous().to_vector<double>();
  const std::vector<double> w = window.defined() ? window.to_vector<double>() : std::vector<double>(size_t(frame_length), 1.0);
  std::vector<double> framed;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t f = 0; f < frames; ++f)
      for (int64_t j = 0; j < frame_length; ++j)
        for (int64_t p = 0; p < c; ++p) framed.push_back(v[size_t((b * n + f * step + j) * c + p)] * w[size_t(j)]);
  return dft_by_definition(tensor(framed, {batch, frames, frame_length, c}), 2, frame_length, false, onesided);
}

OpCase stft_case(const std::string& what, Shape shape, int64_t step, int64_t frame_length, bool with_window,
                 bool onesided = true) {
  OpCase c;
  c.name = str("signal.stft/", what);
  c.make_inputs = [=] {
    Inputs in{uniform(shape, -1, 1, 4)};
    if (with_window) in.push_back(uniform({frame_length}, 0, 1, 5));
    return in;
  };
  c.fn = [=](const Inputs& in) { return stft(in[0], step, with_window ? in[1] : Tensor(), frame_length, onesided); };
  c.reference = [=](const Inputs& in) {
    return stft_by_definition(in[0], step, with_window ? in[1] : Tensor(), frame_length, onesided);
  };
  c.covers = {"dft"};
  return c;
}

BATON_OP_CASES {
  return {
      dft_case("real", {2, 8, 3, 1}, 1, -1),
      dft_case("complex_mixed_radix", {3, 12, 2}, 1, -1),
      dft_case("complex_radix_5_7", {35, 2, 2}, 0, -1),
      dft_case("prime_bluestein", {2, 37, 2}, 1, -1),
      dft_case("inverse", {2, 5, 4, 2}, 2, -1, true),
      dft_case("inverse_real_input", {6, 1}, 0, -1, true),
      dft_case("zero_padded", {2, 5, 2}, 1, 8),
      dft_case("cut", {2, 10, 1}, -2, 6),
      dft_case("onesided_even", {2, 10, 1}, 1, -1, false, true),
      dft_case("onesided_odd", {9, 3, 1}, 0, -1, false, true),
      dft_case("onesided_complex", {2, 6, 2}, 1, -1, false, true),
      dft_case("irfft_even", {2, 6, 2}, 1, -1, true, true),
      dft_case("irfft_odd_length", {2, 5, 2}, 1, 9, true, true),
      dft_case("irfft_cut", {7, 2, 2}, 0, 6, true, true),
      dft_case("irfft_real_input", {4, 1}, 0, -1, true, true),
      dft_case("length_one", {3, 1, 2}, 1, -1),
      stft_case("real", {2, 20, 1}, 4, 8, false),
      stft_case("window", {1, 21, 1}, 3, 6, true),
      stft_case("complex_window_twosided", {2, 16, 2}, 5, 7, true, false),
  };
}

TEST(Dft, LongLengthsMatchTheDefinition) {
  // 1024 = 4^5, 1000 = 4 * 2 * 5^3, 3 * 29 * 11, primes 1031 and 4099 (Bluestein), 2 * 1031.
  for (int64_t n : {1024, 1000, 957, 1031, 4099, 2062}) {
    Tensor x = uniform({2, n, 2}, -1, 1, uint64_t(n));
    Tensor expected = dft_by_definition(x, 1, n, false, false);
    EXPECT_ALL_CLOSE(dft(x, 1), expected, 1e-9 * std::sqrt(double(n)), 1e-9) << "n " << n;
    EXPECT_ALL_CLOSE(dft(dft(x, 1), 1, -1, true), x, 1e-12, 1e-9) << "round trip, n " << n;
  }
}

TEST(Dft, F32IsComputedInDouble) {
  Tensor x = uniform({1, 4096, 1}, -1, 1, 9);
  Tensor y = dft(x.to(f32), 1);
  EXPECT_EQ(y.dtype(), f32);
  // Errors near f32 rounding of the results, not growing with n as an f32 FFT's would.
  EXPECT_ALL_CLOSE(y.to(f64), dft(x, 1), 1e-4, 1e-6);
}

TEST(Dft, KnownValues) {
  // x = [1, 2, 3, 4]: X = [10, -2 + 2i, -2, -2 - 2i].
  Tensor x = tensor<double>({{1}, {2}, {3}, {4}});
  EXPECT_ALL_CLOSE(dft(x, 0), tensor<double>({{10, 0}, {-2, 2}, {-2, 0}, {-2, -2}}), 1e-12, 0);
  EXPECT_ALL_CLOSE(dft(x, 0, -1, false, true), tensor<double>({{10, 0}, {-2, 2}, {-2, 0}}), 1e-12, 0);
  // IRFFT of the half spectrum gives the signal back (default length 2 (3 - 1) = 4).
  EXPECT_ALL_CLOSE(dft(dft(x, 0, -1, false, true), 0, -1, true, true), x, 1e-12, 0);
}

TEST(Dft, SecondDerivativeOfAQuadraticForm) {
  // |X|^2 summed is n |x|^2 (Parseval): its gradient is 2 n x, and grad of grad exists.
  Tensor x = uniform({6, 2}, -1, 1, 2).requires_grad_();
  Tensor energy = (dft(x, 0) * dft(x, 0)).sum();
  Tensor g = grad({energy}, {x}, {}, true, true)[0];
  EXPECT_ALL_CLOSE(g, x.detach() * 12.0, 1e-12, 1e-12);
  Tensor gg = grad({(g * g).sum()}, {x})[0];
  EXPECT_ALL_CLOSE(gg, x.detach() * 288.0, 1e-10, 1e-12);
}

TEST(Dft, Errors) {
  Tensor x = zeros({2, 4, 2});
  const int line = __LINE__ + 1;
  EXPECT_THROWS_WITH(IndexError, dft(x, 2), "[dft]", "dim 2", "complex parts", "f32[2,4,2]",
                     "signal_test.cpp:" + std::to_string(line));
  EXPECT_THROWS_WITH(IndexError, dft(x, 3), "[dft]", "dim 3");
  EXPECT_THROWS_WITH(ShapeError, dft(zeros({2, 4, 3}), 1), "[dft]", "size 2", "not size 3");
  EXPECT_THROWS_WITH(ShapeError, dft(zeros({4}), 0), "[dft]", "rank 1");
  EXPECT_THROWS_WITH(ValueError, dft(x, 1, 0), "[dft]", "length 0");
  EXPECT_THROWS_WITH(ValueError, dft(x, 1, int64_t(1) << 40), "[dft]", "out of range");
  EXPECT_THROWS_WITH(ValueError, dft(zeros({2, 1, 2}), 1, -1, true, true), "[dft]", "length 0");
  EXPECT_THROWS_WITH(DTypeError, dft(zeros({2, 4, 2}, i64), 1), "[dft]", "i64");
}

TEST(Stft, Errors) {
  Tensor s = zeros({1, 16, 1});
  EXPECT_THROWS_WITH(ShapeError, stft(zeros({16, 1}), 4), "[stft]", "[batch, n, 1]", "f32[16,1]");
  EXPECT_THROWS_WITH(ShapeError, stft(s, 4, Tensor(), 17), "[stft]", "frame_length 17", "[1, 16]");
  EXPECT_THROWS_WITH(ShapeError, stft(s, 0, Tensor(), 8), "[stft]", "frame_step", "0");
  EXPECT_THROWS_WITH(ShapeError, stft(s, 4, ones({8}), 6), "[stft]", "frame_length 6", "window f32[8]");
  EXPECT_THROWS_WITH(ShapeError, stft(s, 4, ones({2, 4})), "[stft]", "1-D");
  EXPECT_THROWS_WITH(DTypeError, stft(s, 4, ones({8}, f64)), "[stft]", "f64", "f32");
  // Without a window or a frame length: one frame of the whole signal.
  EXPECT_EQ(stft(s, 4).shape(), (Shape{1, 1, 9, 2}));
}

// w[j] = sum_k (-1)^k a_k cos(2 pi k j / N).
std::vector<double> cosine_sum(int64_t size, double period, std::vector<double> a) {
  std::vector<double> w;
  for (int64_t j = 0; j < size; ++j) {
    double v = 0;
    for (size_t k = 0; k < a.size(); ++k) v += (k % 2 ? -1 : 1) * a[k] * std::cos(2 * M_PI * double(k * j) / period);
    w.push_back(v);
  }
  return w;
}

TEST(Windows, ClosedForms) {
  for (bool periodic : {true, false}) {
    const double period = periodic ? 10 : 9;
    EXPECT_ALL_CLOSE(hann_window(10, periodic, f64), tensor(cosine_sum(10, period, {0.5, 0.5}), {10}), 1e-15, 0);
    EXPECT_ALL_CLOSE(hamming_window(10, periodic, f64),
                     tensor(cosine_sum(10, period, {25.0 / 46, 21.0 / 46}), {10}), 1e-15, 0);
    EXPECT_ALL_CLOSE(blackman_window(10, periodic, f64),
                     tensor(cosine_sum(10, period, {0.42, 0.5, 0.08}), {10}), 1e-15, 0);
  }
  // The symmetric Hann window is 0 at both ends and 1 in the middle of an odd size.
  const std::vector<double> h = hann_window(5, false, f64).to_vector<double>();
  EXPECT_NEAR(h[0], 0, 1e-15);
  EXPECT_NEAR(h[2], 1, 1e-15);
  EXPECT_NEAR(h[4], 0, 1e-15);
  EXPECT_EQ(hann_window(4).dtype(), f32);
  EXPECT_EQ(hann_window(0).shape(), Shape{0});
  EXPECT_EQ(hann_window(1, false, f64).to_vector<double>(), std::vector<double>{1});
  EXPECT_THROWS_WITH(ValueError, hann_window(-1), "[hann_window]", "-1");
}

// The filter bank written out from ONNX's definition (its test generator's loops).
std::vector<double> mel_by_definition(int64_t mels, int64_t dft_length, int64_t rate, double low, double high) {
  auto mel = [](double hz) { return 2595 * std::log10(1 + hz / 700); };
  const double step = (mel(high) - mel(low)) / double(mels + 2);
  std::vector<int64_t> bin;
  for (int64_t b = 0; b < mels + 2; ++b) {
    const double hz = 700 * (std::pow(10, (double(b) * step + mel(low)) / 2595) - 1);
    bin.push_back(int64_t(std::floor(double(dft_length + 1) * hz / double(rate))));
  }
  const int64_t rows = dft_length / 2 + 1;
  std::vector<double> out(size_t(rows * mels), 0.0);
  for (int64_t i = 0; i < mels; ++i) {
    const int64_t l = bin[size_t(i)], c = bin[size_t(i + 1)], h = bin[size_t(i + 2)];
    if (c == l) out[size_t(c * mels + i)] = 1;
    else
      for (int64_t j = l; j <= c; ++j) out[size_t(j * mels + i)] = double(j - l) / double(c - l);
    for (int64_t j = c; j < h; ++j) out[size_t(j * mels + i)] = double(h - j) / double(h - c);
  }
  return out;
}

TEST(MelWeightMatrix, MatchesTheDefinition) {
  Tensor m = mel_weight_matrix(8, 16, 8192, 0, 4096);
  EXPECT_EQ(m.shape(), (Shape{9, 8}));
  EXPECT_EQ(m.dtype(), f32);
  EXPECT_ALL_CLOSE(m.to(f64), tensor(mel_by_definition(8, 16, 8192, 0, 4096), {9, 8}), 1e-7, 0);
  // ONNX's example: row 0 is [1, 1, 0, ...], row 1 [0, 0, 1, 1, 0, ...].
  const std::vector<float> v = m.to_vector<float>();
  EXPECT_EQ(std::vector<float>(v.begin(), v.begin() + 16),
            (std::vector<float>{1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0}));
  // Wider triangles: many spectrum bins per band.
  EXPECT_ALL_CLOSE(mel_weight_matrix(10, 512, 16000, 20, 8000, f64),
                   tensor(mel_by_definition(10, 512, 16000, 20, 8000), {257, 10}), 1e-15, 0);
}

TEST(MelWeightMatrix, Errors) {
  EXPECT_THROWS_WITH(ValueError, mel_weight_matrix(8, 16, 8192, 0, 9000), "[mel_weight_matrix]", "outside [0, 9)");
  EXPECT_THROWS_WITH(ValueError, mel_weight_matrix(8, 16, 8192, -500, 4000), "[mel_weight_matrix]", "edge 0");
  EXPECT_THROWS_WITH(ValueError, mel_weight_matrix(-1, 16, 8192, 0, 4000), "[mel_weight_matrix]", "num_mel_bins");
  EXPECT_THROWS_WITH(ValueError, mel_weight_matrix(8, 16, 0, 0, 4000), "[mel_weight_matrix]", "sample_rate");
}

}  // namespace
}  // namespace baton::testing
