// conv_backward_weight_through_pool: per block of 8 output channels and input channel (the
// items threads share), the taps' sums run over every pooled position of every image. At
// each, the 8 channels' gradients land on one position of the window each (their offsets),
// so a window position's gradient vector is the pooled one where the offset names it (and
// the maximum is > 0), else 0; each tap then adds the window positions' vectors times the
// input pixels under them. Nothing of the convolution's output size is written.
#include "kernels/cpu/conv_through_pool.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <type_traits>
#include <tuple>
#include <utility>
#include <vector>
#include <immintrin.h>

#include "core/tensor_impl.h"
#include "kernels/cpu/channel_layout.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/finite.h"
#include "kernels/cpu/loops.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cpu/vec16.h"
#include "kernels/cpu/vec8.h"

namespace baton::kernels {
namespace {

constexpr int64_t kLanes = 8;  // output channels a item sums at once
template <class T>
using Lanes = std::array<T, kLanes>;

// Lanes [o0, o0 + 8) of t at pixel (n, py, px) of a pooled tensor; lanes past `channels` 0.
template <class T>
Lanes<T> lanes_at(const T* t, const ChannelLayout& l, int64_t n, int64_t o0, int64_t channels, int64_t py,
                  int64_t px) {
  Lanes<T> v{};
  const int64_t count = std::min(kLanes, channels - o0);
  for (int64_t i = 0; i < count; ++i) v[size_t(i)] = t[l.at(n, o0 + i, py, px)];
  return v;
}

struct Operands {
  const ConvGeom& g;
  const PoolGeom& p;
  const Tensor &gy, &offsets, *maxima, &x;  // offsets: i32, or u8 window codes (then no maxima)
  ChannelLayout lg, lo, lm, lx;  // of gy, offsets, maxima (gy's if none) and x
  bool codes() const { return offsets.dtype() == u8; }
};

// Per lane of a pooled pixel's 8 channels: its window position (-1 for a code that is not
// one), and where its gradient lands (the position, or -1 where it does not count: the
// maximum <= 0, from the maxima or the code's bit).
template <class T>
std::pair<Lanes<int32_t>, Lanes<int32_t>> landings(const Operands& op, int64_t n, int64_t o0, int64_t py,
                                                   int64_t px) {
  const int64_t channels = op.g.o;
  Lanes<int32_t> at, lands;
  if (op.codes()) {
    const Lanes<uint8_t> code = lanes_at(op.offsets.data<uint8_t>(), op.lo, n, o0, channels, py, px);
    for (size_t l = 0; l < kLanes; ++l) {
      at[l] = window_code_position(code[l]);
      lands[l] = window_code_live(code[l]) ? at[l] : -1;
    }
    return {at, lands};
  }
  at = lanes_at(op.offsets.data<int32_t>(), op.lo, n, o0, channels, py, px);
  lands = at;
  if (op.maxima) {
    const Lanes<T> maximum = lanes_at(op.maxima->data<T>(), op.lm, n, o0, channels, py, px);
    for (size_t l = 0; l < kLanes; ++l) lands[l] = maximum[l] > T(0) ? at[l] : -1;
  }
  return {at, lands};
}

// The weight (and, for input channel 0, bias) gradients of output channels [o0, o0 + 8)
// from input channel c. Returns false if an offset lies outside its window.
template <class T>
bool sum_item(const Operands& op, int64_t o0, int64_t c, T* gw, T* gb) {
  const ConvGeom& g = op.g;
  const PoolGeom& p = op.p;
  const ChannelLayout &sg = op.lg, &sx = op.lx;
  const T *pg = op.gy.data<T>(), *px_ = op.x.data<T>();
  const int64_t window = p.kh * p.kw, taps = g.kh * g.kw;
  std::vector<Lanes<T>> sums(static_cast<size_t>(taps), Lanes<T>{});
  std::vector<Lanes<T>> grads(static_cast<size_t>(window));  // per window position
  Lanes<T> bias{};
  bool valid = true;
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t py = 0; py < p.oh; ++py)
      for (int64_t px = 0; px < p.ow; ++px) {
        const Lanes<T> grad = lanes_at(pg, sg, n, o0, g.o, py, px);
        const auto [at, lands] = landings<T>(op, n, o0, py, px);
        for (size_t l = 0; l < kLanes; ++l) valid &= uint32_t(at[l]) < uint32_t(window);
        for (int64_t w = 0; w < window; ++w)
          for (size_t l = 0; l < kLanes; ++l) grads[size_t(w)][l] = lands[l] == w ? grad[l] : T(0);
        if (c == 0)
          for (int64_t w = 0; w < window; ++w)
            for (size_t l = 0; l < kLanes; ++l) bias[l] += grads[size_t(w)][l];
        // Tap (ky, kx) of window position (wy, wx) reads input pixel (iy, ix).
        for (int64_t ky = 0; ky < g.kh; ++ky)
          for (int64_t kx = 0; kx < g.kw; ++kx) {
            Lanes<T>& sum = sums[size_t(ky * g.kw + kx)];
            for (int64_t wy = 0; wy < p.kh; ++wy) {
              const int64_t iy = (py * p.sh + wy) * g.sh - g.ph + ky * g.dh;
              if (iy < 0 || iy >= g.h) continue;
              for (int64_t wx = 0; wx < p.kw; ++wx) {
                const int64_t ix = (px * p.sw + wx) * g.sw - g.pw + kx * g.dw;
                if (ix < 0 || ix >= g.w) continue;
                const T pixel = px_[sx.at(n, c, iy, ix)];
                const Lanes<T>& d = grads[size_t(wy * p.kw + wx)];
                for (size_t l = 0; l < kLanes; ++l) sum[l] += d[l] * pixel;
              }
            }
          }
      }
  const int64_t count = std::min(kLanes, g.o - o0);
  for (int64_t l = 0; l < count; ++l) {
    for (int64_t t = 0; t < taps; ++t) gw[((o0 + l) * g.c + c) * taps + t] = sums[size_t(t)][size_t(l)];
    if (c == 0) gb[o0 + l] = bias[size_t(l)];
  }
  return valid;
}

// The f32 path for 3x3 convolutions under 2x2 windows whose gradients, offsets and maxima
// hold each pixel's channels side by side (channels-last) in blocks of 8: a share of the
// images per part, the taps' sums of the part in L1. Stride 1 and no dilation (the usual
// first layer) take the permuted path below for the windows whose patch lies inside the
// image; the others, and every window of other geometries, take the general one.
constexpr int kTaps = 9, kWindow = 4;

bool fits_vectors(const Operands& op) {
  return op.gy.dtype() == f32 && op.g.kh == 3 && op.g.kw == 3 && op.p.kh == 2 && op.p.kw == 2 &&
         op.g.o % kLanes == 0 && op.lg.groups_of_8_inner() && op.lo.groups_of_8_inner() && op.lm.groups_of_8_inner();
}

// v's lanes in the order `lane` names them (lane values 0-7).
F32x8 permute(F32x8 v, I32x8 lane) {
#if defined(__AVX2__)
  return F32x8(_mm256_permutevar8x32_ps(__m256(v), __m256i(lane)));
#else
  F32x8 r;
  for (int l = 0; l < kLanes; ++l) r[l] = v[lane[l] & 7];
  return r;
#endif
}

// One part's sums: taps [o / 8][c][9] and bias [o / 8], 8 output channels a vector.
struct PartSums {
  std::vector<F32x8> taps, bias;
  I32x8 outside{};  // lanes whose offset lay outside the window
};

// The pooled gradients' places: per block of 8 output channels, where its lanes start in
// gy, the offsets and the maxima (ChannelLayout::channel_offset divides: found once).
struct BlockStarts {
  std::vector<int64_t> gy, offsets, maxima;
  explicit BlockStarts(const Operands& op) {
    for (int64_t o0 = 0; o0 < op.g.o; o0 += kLanes) {
      gy.push_back(op.lg.channel_offset(o0));
      offsets.push_back(op.lo.channel_offset(o0));
      maxima.push_back(op.lm.channel_offset(o0));
    }
  }
};

// Block b's window positions and which of their gradients count, pixel by pixel: from i32
// offsets and the maxima (> 0), or from window codes (a code that is not one: position -1).
class BlockWindows {
 public:
  BlockWindows(const Operands& op, const BlockStarts& starts, size_t b)
      : so_(op.lo),
        sm_(op.lm),
        offsets_(op.codes() ? nullptr : op.offsets.data<int32_t>() + starts.offsets[b]),
        codes_(op.codes() ? op.offsets.data<uint8_t>() + starts.offsets[b] : nullptr),
        maxima_(op.maxima ? op.maxima->data<float>() + starts.maxima[b] : nullptr) {}

