// Max pooling with window offsets (what a plan runs when only the backward reads the
// indices): the forward keeps each output's window position instead of a flat i64 index,
// and the backward scatters through it (or, for disjoint windows, gathers). Both take
// plain or channels-last tensors, and in a plan channel-blocked ones, seen as channels-last
// images of one block each (WindowPoolPlan). Channels-last ones are walked image by image
// with the channels innermost, the forward in one vectorized pass of its own (oneDNN's nhwc
// pooling plus the NaN scans it needs took ~4x as long on the CNN step's shapes, AVX2).
#include <algorithm>
#include <atomic>
#include <type_traits>
#include <vector>

#include "core/tensor_impl.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/loops.h"
#include "kernels/cpu/onednn.h"
#include "kernels/cpu/pool.h"
#include "kernels/cpu/vec8.h"

namespace baton::kernels {
namespace {

// Calls visit(n, c, oy, ox) for every output position: image by image with the channels
// innermost when `channels_inner` (channels-last tensors), else plane by plane; images or
// planes go to threads.
template <class Visit>
void for_outputs(const PoolGeom& g, bool channels_inner, Visit visit) {
  const int64_t items = channels_inner ? g.n : g.planes();
  const int64_t per_item = channels_inner ? g.c * g.oh * g.ow : g.oh * g.ow;
  parallel_range(items, [&](int64_t b, int64_t e) {
    for (int64_t item = b; item < e; ++item) {
      const int64_t n = channels_inner ? item : item / g.c, c0 = channels_inner ? 0 : item % g.c;
      const int64_t c1 = channels_inner ? g.c : c0 + 1;
      for (int64_t oy = 0; oy < g.oh; ++oy)
        for (int64_t ox = 0; ox < g.ow; ++ox)
          for (int64_t c = c0; c < c1; ++c) visit(n, c, oy, ox);
    }
  }, grain_for(per_item));
}

// A window's positions inside x: each one's distance (in elements) from the window's
// first position and its window offset ky * kw + kx, in row-major order (the order that
// decides ties). Made once for the whole windows and again only for the clipped ones at
// padded edges, so the loops over a window are a straight walk over a short list.
struct WindowTaps {
  std::vector<int64_t> distance;
  std::vector<int32_t> offset;

