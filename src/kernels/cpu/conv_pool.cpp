// conv_max_pool_forward: pooled rows (image, pooled row) go to threads. The vector path
// keeps 8 output channels a lane group: for each pooled pixel the 4 convolution outputs
// under its 2x2 window are summed in 4 registers, each input pixel of the 4x4 patch
// beneath broadcast once and multiplied into every window position it reaches (for one
// input channel the 9 taps' weights stay in registers); the 4 input rows of a pooled row
// are read in place, or first copied with zeros for the padding (Band). The window's
// maximum is found without the NaN rule and its sums only noted for NaN; a row where one
// turned up is done again by the general loops, which sum in the same order.
#include "kernels/cpu/conv_pool.h"

#include <cmath>
#include <cstring>
#include <optional>
#include <type_traits>
#include <vector>

#include "core/tensor_impl.h"
#include "kernels/cpu/channel_layout.h"
#include "kernels/cpu/conv_winograd.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/finite.h"
#include "kernels/cpu/loops.h"
#include "kernels/cpu/onednn.h"
#include "kernels/cpu/step_buffers.h"
#include "kernels/cpu/vec16.h"
#include "kernels/cpu/vec8.h"

namespace baton::kernels {
namespace {

Activation relu_or_none(bool relu) { return {.kind = relu ? Activation::Kind::relu : Activation::Kind::none}; }

struct Operands {
  const ConvGeom& g;
  const PoolGeom& p;
  bool relu;
  Strides4 sx;
  ChannelLayout lm, lo;  // of maxima and offsets
};

// The convolution's output (cy, cx) of channel o, image n, after the activation: the bias,
// then each input channel's taps in row-major order, one fused multiply-add each (the
// vector path's order), taps over the padding skipped.
template <class T>
T conv_output(const Operands& op, const T* x, const T* w, T bias, int64_t n, int64_t o, int64_t cy, int64_t cx) {
  const ConvGeom& g = op.g;
  T v = bias;
  for (int64_t c = 0; c < g.c; ++c)
    for (int64_t ky = 0; ky < g.kh; ++ky) {
      const int64_t iy = cy * g.sh - g.ph + ky * g.dh;
      if (iy < 0 || iy >= g.h) continue;
      for (int64_t kx = 0; kx < g.kw; ++kx) {
        const int64_t ix = cx * g.sw - g.pw + kx * g.dw;
        if (ix < 0 || ix >= g.w) continue;
        v = std::fma(w[((o * g.c + c) * g.kh + ky) * g.kw + kx], x[op.sx.at(n, c, iy, ix)], v);
      }
    }
  return op.relu && v < T(0) ? T(0) : v;
}

// Every output of pooled row py of image n, one channel and pixel at a time, with
// max_pool2d_window's rule: the first position starts the maximum, then a strictly
// greater value or the first NaN replaces it.
// Where a pooled row goes: the maxima, and the window offsets (i32) or codes (window_code),
// or neither.
template <class T>
struct PooledOut {
  T* maxima;
  int32_t* offsets;
  uint8_t* codes;
};

template <class T>
void pooled_row(const Operands& op, const T* x, const T* w, const T* b, const PooledOut<T>& out, int64_t n,
                int64_t py) {
  const PoolGeom& p = op.p;
  for (int64_t o = 0; o < op.g.o; ++o)
    for (int64_t px = 0; px < p.ow; ++px) {
      T best = T(0);
      int32_t at = -1;
      for (int64_t wy = 0; wy < p.kh; ++wy)
        for (int64_t wx = 0; wx < p.kw; ++wx) {
          const T v = conv_output(op, x, w, b[o], n, o, py * p.sh + wy, px * p.sw + wx);
          if (at < 0 || replaces_maximum(v, best)) {
            best = v;
            at = int32_t(wy * p.kw + wx);
          }
        }
      out.maxima[op.lm.at(n, o, py, px)] = best;
      if (out.offsets) out.offsets[op.lo.at(n, o, py, px)] = at;
      if (out.codes) out.codes[op.lo.at(n, o, py, px)] = window_code(at, best > T(0));
    }
}

constexpr int kTaps = 9, kWindow = 4;

// The vector path's weights: per group of 8 output channels, per input channel, per tap,
// the 8 channels' weights side by side; and the groups' biases.
struct PackedWeights {
  std::vector<F32x8> taps, bias;
};

PackedWeights pack(const ConvGeom& g, const float* w, const float* b) {
  PackedWeights pw{std::vector<F32x8>(size_t(g.o / kVec8 * g.c * kTaps)), std::vector<F32x8>(size_t(g.o / kVec8))};
  for (int64_t o = 0; o < g.o; ++o) {
    pw.bias[size_t(o / kVec8)][o % kVec8] = b[o];
    for (int64_t c = 0; c < g.c; ++c)
      for (int64_t t = 0; t < kTaps; ++t)
        pw.taps[size_t((o / kVec8 * g.c + c) * kTaps + t)][o % kVec8] = w[(o * g.c + c) * kTaps + t];
  }
  return pw;
}

// The 8 lanes of an output from channel o0 at its pixel `at` (ChannelLayout::pixel_at).
// (vec8.h's store_lanes, deciding by the lanes' distance, made the CNN's first layer
// 1.5x slower: 0.32 against 0.20 ms alone, measured alternately.)
template <class V, class T>
void store_channels(T* out, const ChannelLayout& l, int64_t o0, int64_t at, V v) {
  if (l.groups_of_8_inner()) return store8(out + l.channel_offset(o0) + at, v);
  for (int64_t i = 0; i < kVec8; ++i) out[l.channel_offset(o0 + i) + at] = v[i];
}

// The 4 convolution outputs under a 2x2 window, 8 channels each.
struct WindowSums {
  F32x8 at[kWindow];
};

// The window's sums reduced: maximum and first position by "greater" alone (so a NaN is
// never taken: `saw_nan` notes it and the row is done again), then the relu, which makes
// a maximum <= 0 a 0 at the first position, as the relu's zeros would have.
[[gnu::always_inline]] inline void store_window(const Operands& op, const WindowSums& sums,
                                                const PooledOut<float>& out, int64_t o0, int64_t n, int64_t py,
                                                int64_t px, I32x8& saw_nan) {
  F32x8 best = sums.at[0];
  I32x8 at{};
  for (int w = 1; w < kWindow; ++w) {
    const I32x8 take = sums.at[w] > best;
    best = take ? sums.at[w] : best;
    at = take ? I32x8{} + w : at;
  }
  const F32x8 all = (sums.at[0] + sums.at[1]) + (sums.at[2] + sums.at[3]);
  saw_nan |= all != all;
  if (op.relu) {
    const I32x8 live = best > 0.0f;
    best = F32x8(I32x8(best) & live);
    at &= live;
  }
  store_channels(out.maxima, op.lm, o0, op.lm.pixel_at(n, py, px), best);
  if (out.offsets) store_channels(out.offsets, op.lo, o0, op.lo.pixel_at(n, py, px), at);
  if (out.codes) {
    const I32x8 codes = at | ((best > 0.0f) & (I32x8{} + kWindowCodeLive));
    const int64_t pixel = op.lo.pixel_at(n, py, px);
    if (op.lo.groups_of_8_inner()) return store_bytes(out.codes + op.lo.channel_offset(o0) + pixel, codes);
    for (int64_t i = 0; i < kVec8; ++i) out.codes[op.lo.channel_offset(o0 + i) + pixel] = uint8_t(codes[i]);
  }
}

// The 4 input rows a pooled row's windows read, each channel's pixels adjacent: x's own
// where that holds and no padding lies under them, else a zero-padded copy. Zeros times
// finite weights add nothing; conv_max_pool_forward sends weights that are not all finite
// over padding to the loops (an infinity times a padding zero would make a NaN, and its
// row would be done again by them anyway). Window px's 4x4 patch starts at column 2 * px.
struct Band {
  const float* first;
  int64_t row, channel;
};

Band band_of(const Operands& op, const float* x, int64_t n, int64_t y0, std::vector<float>& copy) {
  const ConvGeom& g = op.g;
  if (g.ph == 0 && g.pw == 0 && op.sx.x == 1) return {x + op.sx.at(n, 0, y0, 0), op.sx.y, op.sx.c};
  const int64_t width = g.w + 2 * g.pw;
  copy.assign(size_t(g.c * 4 * width), 0.0f);
  for (int64_t c = 0; c < g.c; ++c)
    for (int64_t r = 0; r < 4; ++r) {
      if (y0 + r < 0 || y0 + r >= g.h) continue;
      float* to = copy.data() + (c * 4 + r) * width + g.pw;
      for (int64_t ix = 0; ix < g.w; ++ix) to[ix] = x[op.sx.at(n, c, y0 + r, ix)];
    }
  return {copy.data(), width, 4 * width};
}

// The sums of the window whose patch starts at `corner` of a band: each patch pixel
// broadcast once. kChannels: 1 (the 9 weights in registers), or 0 for g.c.
template <int kChannels>
[[gnu::always_inline]] inline WindowSums window_sums(const Operands& op, const Band& band, const float* corner,
                                                     const F32x8* weights, F32x8 bias) {
  const int64_t channels = kChannels ? kChannels : op.g.c, row = band.row;
  WindowSums sums{{bias, bias, bias, bias}};
  for (int64_t c = 0; c < channels; ++c) {
    const float* in = corner + c * band.channel;
    const F32x8* wc = weights + c * kTaps;
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r)
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        const F32x8 pixel = splat(in[r * row + k]);
#pragma GCC unroll 4
        for (int w = 0; w < kWindow; ++w) {
          const int ky = r - w / 2, kx = k - w % 2;
          if (ky >= 0 && ky < 3 && kx >= 0 && kx < 3) sums.at[w] += wc[ky * 3 + kx] * pixel;
        }
      }
  }
  return sums;
}