  void at(int64_t n, int64_t py, int64_t px, I32x8& position, I32x8& counts) const {
    if (codes_) {  // window_code_position and window_code_live, 8 lanes at once
      constexpr int32_t live = kWindowCodeLive;
      const I32x8 code = load_bytes(codes_ + so_.pixel_at(n, py, px));
      position = (code & (live - 1)) | ~(code < 2 * live);
      counts = (code & live) != 0;
      return;
    }
    position = load8<I32x8>(offsets_ + so_.pixel_at(n, py, px));
    counts = maxima_ ? I32x8(load8<F32x8>(maxima_ + sm_.pixel_at(n, py, px)) > 0.0f) : I32x8{} - 1;
  }

 private:
  const ChannelLayout &so_, &sm_;
  const int32_t* offsets_;
  const uint8_t* codes_;
  const float* maxima_;
};

// The pooled pixels [y0, y1) x [x0, x1) whose 4x4 patch of a stride-1, undilated
// convolution's input lies inside the image (none if the convolution is not such).
struct InsideWindows {
  int64_t y0 = 0, y1 = 0, x0 = 0, x1 = 0;
  int64_t width() const { return x1 - x0; }
  int64_t count() const { return (y1 - y0) * width(); }
  bool contains(int64_t py, int64_t px) const { return py >= y0 && py < y1 && px >= x0 && px < x1; }
};

// The run [first, last] of pooled positions whose patch [start, start + 4) lies in [0, size).
std::pair<int64_t, int64_t> inside_run(int64_t pooled, int64_t step, int64_t pad, int64_t size) {
  int64_t first = pooled, last = -1;
  for (int64_t i = 0; i < pooled; ++i)
    if (i * step - pad >= 0 && i * step - pad + 3 < size) first = std::min(first, i), last = i;
  return {first, last + 1};
}

InsideWindows inside_windows(const ConvGeom& g, const PoolGeom& p) {
  if (g.sh != 1 || g.sw != 1 || g.dh != 1 || g.dw != 1) return {};
  const auto [y0, y1] = inside_run(p.oh, p.sh, g.ph, g.h);
  const auto [x0, x1] = inside_run(p.ow, p.sw, g.pw, g.w);
  if (y0 >= y1 || x0 >= x1) return {};
  return {y0, y1, x0, x1};
}

// The permuted path over image n's inside windows. Rows ky and ky + 1 of a window's 4x4
// patch, side by side in one vector, hold every pixel tap row ky reads: each lane's pixel
// for tap (ky, kx) is lane 4 * wy + wx + kx of that vector, (wy, wx) the lane's window
// position. One permute and one FMA a tap, against four FMAs (three of them by zeros) for
// the general path. Per input channel, the patches' row pairs are gathered once; then per
// block of output channels, one pass over the windows keeps the nine taps' sums in
// registers.
class PermutedWindows {
 public:
  PermutedWindows(const Operands& op, const BlockStarts& starts, const InsideWindows& inside)
      : op_(op), starts_(starts), inside_(inside), row_pairs_(size_t(inside.count() * 3)) {}