  // The taps of [ky0, ky1) x [kx0, kx1) in a window kw wide, over x's strides.
  void set(int64_t ky0, int64_t ky1, int64_t kx0, int64_t kx1, int64_t kw, int64_t row_stride, int64_t column_stride) {
    distance.clear();
    offset.clear();
    for (int64_t ky = ky0; ky < ky1; ++ky)
      for (int64_t kx = kx0; kx < kx1; ++kx) {
        distance.push_back((ky - ky0) * row_stride + (kx - kx0) * column_stride);
        offset.push_back(int32_t(ky * kw + kx));
      }
  }
  int64_t size() const { return int64_t(distance.size()); }
};

// The maximum over a window of each channel into best, and its window offset into at
// (unless null): the first position starts it (a -inf there stays, like the plane loops'
// -inf start), then a strictly greater value or the first NaN replaces it (ties keep the
// first). Channels compare one by one through memory; f32 windows of whole groups of 8
// channels go to window_max_f32 instead.
template <class T>
void window_max(const T* first, const WindowTaps& taps, int64_t channels, T* __restrict best, int32_t* __restrict at) {
  std::copy(first, first + channels, best);
  if (at) std::fill(at, at + channels, taps.offset[0]);
  for (int64_t t = 1; t < taps.size(); ++t) {
    const T* pixel = first + taps.distance[size_t(t)];
    for (int64_t c = 0; c < channels; ++c) {
      const T v = pixel[c], b = best[c];
      const bool take = replaces_maximum(v, b);
      best[c] = take ? v : b;
      if (at && take) at[c] = taps.offset[size_t(t)];
    }
  }
}

// window_max for f32 and whole groups of 8 channels, each group's best kept in registers
// over the window (vec8.h; GCC leaves such short loops scalar, 5-10x slower, measured).
// Without kNaNRule it takes a value when it is greater, and returns lanes set where a
// value was NaN: the caller then does the window again with the rule, whose two more
// compares and blends per position made the CNN step's 2x2 windows ~2x slower.
template <bool kNaNRule>
I32x8 window_max_f32(const float* first, const WindowTaps& taps, int64_t channels, float* __restrict best,
                     int32_t* __restrict at) {
  I32x8 saw_nan{};
  const int64_t* distance = taps.distance.data();
  const int32_t* offset = taps.offset.data();
  const int64_t count = taps.size();
  for (int64_t c = 0; c < channels; c += kVec8) {
    F32x8 b = load8<F32x8>(first + c);
    I32x8 a = I32x8{} + offset[0];
    if constexpr (!kNaNRule) saw_nan |= b != b;
    for (int64_t t = 1; t < count; ++t) {
      const F32x8 v = load8<F32x8>(first + distance[t] + c);
      I32x8 take;
      if constexpr (kNaNRule) {
        take = replaces_maximum(v, b);
      } else {
        take = v > b;
        saw_nan |= v != v;
      }
      b = take ? v : b;
      a = take ? I32x8{} + offset[t] : a;
    }
    store8(best + c, b);
    if (at) store8(at + c, a);
  }
  return saw_nan;
}

// Max pooling with window offsets (or, without `offsets`, its values alone) over a
// channels-last x: each input pixel's channels lie next to each other, so the window is
// reduced a pixel of channels at a time, into y and offsets' own pixel when they are
// channels-last too, else into a row copied into their strides. One pass over x, NaN and
// -inf handled as the plane loops handle them (no scans before or after, no workspace to
// widen). Output rows go to threads.
template <class T>
void max_window_channels_last(const PoolGeom& g, const Tensor& x, const Tensor& y, const Tensor* offsets) {
  const Strides4 sx(x), sy(y), so(offsets ? *offsets : y);
  const bool rows_in_place = sy.c == 1 && so.c == 1;
  const T* px = x.data<T>();
  T* py = y.data<T>();
  int32_t* po = offsets ? offsets->data<int32_t>() : nullptr;
  const int64_t channels = g.c;
  // f32 groups of 8 channels run window_max_f32 over a row without the NaN rule, and the
  // row again with it where a NaN turned up.
  const bool vectors = std::is_same_v<T, float> && channels % kVec8 == 0;
  parallel_range(g.n * g.oh, [&](int64_t b, int64_t e) {
    std::vector<T> best_row(rows_in_place ? 0 : size_t(channels));
    std::vector<int32_t> at_row(rows_in_place || !po ? 0 : size_t(channels));
    WindowTaps whole, clipped;
    whole.set(0, g.kh, 0, g.kw, g.kw, sx.y, sx.x);
    I32x8 saw_nan{};
    auto output_row = [&](int64_t n, int64_t oy, auto max_of_window) {
      const int64_t ys = oy * g.sh - g.ph;
      const int64_t ky0 = std::max<int64_t>(0, -ys), ky1 = std::min(g.kh, g.h - ys);
      for (int64_t ox = 0; ox < g.ow; ++ox) {
        const int64_t xs = ox * g.sw - g.pw;
        const int64_t kx0 = std::max<int64_t>(0, -xs), kx1 = std::min(g.kw, g.w - xs);
        const bool is_whole = ky0 == 0 && ky1 == g.kh && kx0 == 0 && kx1 == g.kw;
        if (!is_whole) clipped.set(ky0, ky1, kx0, kx1, g.kw, sx.y, sx.x);  // padding <= kernel / 2: never empty
        T* best = rows_in_place ? py + sy.at(n, 0, oy, ox) : best_row.data();
        int32_t* at = !po ? nullptr : rows_in_place ? po + so.at(n, 0, oy, ox) : at_row.data();
        max_of_window(px + sx.at(n, 0, ys + ky0, xs + kx0), is_whole ? whole : clipped, best, at);
        if (rows_in_place) continue;
        for (int64_t c = 0; c < channels; ++c) py[sy.at(n, c, oy, ox)] = best[c];
        if (po)
          for (int64_t c = 0; c < channels; ++c) po[so.at(n, c, oy, ox)] = at[c];
      }
    };
    for (int64_t row = b; row < e; ++row) {
      const int64_t n = row / g.oh, oy = row % g.oh;
      if constexpr (std::is_same_v<T, float>) {
        if (vectors) {
          output_row(n, oy, [&](const float* first, const WindowTaps& taps, float* best, int32_t* at) {
            saw_nan |= window_max_f32<false>(first, taps, channels, best, at);
          });
          if (!any_lane(saw_nan)) continue;
          saw_nan = I32x8{};
          output_row(n, oy, [&](const float* first, const WindowTaps& taps, float* best, int32_t* at) {
            window_max_f32<true>(first, taps, channels, best, at);
          });
          continue;
        }
      }
      output_row(n, oy, [&](const T* first, const WindowTaps& taps, T* best, int32_t* at) {
        window_max(first, taps, channels, best, at);
      });
    }
  }, grain_for(g.ow * g.c * g.kh * g.kw));
}

}  // namespace

bool max_pool_window_channels_last(const Tensor& x) { return is_channels_last(x); }

WindowPoolPlan window_pool_plan(std::span<const int64_t> channel_blocks) {
  WindowPoolPlan plan;
  for (int64_t b : channel_blocks) {
    plan.blocked.push_back(b > 0);
    if (b > 0) plan.block = b;  // a plan has one block size
  }
  return plan;
}

namespace {

// A plan's operands seen as block images (WindowPoolPlan): views of the same bytes, except
// an unblocked operand that is not contiguous (channels-last), which has no such view: it
// is copied plain (an output then copied back by finish()).
class BlockImages {
 public:
  explicit BlockImages(const WindowPoolPlan& plan) : plan_(plan) {}
  PoolGeom geom(PoolGeom g) const {
    g.n *= g.c / plan_.block;
    g.c = plan_.block;
    return g;
  }
  // Operand `i` (inputs, then outputs; see WindowPoolPlan::blocked).
  Tensor in(const Tensor& t, size_t i) const { return view(is_blocked(i) || t.is_contiguous() ? t : dense(t), i); }
  Tensor out(const Tensor& t, size_t i) {
    if (is_blocked(i) || t.is_contiguous()) return view(t, i);
    Tensor plain = empty(t.shape(), t.dtype());
    write_backs_.emplace_back(t, plain);
    return view(plain, i);
  }
  void finish() const {
    for (const auto& [to, from] : write_backs_) copy_into(to, from);
  }