// Pooled row py of image n, every group of 8 channels; false if a window's sums held a NaN.
template <int kChannels>
bool pooled_row_vectors(const Operands& op, const Band& band, const PackedWeights& pw, const PooledOut<float>& out,
                        int64_t n, int64_t py) {
  const ConvGeom& g = op.g;
  I32x8 saw_nan{};
  for (int64_t o0 = 0; o0 < g.o; o0 += kVec8) {
    const F32x8* group = pw.taps.data() + o0 / kVec8 * g.c * kTaps;
    F32x8 local[kChannels ? kChannels * kTaps : 1];  // in registers for one channel
    if constexpr (kChannels > 0) {
#pragma GCC unroll 9
      for (int t = 0; t < kChannels * kTaps; ++t) local[t] = group[t];
    }
    const F32x8* weights = kChannels ? local : group;
    const F32x8 bias = pw.bias[size_t(o0 / kVec8)];
    for (int64_t px = 0; px < op.p.ow; ++px) {
      const WindowSums sums = window_sums<kChannels>(op, band, band.first + 2 * px, weights, bias);
      store_window(op, sums, out, o0, n, py, px, saw_nan);
    }
  }
  return !any_lane(saw_nan);
}

bool conv_max_pool_vectors_fit(const ConvGeom& g, const PoolGeom& p, DType dtype) {
  return dtype == f32 && g.groups == 1 && g.kh == 3 && g.kw == 3 && g.sh == 1 && g.sw == 1 && g.dh == 1 &&
         g.dw == 1 && two_by_two_windows(p) && g.o % kVec8 == 0;
}