  void add_image(int64_t n, PartSums& part) {
    for (int64_t c = 0; c < op_.g.c; ++c) {
      gather_row_pairs(n, c);
      for (size_t b = 0; b < starts_.gy.size(); b += wide_ ? 2 : 1) {
        F32x8* taps = part.taps.data() + (int64_t(b) * op_.g.c + c) * kTaps;
        if (wide_) {  // blocks b and b + 1 at once
          F32x8* next = taps + op_.g.c * kTaps;
          add_blocks_wide(n, b, c == 0, taps, next, &part.bias[b], &part.outside);
        } else if (c == 0) {  // the bias and the offsets' check once per pooled gradient
          add_block<true>(n, b, taps, part.bias[b], part.outside);
        } else {
          add_block<false>(n, b, taps, part.bias[b], part.outside);
        }
      }
    }
  }

 private:
  void gather_row_pairs(int64_t n, int64_t c) {
    const ChannelLayout& sx = op_.lx;
    const float* channel = op_.x.data<float>() + sx.channel_offset(c);
    F32x8* pair = row_pairs_.data();
    for (int64_t py = inside_.y0; py < inside_.y1; ++py)
      for (int64_t px = inside_.x0; px < inside_.x1; ++px)
        for (int64_t ky = 0; ky < 3; ++ky, ++pair) {
          const float* first = channel + sx.pixel_at(n, py * op_.p.sh - op_.g.ph + ky, px * op_.p.sw - op_.g.pw);
          if (sx.pixel == 1) {  // two loads of 4 pixels
            std::memcpy(pair, first, 4 * sizeof(float));
            std::memcpy(reinterpret_cast<float*>(pair) + 4, first + sx.row, 4 * sizeof(float));
            continue;
          }
          for (int l = 0; l < kLanes; ++l) (*pair)[l] = first[l / 4 * sx.row + l % 4 * sx.pixel];
        }
  }

