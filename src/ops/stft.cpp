// stft (ONNX STFT): the short-time Fourier transform, composed of public ops. The frames
// of signal [batch, n, c] (c = 1 real, 2 complex), frame_length samples every frame_step,
// are gathered with one index_select into [batch, frames, frame_length, c], multiplied by
// the window and transformed along dim 2 by dft (onesided keeps bins 0..frame_length/2).
// The gradient follows from those ops: it flows to the signal (index_select's gradient
// adds each frame's share back) and to the window.
#include <vector>

#include "baton/ops.h"

namespace baton {
namespace {

[[noreturn]] void fail(const Tensor& signal, const Tensor& window, const std::string& message, SourceLoc loc) {
  std::string inputs = str(signal.dtype(), signal.shape());
  if (window.defined()) inputs += str(", window ", window.dtype(), window.shape());
  throw ShapeError("stft", str(message, "; inputs: ", inputs), loc);
}

// frames * frame_length sample positions: frame f reads f * step + j, j < frame_length.
Tensor frame_positions(int64_t frames, int64_t frame_length, int64_t step) {
  Tensor index = empty({frames * frame_length}, i64);
  int64_t* p = index.data<int64_t>();
  for (int64_t f = 0; f < frames; ++f)
    for (int64_t j = 0; j < frame_length; ++j) *p++ = f * step + j;
  return index;
}

}  // namespace

Tensor stft(const Tensor& signal, int64_t frame_step, const Tensor& window, int64_t frame_length, bool onesided,
            SourceLoc loc) {
  if (signal.dim() != 3 || (signal.shape()[2] != 1 && signal.shape()[2] != 2))
    fail(signal, window, "the signal must be [batch, n, 1] (real) or [batch, n, 2] (complex)", loc);
  const int64_t n = signal.shape()[1];
  if (sym::is_symbol(n)) fail(signal, window, "the signal length must be static", loc);
  if (window.defined()) {
    if (window.dim() != 1 || sym::is_symbol(window.shape()[0])) fail(signal, window, "the window must be 1-D and static", loc);
    if (window.dtype() != signal.dtype())
      throw DTypeError("stft", str("the window (", window.dtype(), ") and the signal (", signal.dtype(),
                                   ") must share a dtype"), loc);
    if (frame_length == -1) frame_length = window.shape()[0];
    if (frame_length != window.shape()[0])
      fail(signal, window, str("frame_length ", frame_length, " differs from the window's length"), loc);
  }
  if (frame_length == -1) frame_length = n;
  if (frame_length < 1 || frame_length > n)
    fail(signal, window, str("frame_length ", frame_length, " must be in [1, ", n, "] (the signal length)"), loc);
  if (frame_step < 1) fail(signal, window, str("frame_step must be positive, got ", frame_step), loc);
  const int64_t frames = 1 + (n - frame_length) / frame_step;
  Tensor framed = index_select(signal, 1, frame_positions(frames, frame_length, frame_step), loc);
  framed = reshape(framed, {signal.shape()[0], frames, frame_length, signal.shape()[2]}, loc);
  if (window.defined()) framed = framed * reshape(window, {1, 1, frame_length, 1}, loc);
  return dft(framed, 2, frame_length, false, onesided, loc);
}

}  // namespace baton