// The first layer's pooled rows with 16 output channels a lane group, for AVX-512 machines
// (vec16.h): twice the channels per instruction. Each output sums the same products in
// the same order as pooled_row_vectors<1> (bias, then the taps row by row, one fused
// multiply-add each), and the window's reduction is store_window's.
constexpr int64_t kWide = kVec16;

__attribute__((target("avx512f"))) bool pooled_row_wide(const Operands& op, const Band& band,
                                                        const PackedWeights& pw, const PooledOut<float>& out,
                                                        int64_t n, int64_t py) {
  I32x16 saw_nan{};
  for (int64_t o0 = 0; o0 < op.g.o; o0 += kWide) {
    F32x16 taps[kTaps];  // two packed groups of 8 side by side
    const F32x8 *low = &pw.taps[size_t(o0 / kVec8 * kTaps)], *high = low + kTaps;
    for (int t = 0; t < kTaps; ++t) taps[t] = joined(low[t], high[t]);
    const F32x16 bias = joined(pw.bias[size_t(o0 / kVec8)], pw.bias[size_t(o0 / kVec8 + 1)]);
    for (int64_t px = 0; px < op.p.ow; ++px) {
      const float* in = band.first + 2 * px;
      F32x16 sums[kWindow] = {bias, bias, bias, bias};
#pragma GCC unroll 4
      for (int r = 0; r < 4; ++r)
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k) {
          const float v = in[r * band.row + k];
          const F32x16 pixel = {v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v};
#pragma GCC unroll 4
          for (int w = 0; w < kWindow; ++w) {
            const int ky = r - w / 2, kx = k - w % 2;
            if (ky >= 0 && ky < 3 && kx >= 0 && kx < 3) sums[w] += taps[ky * 3 + kx] * pixel;
          }
        }
      F32x16 best = sums[0];
      I32x16 at{};
      for (int w = 1; w < kWindow; ++w) {
        const I32x16 take = sums[w] > best;
        best = take ? sums[w] : best;
        at = take ? I32x16{} + w : at;
      }
      const F32x16 all = (sums[0] + sums[1]) + (sums[2] + sums[3]);
      saw_nan |= all != all;
      if (op.relu) {
        const I32x16 live = best > 0.0f;
        best = F32x16(I32x16(best) & live);
        at &= live;
      }
      std::memcpy(out.maxima + op.lm.channel_offset(o0) + op.lm.pixel_at(n, py, px), &best, sizeof best);
      const int64_t to = op.lo.channel_offset(o0) + op.lo.pixel_at(n, py, px);
      if (out.offsets) std::memcpy(out.offsets + to, &at, sizeof at);
      if (out.codes) {
        const U8x16 codes = __builtin_convertvector(at | ((best > 0.0f) & (I32x16{} + kWindowCodeLive)), U8x16);
        std::memcpy(out.codes + to, &codes, sizeof codes);
      }
    }
  }
  for (int64_t l = 0; l < kWide; ++l)
    if (saw_nan[l]) return false;
  return true;
}

}  // namespace