  template <bool kFirstChannel>
  void add_block(int64_t n, size_t b, F32x8* taps, F32x8& bias_sum, I32x8& outside_lanes) {
    const ChannelLayout& sg = op_.lg;
    const float* pg = op_.gy.data<float>() + starts_.gy[b];
    const BlockWindows windows(op_, starts_, b);
    F32x8 sums[kTaps], bias = bias_sum;
    I32x8 outside = outside_lanes;
    for (int t = 0; t < kTaps; ++t) sums[t] = taps[t];
    const F32x8* pair = row_pairs_.data();
    for (int64_t py = inside_.y0; py < inside_.y1; ++py)
      for (int64_t px = inside_.x0; px < inside_.x1; ++px, pair += 3) {
        const F32x8 grad = load8<F32x8>(pg + sg.pixel_at(n, py, px));
        I32x8 at, counts;
        windows.at(n, py, px, at, counts);
        const F32x8 counted = F32x8((I32x8)grad & counts);
        const I32x8 lane = (at >> 1) * 4 + (at & 1);  // of window position at in a row pair
        if constexpr (kFirstChannel) {
          bias += counted;
          outside |= (at < 0) | (at >= kWindow);
        }
#pragma GCC unroll 3
        for (int ky = 0; ky < 3; ++ky)
#pragma GCC unroll 3
          for (int kx = 0; kx < 3; ++kx) sums[ky * 3 + kx] += counted * permute(pair[ky], lane + kx);
      }
    for (int t = 0; t < kTaps; ++t) taps[t] = sums[t];
    bias_sum = bias;
    outside_lanes = outside;
  }