 private:
  bool is_blocked(size_t i) const { return i < plan_.blocked.size() && plan_.blocked[i]; }
  // t's bytes (contiguous: a plan's buffer, blocked or plain) as [n * c / b, b, h, w].
  Tensor view(const Tensor& t, size_t i) const {
    const int64_t b = plan_.block, h = t.size(2), w = t.size(3);
    const Shape shape{t.size(0) * t.size(1) / b, b, h, w};
    return is_blocked(i) ? make_view(t, shape, {h * w * b, 1, w * b, b}, t.offset())
                         : make_view(t, shape, {b * h * w, h * w, w, 1}, t.offset());
  }
  const WindowPoolPlan& plan_;
  std::vector<std::pair<Tensor, Tensor>> write_backs_;
};

}  // namespace

namespace {

// What both max pooling forwards (with window offsets, or values alone: offsets null) do
// alike: a plan's blocked operands become block images, passed to the forward again, and a
// channels-last x runs the window loops. False where neither applies.
bool forward_by_window_loops(const PoolGeom& g, const Tensor& x, const Tensor& y, const Tensor* offsets,
                             const WindowPoolPlan* plan) {
  if (plan && plan->block) {
    BlockImages images(*plan);
    const PoolGeom blocks = images.geom(g);
    const Tensor bx = images.in(x, 0), by = images.out(y, 1);
    if (offsets) max_pool_window_forward(blocks, bx, by, images.out(*offsets, 2));
    else max_pool_values(blocks, bx, by);
    images.finish();
    return true;
  }
  if (!max_pool_window_channels_last(x)) return false;
  visit_float(x.dtype(), offsets ? "max_pool2d_window" : "max_pool2d_values", [&](auto tag) {
    max_window_channels_last<typename decltype(tag)::type>(g, x, y, offsets);
  });
  return true;
}

}  // namespace

void max_pool_window_forward(const PoolGeom& g, const Tensor& x, const Tensor& y, const Tensor& offsets,
                             const WindowPoolPlan* plan) {
  if (forward_by_window_loops(g, x, y, &offsets, plan)) return;
  if (x.dtype() == f32 && max_pool_window_forward_onednn(g, x, y, offsets, plan ? plan->onednn.get() : nullptr)) return;
  // The loops (NaN, f64) find flat indices; each becomes its offset in its window.
  Tensor idx = empty(y.shape(), i64);
  max_pool_loops(g, x, y, idx);
  const int64_t* pi = idx.data<int64_t>();
  int32_t* out = offsets.data<int32_t>();
  const Strides4 so(offsets);
  for_outputs(g, onednn::is_channels_last(offsets), [&](int64_t n, int64_t c, int64_t oy, int64_t ox) {
    const int64_t flat = pi[((n * g.c + c) * g.oh + oy) * g.ow + ox];
    const int64_t ky = flat / g.w - (oy * g.sh - g.ph), kx = flat % g.w - (ox * g.sw - g.pw);
    out[so.at(n, c, oy, ox)] = int32_t(ky * g.kw + kx);
  });
}

void max_pool_values(const PoolGeom& g, const Tensor& x, const Tensor& y, const WindowPoolPlan* plan) {
  if (forward_by_window_loops(g, x, y, nullptr, plan)) return;
  if (x.dtype() == f32 && max_pool_values_onednn(g, x, y, plan ? plan->onednn.get() : nullptr)) return;
  max_pool_loops(g, x, y, empty(y.shape(), i64));  // the loops find both at once
}

namespace {

// A window backward's operands as its loops read them: element strides, then data (the
// maxima's pointer null when there are none).
template <class T>
struct GradOperands {
  Strides4 sg, so, sx, sm;
  const T* pg;
  const int32_t* po;
  const T* pm;
  T* px;
};
template <class T>
GradOperands<T> grad_operands(const Tensor& gy, const Tensor& offsets, const Tensor& gx, const Tensor* maxima) {
  return {Strides4(gy),     Strides4(offsets),        Strides4(gx), Strides4(maxima ? *maxima : gy),
          gy.data<T>(),     offsets.data<int32_t>(), maxima ? maxima->data<T>() : nullptr, gx.data<T>()};
}

// The scatter of max_pool_window_backward over the images (all channels, innermost) or
// planes (one channel) [b, e). A window offset k lands k / kw rows and k % kw columns
// into its window: one table lookup. Only windows that overlap the padding check the row
// and column; the others need just 0 <= k < kh * kw. With maxima, a gradient lands only
// where its window's maximum is > 0.
template <class T>
void scatter(const PoolGeom& g, bool channels_inner, const Tensor& gy, const Tensor& offsets, const Tensor& gx,
             const Tensor* maxima, int64_t b, int64_t e, bool& bad) {
  const auto [sg, so, sx, sm, pg, po, pm, px] = grad_operands<T>(gy, offsets, gx, maxima);
  const int64_t window = g.kh * g.kw, kw = g.kw;
  std::vector<int64_t> landing(static_cast<size_t>(window));
  for (int64_t k = 0; k < window; ++k) landing[size_t(k)] = (k / kw) * sx.y + (k % kw) * sx.x;
  for (int64_t item = b; item < e; ++item) {
    const int64_t n = channels_inner ? item : item / g.c, c0 = channels_inner ? 0 : item % g.c;
    const int64_t c1 = channels_inner ? g.c : c0 + 1;
    T* zero_from = px + (channels_inner ? n * sx.n : sx.at(n, c0, 0, 0));
    std::fill(zero_from, zero_from + (c1 - c0) * g.h * g.w, T(0));
    for (int64_t oy = 0; oy < g.oh; ++oy) {
      const int64_t ys = oy * g.sh - g.ph;
      for (int64_t ox = 0; ox < g.ow; ++ox) {
        const int64_t xs = ox * g.sw - g.pw;
        const bool inside = ys >= 0 && ys + g.kh <= g.h && xs >= 0 && xs + g.kw <= g.w;
        const int64_t base = n * sx.n + ys * sx.y + xs * sx.x;
        const T* grad = pg + sg.at(n, 0, oy, ox);
        const T* maximum = pm ? pm + sm.at(n, 0, oy, ox) : nullptr;
        const int32_t* offset = po + so.at(n, 0, oy, ox);
        for (int64_t c = c0; c < c1; ++c) {
          const int32_t k = offset[c * so.c];
          const bool valid = k >= 0 && k < window &&
                             (inside || (ys + k / kw >= 0 && ys + k / kw < g.h && xs + k % kw >= 0 && xs + k % kw < g.w));
          if (!valid) {
            bad = true;
            continue;
          }
          if (maximum && !(maximum[c * sm.c] > T(0))) continue;
          px[base + c * sx.c + landing[size_t(k)]] += grad[c * sg.c];
        }
      }
    }
  }
}

// Whether each input pixel lies in at most one window, every window inside the input (no
// padding, stride >= kernel: the CNN step's 2x2 stride 2) and gx channels-last (gy, the
// offsets and the maxima in any layout: see OutputRow).
bool disjoint_channels_last(const PoolGeom& g, const Tensor& gx) {
  return g.disjoint() && onednn::is_channels_last(gx);
}

// One output row's gradients, window offsets and maxima (pointers null without them) with
// the channels innermost: the operands' own row where they are channels-last, else a copy
// (the CNN step's second pooling gets its gradient from a linear layer, plain, where the
// scatter through plain operands into a channels-last gx took ~3x as long).
template <class T>
class OutputRow {
 public:
  OutputRow(const PoolGeom& g, const GradOperands<T>& o)
      : g_(g), o_(o), copied_(o.sg.c != 1 || o.so.c != 1 || (o.pm && o.sm.c != 1)) {
    if (!copied_) return;
    grad_.resize(size_t(g.ow * g.c));
    offset_.resize(size_t(g.ow * g.c));
    if (o.pm) mask_.resize(size_t(g.ow * g.c));
  }
  // Row oy of image n; the pixel of column ox then starts at ox * channel_step().
  void load(int64_t n, int64_t oy) {
    if (!copied_) {
      grad = o_.pg + o_.sg.at(n, 0, oy, 0);
      offset = o_.po + o_.so.at(n, 0, oy, 0);
      mask = o_.pm ? o_.pm + o_.sm.at(n, 0, oy, 0) : nullptr;
      return;
    }
    for (int64_t c = 0; c < g_.c; ++c)
      for (int64_t ox = 0; ox < g_.ow; ++ox) {
        const size_t i = size_t(ox * g_.c + c);
        grad_[i] = o_.pg[o_.sg.at(n, c, oy, ox)];
        offset_[i] = o_.po[o_.so.at(n, c, oy, ox)];
        if (o_.pm) mask_[i] = o_.pm[o_.sm.at(n, c, oy, ox)];
      }
    grad = grad_.data(), offset = offset_.data(), mask = o_.pm ? mask_.data() : nullptr;
  }
  // Elements from one pixel to the next along the row: each operand's column stride (the
  // same for all three when channels-last, as the plan lays them out), or the channels.
  int64_t step(const Strides4& s) const { return copied_ ? g_.c : s.x; }