int conv_max_pool_vector_lanes(const ConvGeom& g, const PoolGeom& p, DType dtype, const Tensor& maxima,
                               const Tensor* offsets, const ConvPoolBlocks& blocks) {
  if (!conv_max_pool_vectors_fit(g, p, dtype)) return 0;
  const bool wide = kHasAvx512 && g.c == 1 && g.o % kWide == 0 &&
                    channel_layout(maxima, blocks.maxima).groups_inner(kWide) &&
                    (!offsets || channel_layout(*offsets, blocks.offsets).groups_inner(kWide));
  return wide ? int(kWide) : int(kVec8);
}

void conv_max_pool_forward(const ConvGeom& g, const PoolGeom& p, bool relu, const Tensor& x, const Tensor& w,
                           const Tensor& b, const Tensor& maxima, const Tensor* offsets,
                           const ConvPoolBlocks& blocks) {
  const Operands op{g, p, relu, Strides4(x), channel_layout(maxima, blocks.maxima),
                    channel_layout(offsets ? *offsets : maxima, blocks.offsets)};
  const Tensor wd = dense(w), bd = dense(b);
  const bool codes = offsets && offsets->dtype() == u8;
  int32_t* po = offsets && !codes ? offsets->data<int32_t>() : nullptr;
  uint8_t* pc = codes ? offsets->data<uint8_t>() : nullptr;
  const int64_t grain = grain_for(g.o * p.ow * g.c * g.kh * g.kw * p.kh * p.kw);
  visit_float(x.dtype(), "conv2d_max_pool2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *px = x.data<T>(), *pw = wd.data<T>(), *pb = bd.data<T>();
    const PooledOut<T> out{maxima.data<T>(), po, pc};
    if constexpr (std::is_same_v<T, float>) {
      const int lanes = conv_max_pool_vector_lanes(g, p, x.dtype(), maxima, offsets, blocks);
      if (lanes && ((g.ph == 0 && g.pw == 0) || !has_non_finite(wd))) {
        const PackedWeights packed = pack(g, pw, pb);
        parallel_range(g.n * p.oh, [&](int64_t begin, int64_t end) {
          std::vector<float> copy;
          for (int64_t row = begin; row < end; ++row) {
            const int64_t n = row / p.oh, py = row % p.oh;
            const Band band = band_of(op, px, n, 2 * py - g.ph, copy);
            const bool clean = lanes == kWide ? pooled_row_wide(op, band, packed, out, n, py)
                               : g.c == 1     ? pooled_row_vectors<1>(op, band, packed, out, n, py)
                                              : pooled_row_vectors<0>(op, band, packed, out, n, py);
            if (!clean) pooled_row(op, px, pw, pb, out, n, py);
          }
        }, grain);
        return;
      }
    }
    parallel_range(g.n * p.oh, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) pooled_row(op, px, pw, pb, out, row / p.oh, row % p.oh);
    }, grain);
  });
}