  // add_block over two blocks of 8 channels side by side (16 lanes) on AVX-512 machines:
  // each lane sums the same products in the same order, so the bits are add_block's.
  // taps and next: the two blocks' nine sums; bias: theirs, side by side.
  __attribute__((target("avx512f"))) void add_blocks_wide(int64_t n, size_t b, bool first_channel, F32x8* taps,
                                                          F32x8* next, F32x8* bias_sums, I32x8* outside_lanes) {
    F32x16 sums[kTaps];
    for (int t = 0; t < kTaps; ++t) sums[t] = joined(taps[t], next[t]);
    F32x16 bias = joined(bias_sums[0], bias_sums[1]);
    I32x16 outside{};
    const float* pg = op_.gy.data<float>() + starts_.gy[b];
    const bool codes = op_.codes();
    const uint8_t* pc = codes ? op_.offsets.data<uint8_t>() + starts_.offsets[b] : nullptr;
    const int32_t* po = codes ? nullptr : op_.offsets.data<int32_t>() + starts_.offsets[b];
    const float* pm = op_.maxima ? op_.maxima->data<float>() + starts_.maxima[b] : nullptr;
    const F32x8* pair = row_pairs_.data();
    for (int64_t py = inside_.y0; py < inside_.y1; ++py)
      for (int64_t px = inside_.x0; px < inside_.x1; ++px, pair += 3) {
        F32x16 grad;
        std::memcpy(&grad, pg + op_.lg.pixel_at(n, py, px), sizeof grad);
        I32x16 at, counts;
        if (codes) {  // BlockWindows::at's decoding, 16 lanes
          constexpr int32_t live = kWindowCodeLive;
          U8x16 bytes;
          std::memcpy(&bytes, pc + op_.lo.pixel_at(n, py, px), sizeof bytes);
          const I32x16 code = __builtin_convertvector(bytes, I32x16);
          at = (code & (live - 1)) | ~(code < 2 * live);
          counts = (code & live) != 0;
        } else {
          std::memcpy(&at, po + op_.lo.pixel_at(n, py, px), sizeof at);
          F32x16 maximum{};
          if (pm) std::memcpy(&maximum, pm + op_.lm.pixel_at(n, py, px), sizeof maximum);
          counts = pm ? I32x16(maximum > 0.0f) : I32x16{} - 1;
        }
        const F32x16 counted = F32x16(I32x16(grad) & counts);
        const I32x16 lane = (at >> 1) * 4 + (at & 1);
        if (first_channel) {
          bias += counted;
          outside |= (at < 0) | (at >= kWindow);
        }
#pragma GCC unroll 3
        for (int ky = 0; ky < 3; ++ky) {
          const F32x16 rows = joined(pair[ky], pair[ky]);  // lanes 0-7 of either half name its pixels
#pragma GCC unroll 3
          for (int kx = 0; kx < 3; ++kx) {  // (zero-masked: GCC 12's plain form warns of its undefined source)
            const __m512 picked = _mm512_maskz_permutexvar_ps(0xFFFF, __m512i(lane + kx), __m512(rows));
            sums[ky * 3 + kx] += counted * F32x16(picked);
          }
        }
      }
    for (int t = 0; t < kTaps; ++t) {
      taps[t] = low_half(sums[t]);
      next[t] = high_half(sums[t]);
    }
    bias_sums[0] = low_half(bias);
    bias_sums[1] = high_half(bias);
    if (first_channel) *outside_lanes |= low_half(outside) | high_half(outside);
  }