  const T* grad = nullptr;
  const int32_t* offset = nullptr;
  const T* mask = nullptr;

 private:
  const PoolGeom& g_;
  const GradOperands<T>& o_;
  bool copied_;
  std::vector<T> grad_, mask_;
  std::vector<int32_t> offset_;
};

// One input pixel's gradient, all channels: gy's where the window offset names this pixel
// (window position k) and the window's maximum, when given, is > 0; else 0. Written as
// 0 + gy, bit for bit what the scatter's zeroing and += give (-0 becomes +0).
template <class T>
void gather_pixel(const T* __restrict grad, const int32_t* __restrict offset, const T* __restrict mask, int32_t k,
                  int64_t channels, T* __restrict out) {
  if constexpr (std::is_same_v<T, float>) {
    if (channels % kVec8 == 0) {
      for (int64_t c = 0; c < channels; c += kVec8) {
        I32x8 take = load8<I32x8>(offset + c) == k;
        if (mask) take &= load8<F32x8>(mask + c) > 0.0f;
        store8(out + c, F32x8((I32x8)(0.0f + load8<F32x8>(grad + c)) & take));  // +0 where not taken
      }
      return;
    }
  }
  if (mask) {
    for (int64_t c = 0; c < channels; ++c) out[c] = ((offset[c] == k) & (mask[c] > T(0))) ? T(0) + grad[c] : T(0);
  } else {
    for (int64_t c = 0; c < channels; ++c) out[c] = offset[c] == k ? T(0) + grad[c] : T(0);
  }
}

// max_pool_window_backward for disjoint_channels_last geometries, input rows [b, e) of all
// images: each gradient pixel is written once (gathered from its window's output), with no
// zeroing pass before a scatter. Offsets are checked at each window's first pixel
// (k = 0), which every output has.
template <class T>
void gather_disjoint(const PoolGeom& g, const Tensor& gy, const Tensor& offsets, const Tensor& gx,
                     const Tensor* maxima, int64_t b, int64_t e, bool& bad) {
  const GradOperands<T> o = grad_operands<T>(gy, offsets, gx, maxima);
  OutputRow<T> row(g, o);
  const int64_t grad_step = row.step(o.sg), offset_step = row.step(o.so), mask_step = row.step(o.sm);
  const int64_t channels = g.c;
  const int32_t window = int32_t(g.kh * g.kw);
  int32_t outside = 0;
  int64_t loaded = -1;  // the output row (n * oh + oy) in `row`
  for (int64_t item = b; item < e; ++item) {
    const int64_t n = item / g.h, iy = item % g.h, oy = iy / g.sh, ky = iy % g.sh;
    const bool covered_row = oy < g.oh && ky < g.kh;
    if (covered_row && loaded != n * g.oh + oy) {
      row.load(n, oy);
      loaded = n * g.oh + oy;
    }
    for (int64_t ix = 0; ix < g.w; ++ix) {
      const int64_t ox = ix / g.sw, kx = ix % g.sw;
      T* out = o.px + o.sx.at(n, 0, iy, ix);
      if (!covered_row || ox >= g.ow || kx >= g.kw) {
        std::fill(out, out + channels, T(0));  // rows and columns no window covers
        continue;
      }
      const int32_t* offset = row.offset + ox * offset_step;
      if (ky == 0 && kx == 0)
        for (int64_t c = 0; c < channels; ++c) outside |= int32_t(uint32_t(offset[c]) >= uint32_t(window));
      gather_pixel(row.grad + ox * grad_step, offset, row.mask ? row.mask + ox * mask_step : nullptr,
                   int32_t(ky * g.kw + kx), channels, out);
    }
  }
  if (outside) bad = true;
}

}  // namespace

void max_pool_window_backward(const PoolGeom& g, const Tensor& gy, const Tensor& offsets, const Tensor& gx,
                              const Tensor* maxima, const WindowPoolPlan* plan) {
  if (plan && plan->block) {
    BlockImages images(*plan);
    const Tensor mask = maxima ? images.in(*maxima, 2) : Tensor();
    max_pool_window_backward(images.geom(g), images.in(gy, 0), images.in(offsets, 1), images.out(gx, maxima ? 3 : 2),
                             maxima ? &mask : nullptr);
    return images.finish();
  }
  const bool channels_inner = onednn::is_channels_last(gx);
  const int64_t items = channels_inner ? g.n : g.planes();
  const int64_t per_item = channels_inner ? g.c * g.oh * g.ow : g.oh * g.ow;
  // An offset outside its window, or on its padding, would write outside the plane: it is
  // skipped and reported after the loop (offsets come from max_pool2d_window, or from a
  // fed graph input).
  std::atomic<bool> bad{false};
  visit_float(gx.dtype(), "max_pool2d_window_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (disjoint_channels_last(g, gx)) {
      return parallel_range(g.n * g.h, [&](int64_t b, int64_t e) {
        bool found = false;
        gather_disjoint<T>(g, gy, offsets, gx, maxima, b, e, found);
        if (found) bad.store(true, std::memory_order_relaxed);
      }, grain_for(g.w * g.c));
    }
    parallel_range(items, [&](int64_t b, int64_t e) {
      bool found = false;
      scatter<T>(g, channels_inner, gy, offsets, gx, maxima, b, e, found);
      if (found) bad.store(true, std::memory_order_relaxed);
    }, grain_for(per_item));
  });
  if (bad.load())
    throw IndexError("max_pool2d_window_backward",
                     str("a window offset lies outside its ", g.kh, "x", g.kw, " window or on its padding"),
                     SourceLoc::current());
}

}  // namespace baton::kernels
