// Pooling loops over NCHW planes (f32 and f64): memory-bound, so direct loops over each
// plane, planes split over threads. f32 max/avg forward and avg backward go to oneDNN
// first; the max backward stays the index scatter for both types.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "baton/tensor.h"
#include "kernels/cpu/prepared.h"

namespace baton::kernels {

// Element strides of a rank-4 tensor, as plain values (loops read them often).
struct Strides4 {
  int64_t n, c, y, x;
  explicit Strides4(const Tensor& t) : n(t.strides()[0]), c(t.strides()[1]), y(t.strides()[2]), x(t.strides()[3]) {}
  int64_t at(int64_t in, int64_t ic, int64_t iy, int64_t ix) const { return in * n + ic * c + iy * y + ix * x; }
};

// Max pooling's rule for a value against the window's best so far, of one element or of
// 8 lanes (a mask then): a strictly greater value replaces it (ties keep the first), and
// so does the first NaN.
template <class V>
auto replaces_maximum(V v, V best) {
  return (v > best) | ((v != v) & (best == best));
}

struct PoolGeom {
  int64_t n, c, h, w;
  int64_t kh, kw, sh, sw, ph, pw;
  int64_t oh, ow;
  int64_t planes() const { return n * c; }
  // Windows that neither overlap nor pad (stride >= kernel, no padding): each input pixel
  // lies in at most one window.
  bool disjoint() const { return ph == 0 && pw == 0 && sh >= kh && sw >= kw; }
};

// A max pooling window in one byte, where a plan needs only its gradient after the forward
// (src/passes/fuse_pool_gradient.cpp): the maximum's position ky * kw + kx (bits 0-1: at
// most 4 positions) and whether the maximum is > 0 (bit 2: the relu before the pooling let
// the gradient through), instead of i32 offsets and the maxima read back.
constexpr uint8_t kWindowCodeLive = 4;
constexpr int64_t kWindowCodePositions = 4;
inline uint8_t window_code(int32_t at, bool live) { return uint8_t(at | (live ? kWindowCodeLive : 0)); }
// A code's position (-1 for a byte that is no code: an offset outside any window) and
// whether its gradient counts.
inline int32_t window_code_position(uint8_t code) {
  return code < 2 * kWindowCodeLive ? code % kWindowCodeLive : -1;
}
inline bool window_code_live(uint8_t code) { return (code & kWindowCodeLive) != 0; }

// 2x2 windows of stride 2, no padding: what the fused convolution-pooling kernels take (a
// 4x4 patch of input, or one of Winograd's 4x4 output tiles, holds whole windows).
inline bool two_by_two_windows(const PoolGeom& p) {
  return p.kh == 2 && p.kw == 2 && p.sh == 2 && p.sw == 2 && p.ph == 0 && p.pw == 0;
}

// A forward pooling's oneDNN primitive and reorders, made once for a plan step for the
// layouts of x and y (metadata: shapes and strides, or the channel blocks a plan stores
// them in); nullptr where oneDNN has no optimized kernel (the loops run), except for
// blocked tensors, whose layout the runs must learn from the plan. `prepared` gets
// oneDNN's name for it.
// Max with flat indices, with window offsets, max values only, average.
enum class PoolKind { Max, MaxWindow, MaxValues, Average };
struct PoolForwardPlan;
std::shared_ptr<const PoolForwardPlan> prepare_pool_forward_f32(const PoolGeom& g, PoolKind kind, const Tensor& x,
                                                                const Tensor& y, PreparedKernel& prepared,
                                                                int64_t x_block = 0, int64_t y_block = 0);
// Runs loops(x, y) on tensors whose strides tell their layout: x and y themselves, or, when
// the plan stores them channel-blocked, plain copies (y's copied back into y).
void with_plain_layouts(const PoolForwardPlan* plan, const Tensor& x, const Tensor& y,
                        const std::function<void(const Tensor&, const Tensor&)>& loops);

// y = max over each window; idx = the flat (h * w) position of the first maximum. With a
// plan for these layouts no primitive is looked up (also below).
void max_pool_forward(const PoolGeom& g, const Tensor& x, const Tensor& y, const Tensor& idx,
                      const PoolForwardPlan* plan = nullptr);
// gx[idx] += gy (gx zeroed first).
void max_pool_backward(const PoolGeom& g, const Tensor& gy, const Tensor& idx, const Tensor& gx);
// What a plan step of max_pool2d_window, max_pool2d_values or the window's backward
// prepared. Where the plan stores
// some operands channel-blocked (nChw8c: blocks of `block` channels, each an [h, w, block]
// image), every operand is seen as [n * c / block, block, h, w]: channels-last for a
// blocked one, plain for a plain one (the same bytes, no copy), and the loops below serve
// unchanged. `blocked`: per operand (inputs, then outputs), whether the plan blocks it.
struct WindowPoolPlan {
  int64_t block = 0;  // 0: no operand blocked
  std::vector<char> blocked;
  std::shared_ptr<const PoolForwardPlan> onednn;  // the forward's primitive (plain input)
};
// The plan for operands stored in these channel blocks (CallContext::channel_blocks).
WindowPoolPlan window_pool_plan(std::span<const int64_t> channel_blocks);

// Max pooling as plans run it when only its backward reads the indices (pool_window.cpp):
// offsets[n, c, oy, ox] = ky * kw + kx, the window-local position of the first maximum
// (i32, in the layout it is handed: plain or channels-last, or blocked as the plan says).
// That is what oneDNN's workspace holds, so nothing is decoded into flat i64 indices, and
// it takes half their bytes.
void max_pool_window_forward(const PoolGeom& g, const Tensor& x, const Tensor& y, const Tensor& offsets,
                             const WindowPoolPlan* plan = nullptr);
// True when x is channels-last: max_pool_window_forward then runs its own single pass
// (any float type; y and offsets of any strides), not oneDNN, and needs no plan.
bool max_pool_window_channels_last(const Tensor& x);
// gx[window of o + offsets[o]] += gy[o] (gx zeroed first); any layouts. With `maxima` (the
// forward's values, of gy's shape), only where maxima[o] > 0: when the pooling read a
// relu's result r, that is relu_backward(gx, r) in the same pass, bit for bit, since a
// gradient lands only on its window's maximum, where r equals maxima[o].
void max_pool_window_backward(const PoolGeom& g, const Tensor& gy, const Tensor& offsets, const Tensor& gx,
                              const Tensor* maxima = nullptr, const WindowPoolPlan* plan = nullptr);
// y = max over each window, without the indices (inference). Channels-last or blocked x:
// the window loops' single pass (pool_window.cpp); plain f32: oneDNN where it serves.
void max_pool_values(const PoolGeom& g, const Tensor& x, const Tensor& y, const WindowPoolPlan* plan = nullptr);
// Average over each window, padding counted in the divisor (PyTorch's default).
void avg_pool_forward(const PoolGeom& g, const Tensor& x, const Tensor& y, const PoolForwardPlan* plan = nullptr);
void avg_pool_backward(const PoolGeom& g, const Tensor& gy, const Tensor& gx);
// Adaptive windows: rows [floor(i*h/oh), ceil((i+1)*h/oh)), columns alike.
void adaptive_avg_forward(const PoolGeom& g, const Tensor& x, const Tensor& y);
void adaptive_avg_backward(const PoolGeom& g, const Tensor& gy, const Tensor& gx);

// f32 on oneDNN (pool_onednn.cpp), the same results as the loops; false when oneDNN has no
// optimized kernel for the geometry (the caller then runs the loops).
bool max_pool_forward_onednn(const PoolGeom& g, const Tensor& x, const Tensor& y, const Tensor& idx,
                             const PoolForwardPlan* plan);
bool max_pool_window_forward_onednn(const PoolGeom& g, const Tensor& x, const Tensor& y, const Tensor& offsets,
                                    const PoolForwardPlan* plan);
bool max_pool_values_onednn(const PoolGeom& g, const Tensor& x, const Tensor& y, const PoolForwardPlan* plan);
// The loops behind max_pool_forward (NaN propagates; f64).
void max_pool_loops(const PoolGeom& g, const Tensor& x, const Tensor& y, const Tensor& idx);
bool avg_pool_forward_onednn(const PoolGeom& g, const Tensor& x, const Tensor& y, const PoolForwardPlan* plan);
bool avg_pool_backward_onednn(const PoolGeom& g, const Tensor& gy, const Tensor& gx);

}  // namespace baton::kernels