  const Operands& op_;
  const BlockStarts& starts_;
  const InsideWindows inside_;
  std::vector<F32x8> row_pairs_;  // per inside window, its patch's three row pairs
  // 16 lanes (two blocks at once): AVX-512, and every operand's groups of 16 channels side
  // by side.
  const bool wide_ = kHasAvx512 && op_.g.o % kVec16 == 0 && op_.lg.groups_inner(kVec16) &&
                     op_.lo.groups_inner(kVec16) && op_.lm.groups_inner(kVec16);
};

// sums[t] += the window positions' gradients times the pixels under tap t. `first`: the
// pixel under the window's first position and tap 0; `at(w, t)`: where the others lie.
template <class At>
void add_taps(const float* first, const F32x8 (&grads)[kWindow], F32x8* sums, At at) {
#pragma GCC unroll 9
  for (int t = 0; t < kTaps; ++t) {
    F32x8 sum = sums[t];
#pragma GCC unroll 4
    for (int w = 0; w < kWindow; ++w) sum += grads[w] * first[at(w, t)];
    sums[t] = sum;
  }
}

// The general path: image n's windows outside `skipped`, each tap the sum of the four
// window positions' gradients times the pixels under them.
void add_general_windows(const Operands& op, const BlockStarts& starts, const InsideWindows& skipped, int64_t n,
                         PartSums& part) {
  const ConvGeom& g = op.g;
  const PoolGeom& p = op.p;
  const ChannelLayout &sg = op.lg, &sx = op.lx;
  const float* pg = op.gy.data<float>();
  const float* image = op.x.data<float>();
  std::vector<BlockWindows> windows;
  for (size_t b = 0; b < starts.gy.size(); ++b) windows.emplace_back(op, starts, b);
  // Where window position w reads tap t, relative to `first`, in rows and columns.
  int64_t dy[kWindow][kTaps], dx[kWindow][kTaps], offset[kWindow][kTaps];
  for (int w = 0; w < kWindow; ++w)
    for (int t = 0; t < kTaps; ++t) {
      dy[w][t] = w / 2 * g.sh + t / 3 * g.dh;
      dx[w][t] = w % 2 * g.sw + t % 3 * g.dw;
      offset[w][t] = dy[w][t] * sx.row + dx[w][t] * sx.pixel;
    }
  const int64_t span_y = dy[kWindow - 1][kTaps - 1], span_x = dx[kWindow - 1][kTaps - 1];
  for (int64_t py = 0; py < p.oh; ++py)
    for (int64_t px = 0; px < p.ow; ++px) {
      if (skipped.contains(py, px)) continue;
      const int64_t y0 = py * p.sh * g.sh - g.ph, x0 = px * p.sw * g.sw - g.pw;
      const bool inside = y0 >= 0 && x0 >= 0 && y0 + span_y < g.h && x0 + span_x < g.w;
      for (size_t b = 0; b < starts.gy.size(); ++b) {
        const F32x8 grad = load8<F32x8>(pg + starts.gy[b] + sg.pixel_at(n, py, px));
        I32x8 at, counts;
        windows[b].at(n, py, px, at, counts);
        part.outside |= (at < 0) | (at >= kWindow);
        F32x8 grads[kWindow];
        for (int w = 0; w < kWindow; ++w) {
          grads[w] = F32x8((I32x8)grad & ((at == w) & counts));
          part.bias[b] += grads[w];
        }
        for (int64_t c = 0; c < g.c; ++c) {
          const float* first = image + sx.channel_offset(c) + sx.pixel_at(n, y0, x0);
          F32x8* sums = part.taps.data() + (int64_t(b) * g.c + c) * kTaps;
          if (inside) {
            add_taps(first, grads, sums, [&offset](int w, int t) { return offset[w][t]; });
            continue;
          }
          for (int t = 0; t < kTaps; ++t)
            for (int w = 0; w < kWindow; ++w) {
              const int64_t iy = y0 + dy[w][t], ix = x0 + dx[w][t];
              if (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w) sums[t] += grads[w] * first[offset[w][t]];
            }
        }
      }
    }
}

void sum_images_vectors(const Operands& op, int64_t n0, int64_t n1, PartSums& part) {
  const BlockStarts starts(op);
  const InsideWindows inside = inside_windows(op.g, op.p);
  PermutedWindows permuted(op, starts, inside);
  for (int64_t n = n0; n < n1; ++n) {
    if (inside.count()) permuted.add_image(n, part);
    add_general_windows(op, starts, inside, n, part);
  }
}

// The parts' sums added in order into gw and gb (one part per thread, at most one per
// image: a run gives the same bits as the last with as many threads). False if an offset
// lay outside its window.
bool sum_vectors(const Operands& op, float* gw, float* gb) {
  const ConvGeom& g = op.g;
  const int64_t parts = std::min<int64_t>(max_threads(), g.n), blocks = g.o / kLanes;
  std::vector<PartSums> sums(size_t(parts), PartSums{std::vector<F32x8>(size_t(blocks * g.c * kTaps), F32x8{}),
                                                     std::vector<F32x8>(size_t(blocks), F32x8{})});
  parallel_range(parts, [&](int64_t b, int64_t e) {
    for (int64_t part = b; part < e; ++part)
      sum_images_vectors(op, g.n * part / parts, g.n * (part + 1) / parts, sums[size_t(part)]);
  }, 1);
  I32x8 outside{};
  for (int64_t block = 0; block < blocks; ++block)
    for (int64_t l = 0; l < kLanes; ++l) {
      const int64_t o = block * kLanes + l;
      float bias = 0;
      for (const PartSums& part : sums) bias += part.bias[size_t(block)][l];
      gb[o] = bias;
      for (int64_t i = 0; i < g.c * kTaps; ++i) {
        float sum = 0;
        for (const PartSums& part : sums) sum += part.taps[size_t(block * g.c * kTaps + i)][l];
        gw[o * g.c * kTaps + i] = sum;
      }
    }
  for (const PartSums& part : sums) outside |= part.outside;
  return !any_lane(outside);
}

// t's values in a tensor whose strides tell their layout: t itself unless a plan stores it
// in channel blocks of `block` (its strides then say plain over blocked bytes).
Tensor unblocked(const Tensor& t, int64_t block) {
  if (!block) return t;
  const int64_t n = t.size(0), c = t.size(1), h = t.size(2), w = t.size(3);
  const Tensor blocks = make_view(t, {n, c / block, block, h, w}, {c * h * w, h * w * block, 1, w * block, block},
                                  t.offset());
  return reshaped(dense(blocks), {n, c, h, w});
}

// Window codes as i32 offsets (a code that is not one: an offset outside the window) and
// a mask of `dtype` (1 where the maximum was > 0, else 0).
std::pair<Tensor, Tensor> decoded(const Tensor& codes, DType dtype) {
  const Tensor c = dense(codes);
  Tensor offsets = empty(c.shape(), i32), mask = empty(c.shape(), f64);
  const uint8_t* from = c.data<uint8_t>();
  int32_t* at = offsets.data<int32_t>();
  double* live = mask.data<double>();
  for (int64_t i = 0; i < c.numel(); ++i) {
    at[i] = window_code_position(from[i]);
    live[i] = window_code_live(from[i]) ? 1.0 : 0.0;
  }
  return {offsets, converted(mask, dtype)};
}

// The weight and bias gradients as the unfused steps take them: the convolution's output
// gradient made (the pooling's backward), then the convolution's weight gradient of it.
void through_output_gradient(const ConvGeom& g, const PoolGeom& p, const Tensor& gy, const Tensor& offsets,
                             const Tensor* maxima, const Tensor& x, const Tensor& gw, const Tensor& gb,
                             const ThroughPoolBlocks& blocks) {
  const Tensor dy = empty(g.output_shape(), gy.dtype());
  Tensor at = unblocked(offsets, blocks.offsets), mask = maxima ? unblocked(*maxima, blocks.maxima) : Tensor();
  if (offsets.dtype() == u8) std::tie(at, mask) = decoded(at, gy.dtype());
  max_pool_window_backward(p, unblocked(gy, blocks.gy), at, dy, mask.defined() ? &mask : nullptr);
  const Tensor input = unblocked(x, blocks.x);
  if (gw.dtype() == f32) return conv_backward_weight_f32(g, dy, input, gw, nullptr, &gb);
  conv_backward_weight_f64(g, dy, input, gw);
  sum_into<double>(dy, {0, 2, 3}, gb.data<double>());
}

}  // namespace

