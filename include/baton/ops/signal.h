// Signal processing: discrete Fourier transforms, the short-time Fourier transform, the
// classic windows and the mel filter bank (ONNX DFT, STFT, HannWindow, HammingWindow,
// BlackmanWindow, MelWeightMatrix). Complex numbers live in a trailing dim of size 2
// (real, imaginary); a trailing dim of size 1 holds a real signal.
#pragma once
#include "baton/tensor.h"

namespace baton {

// The DFT along `dim` (not the last) of x [..., n, ..., 1 or 2] (f32 or f64), computed in
// double. The signal is cut or zero-padded to `length` (-1: n). inverse scales by
// 1/length. Output [..., length, ..., 2]; with onesided, the forward transform keeps
// bins 0..length/2 (a real input's spectrum is conjugate-symmetric), and the inverse reads
// x as such a half spectrum and returns the real signal [..., length, ..., 1] (-1: length
// 2 (n - 1)). Differentiable (the gradient is the adjoint transform).
Tensor dft(const Tensor& x, int64_t dim, int64_t length = -1, bool inverse = false, bool onesided = false,
           SourceLoc loc = SourceLoc::current());

// The short-time Fourier transform of signal [batch, n, 1 or 2]: frames of frame_length
// samples every frame_step samples, each multiplied by `window` ([frame_length]; none:
// all ones) and transformed. frame_length -1 takes the window's length (or n without a
// window). Output [batch, frames, bins, 2], frames = 1 + (n - frame_length) / frame_step,
// bins = frame_length / 2 + 1 when onesided, else frame_length. Differentiable in signal
// and window.
Tensor stft(const Tensor& signal, int64_t frame_step, const Tensor& window = Tensor(), int64_t frame_length = -1,
            bool onesided = true, SourceLoc loc = SourceLoc::current());

// Windows of `size` points, w[j] = sum_k (-1)^k a_k cos(2 pi k j / N), N = size when
// periodic (for spectral analysis), size - 1 when symmetric (for filter design).
// Hann: a = (0.5, 0.5); Hamming: (25/46, 21/46); Blackman: (0.42, 0.5, 0.08).
Tensor hann_window(int64_t size, bool periodic = true, DType dtype = f32, SourceLoc loc = SourceLoc::current());
Tensor hamming_window(int64_t size, bool periodic = true, DType dtype = f32, SourceLoc loc = SourceLoc::current());
Tensor blackman_window(int64_t size, bool periodic = true, DType dtype = f32, SourceLoc loc = SourceLoc::current());

// The [dft_length / 2 + 1, num_mel_bins] matrix that maps a one-sided power spectrum to
// mel bands: triangular filters between mel-spaced edges from lower_edge_hertz to
// upper_edge_hertz, with ONNX MelWeightMatrix's bin rounding (src/ops/mel.cpp).
Tensor mel_weight_matrix(int64_t num_mel_bins, int64_t dft_length, int64_t sample_rate, double lower_edge_hertz,
                         double upper_edge_hertz, DType dtype = f32, SourceLoc loc = SourceLoc::current());

}  // namespace baton