bool conv_max_pool_by_plan_fits(const ConvGeom& g, const PoolGeom& p, DType dtype) {
  return dtype == f32 && winograd_fits(g) && two_by_two_windows(p);
}

namespace {

// Winograd's view of the pooled outputs.
std::optional<WinogradPooling> winograd_pooling(const PoolGeom& p, const Tensor& maxima, const Tensor* offsets,
                                                const ConvPoolBlocks& blocks) {
  // (None for blocks of 16: prepare_conv_max_pool_f32 then lends room for the result apart.)
  const auto m = lane_vectors(maxima, blocks.maxima);
  const auto o = offsets ? lane_vectors(*offsets, blocks.offsets) : m;
  if (!m || !o) return std::nullopt;
  return WinogradPooling{maxima.data<float>(), m->first, m->second, offsets ? offsets->data<int32_t>() : nullptr,
                         o->first, o->second, p.oh, p.ow};
}

}  // namespace

std::shared_ptr<const ConvPoolPlan> prepare_conv_max_pool_f32(const ConvGeom& g, const PoolGeom& p, bool relu,
                                                              const Tensor& x, int64_t x_block, ConvPoolBlocks blocks,
                                                              const Tensor* constant_weights,
                                                              PreparedKernel& prepared) {
  auto plan = std::make_shared<ConvPoolPlan>();
  plan->blocks = blocks;
  plan->conv = prepare_conv_forward_f32(g, x, activation_metadata(g.output_shape(), blocks.maxima), true, false,
                                        {.act = relu_or_none(relu)}, prepared, {x_block, blocks.maxima, 0},
                                        constant_weights);
  plan->conv_scratch = cache_aligned(prepared.scratch_bytes);
  // Winograd's pooled stores take outputs of any strides or in blocks of 8 (lane_vectors).
  const bool pooled_stores = blocks.maxima != 16 && blocks.offsets != 16;
  if (runs_own_winograd(*plan->conv) && pooled_stores) {
    prepared.implementation += ", pooled in its output transform";
  } else {  // the result in the step's scratch, past the convolution's own
    prepared.scratch_bytes = plan->conv_scratch + cache_aligned(size_t(g.output_shape().numel()) * sizeof(float));
    prepared.implementation += ", then the pooling loops";
  }
  return plan;
}

void conv_max_pool_by_plan(const ConvGeom& g, const PoolGeom& p, bool relu, const Tensor& x, const Tensor& w,
                           const Tensor& b, const Tensor& maxima, const Tensor* offsets, const ConvPoolPlan& plan) {
  const ConvEpilogue e{.act = relu_or_none(relu)};
  if (const std::optional<WinogradPooling> pool = winograd_pooling(p, maxima, offsets, plan.blocks))
    if (conv_forward_pooled_f32(g, x, w, &b, e, *plan.conv, *pool)) return;
  // Apart: the result where the plan lent room for it (or allocated: Winograd's plans lend
  // none, and fall here only for operands that are not finite).
  const size_t result_bytes = cache_aligned(size_t(g.output_shape().numel()) * sizeof(float));
  char* lent = static_cast<char*>(onednn::lent_scratch(plan.conv_scratch + result_bytes));
  const Tensor result =
      activation_over(g.output_shape(), plan.blocks.maxima, lent ? lent + plan.conv_scratch : nullptr);
  {
    std::optional<onednn::StepScratch> own;  // the convolution's part of the lent bytes alone
    if (lent) own.emplace(lent, plan.conv_scratch);
    conv_forward_f32(g, x, w, &b, result, false, e, plan.conv.get());
  }
  const int64_t block = plan.blocks.maxima;
  if (offsets) {
    const WindowPoolPlan window = window_pool_plan(std::vector<int64_t>{block, block, plan.blocks.offsets});
    return max_pool_window_forward(p, result, maxima, *offsets, &window);
  }
  const WindowPoolPlan window = window_pool_plan(std::vector<int64_t>{block, block});
  max_pool_values(p, result, maxima, &window);
}

}  // namespace baton::kernels