void conv_backward_weight_through_pool(const ConvGeom& g, const PoolGeom& p, const Tensor& gy, const Tensor& offsets,
                                       const Tensor* maxima, const Tensor& x, const Tensor& gw, const Tensor& gb,
                                       const ThroughPoolBlocks& blocks) {
  // A pixel of x that is not finite makes each weight gradient whose tap reads it NaN when
  // taken from the output gradient (its zeros times the pixel), as eager does; the sums
  // over the gradients' landing places alone would miss that.
  if (has_non_finite(x)) return through_output_gradient(g, p, gy, offsets, maxima, x, gw, gb, blocks);
  const Operands op{g,
                    p,
                    gy,
                    offsets,
                    maxima,
                    x,
                    channel_layout(gy, blocks.gy),
                    channel_layout(offsets, blocks.offsets),
                    maxima ? channel_layout(*maxima, blocks.maxima) : channel_layout(gy, blocks.gy),
                    channel_layout(x, blocks.x)};
  const int64_t lane_blocks = (g.o + kLanes - 1) / kLanes;
  std::atomic<bool> valid{true};
  visit_float(gw.dtype(), "conv2d_backward_weight_bias_pooled", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, float>)
      if (fits_vectors(op)) {
        if (!sum_vectors(op, gw.data<float>(), gb.data<float>())) valid.store(false);
        return;
      }
    parallel_range(lane_blocks * g.c, [&](int64_t b, int64_t e) {
      for (int64_t item = b; item < e; ++item)
        if (!sum_item<T>(op, item / g.c * kLanes, item % g.c, gw.data<T>(), gb.data<T>()))
          valid.store(false, std::memory_order_relaxed);
    }, 1);
  });
  if (!valid.load())
    throw IndexError("conv2d_backward_weight_bias_pooled",
                     str("a window offset lies outside its ", p.kh, "x", p.kw, " window"), SourceLoc::current());
}

}  // namespace baton::kernels
