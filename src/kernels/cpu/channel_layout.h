// Where a rank-4 activation's elements lie, for loops that walk channels in groups of 8
// over tensors of any strides or in the channel blocks a plan stores them in (nChw8c,
// nChw16c: runtime/specialize.cpp), whose tensors carry plain strides over blocked bytes.
#pragma once
#include <algorithm>
#include <cstdint>

#include "baton/tensor.h"
#include "kernels/cpu/pool.h"

namespace baton::kernels {

// (n, c, y, x) lies at n * image + c / block * block_stride + c % block * channel +
// y * row + x * pixel. A strided tensor is one block of all its channels.
struct ChannelLayout {
  int64_t image, block, block_stride, channel, row, pixel;
  int64_t at(int64_t n, int64_t c, int64_t y, int64_t x) const { return channel_offset(c) + pixel_at(n, y, x); }
  // The two parts of at(): loops take the channel's (two divisions) out of their pixels.
  int64_t channel_offset(int64_t c) const { return c / block * block_stride + c % block * channel; }
  int64_t pixel_at(int64_t n, int64_t y, int64_t x) const { return n * image + y * row + x * pixel; }
  // Whether each group of `lanes` channels from a multiple of `lanes` lies side by side.
  bool groups_inner(int64_t lanes) const { return channel == 1 && block % lanes == 0; }
  bool groups_of_8_inner() const { return groups_inner(8); }
};

// t's layout: its strides, or channel blocks of `blocked` (8 or 16) when non-zero.
inline ChannelLayout channel_layout(const Tensor& t, int64_t blocked) {
  const int64_t c = t.size(1), h = t.size(2), w = t.size(3);
  if (blocked) return {c * h * w, blocked, h * w * blocked, 1, w * blocked, blocked};
  const Strides4 s(t);
  return {s.n, std::max<int64_t>(c, 1), 0, s.c, s.y, s.x};
}

}  // namespace baton::kernels
