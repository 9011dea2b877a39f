#include "kernels/cpu/pool.h"

#include <cmath>

#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/loops.h"
#include "kernels/cpu/onednn.h"

namespace baton::kernels {
namespace {

// The loops write NCHW planes: a strided (channels-last) output gets a plain buffer first,
// copied into it at the end.
class PlainOutput {
 public:
  explicit PlainOutput(const Tensor& out)
      : out_(out), plain_(out.is_contiguous() ? out : empty(out.shape(), out.dtype())) {}
  template <class T>
  T* data() const { return plain_.data<T>(); }
  void write_back() const {
    if (!plain_.same(out_)) copy_into(out_, plain_);
  }

 private:
  const Tensor& out_;
  Tensor plain_;
};

// Calls body(plane) for every (n, c) plane, planes spread over threads when large.
template <class Body>
void for_planes(const PoolGeom& g, Body&& body) {
  const int64_t per_plane = std::max<int64_t>(1, g.h * g.w);
  kernels::parallel_range(g.planes(), [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) body(p);
  }, std::max<int64_t>(1, kernels::kParallelGrain / per_plane));
}

// Window [start, end) of output position o along one axis, clipped to [0, size).
struct Window {
  int64_t start, end, padded;  // padded: the window length counting padding
};
Window window(int64_t o, int64_t stride, int64_t pad, int64_t k, int64_t size) {
  int64_t s = o * stride - pad, e = std::min(s + k, size + pad);
  return {std::max<int64_t>(s, 0), std::min(e, size), e - s};
}
Window adaptive_window(int64_t o, int64_t out, int64_t size) {
  int64_t s = (o * size) / out, e = ((o + 1) * size + out - 1) / out;
  return {s, e, e - s};
}

template <class T>
void zero(T* p, int64_t n) { std::fill(p, p + n, T(0)); }

}  // namespace

namespace {

// Output columns [lo, hi) whose window column ox*stride - pad + k falls inside [0, size).
std::pair<int64_t, int64_t> valid_columns(int64_t k, int64_t stride, int64_t pad, int64_t size,
                                          int64_t out) {
  int64_t lo = pad - k > 0 ? (pad - k + stride - 1) / stride : 0;
  int64_t hi = size - 1 + pad - k < 0 ? 0 : (size - 1 + pad - k) / stride + 1;
  return {std::min(lo, out), std::min(hi, out)};
}

// One output row of max pooling. The window is walked in row-major order, one (ky, kx)
// offset at a time across the whole row, so the inner loop is branch-free and vectorizes;
// a strictly greater value (or the first NaN) replaces the best, so ties keep the first.
template <class T>
void max_pool_row(const PoolGeom& g, const T* plane, int64_t oy, T* __restrict y,
                  int64_t* __restrict idx) {
  // Locals, not g's fields: idx's stores could alias g, which would stop vectorization.
  const int64_t w = g.w, sw = g.sw, ow = g.ow;
  Window wy = window(oy, g.sh, g.ph, g.kh, g.h);
  for (int64_t ox = 0; ox < ow; ++ox) {
    y[ox] = -std::numeric_limits<T>::infinity();
    idx[ox] = wy.start * w + window(ox, sw, g.pw, g.kw, w).start;
  }
  for (int64_t iy = wy.start; iy < wy.end; ++iy) {
    const T* __restrict row = plane + iy * w;
    for (int64_t kx = 0; kx < g.kw; ++kx) {
      auto [lo, hi] = valid_columns(kx, sw, g.pw, w, ow);
      const int64_t shift = kx - g.pw, base = iy * w + shift;
      for (int64_t ox = lo; ox < hi; ++ox) {
        const T v = row[ox * sw + shift];
        const T best = y[ox];
        const bool take = replaces_maximum(v, best);
        y[ox] = take ? v : best;
        idx[ox] = take ? base + ox * sw : idx[ox];
      }
    }
  }
}

}  // namespace

void max_pool_forward(const PoolGeom& g, const Tensor& x, const Tensor& y, const Tensor& idx,
                      const PoolForwardPlan* plan) {
  if (!idx.is_contiguous()) {  // the indices are found plain, then copied into idx's layout
    Tensor plain = empty(idx.shape(), i64);
    max_pool_forward(g, x, y, plain, plan);
    return copy_into(idx, plain);
  }
  if (x.dtype() == f32 && max_pool_forward_onednn(g, x, y, idx, plan)) return;
  max_pool_loops(g, x, y, idx);
}

void max_pool_loops(const PoolGeom& g, const Tensor& x_in, const Tensor& y_out, const Tensor& idx) {
  Tensor x = kernels::onednn::dense(x_in);
  PlainOutput y(y_out);
  kernels::visit_float(x.dtype(), "max_pool2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = x.data<T>();
    T* py = y.data<T>();
    int64_t* pi = idx.data<int64_t>();
    for_planes(g, [&](int64_t p) {
      for (int64_t oy = 0; oy < g.oh; ++oy) {
        const int64_t o = (p * g.oh + oy) * g.ow;
        max_pool_row(g, px + p * g.h * g.w, oy, py + o, pi + o);
      }
    });
  });
  y.write_back();
}

// Indices come from max_pool2d, or from a fed graph input: a bad one would write outside
// its plane, so each must lie in [0, h*w).
static void check_pool_indices(const PoolGeom& g, const Tensor& idx) {
  const int64_t* pi = idx.data<int64_t>();
  const int64_t n = idx.numel(), plane = g.h * g.w;
  bool bad = false;
  for (int64_t i = 0; i < n; ++i) bad |= pi[i] < 0 || pi[i] >= plane;  // vectorizes: no early exit
  if (bad)
    for (int64_t i = 0; i < n; ++i)
      if (pi[i] < 0 || pi[i] >= plane)
        throw IndexError("max_pool2d_backward", str("index ", pi[i], " at flat position ", i,
                                                    " is outside the input plane of ", g.h, "x", g.w),
                         SourceLoc::current());
}

namespace {

// gx channels-last (a plan's activation): a plane's elements lie c apart, so images rather
// than planes go to threads; gy is read through its strides.
template <class T>
void max_pool_backward_channels_last(const PoolGeom& g, const Tensor& gy, const int64_t* pi, const Tensor& gx) {
  const T* pg = gy.data<T>();
  T* pgx = gx.data<T>();
  const Shape& st = gy.strides();
  const int64_t image = g.h * g.w * g.c, outputs = g.oh * g.ow;
  parallel_range(g.n, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      T* out = pgx + n * image;
      zero(out, image);
      for (int64_t c = 0; c < g.c; ++c) {
        const int64_t* plane_idx = pi + (n * g.c + c) * outputs;
        const T* plane_gy = pg + n * st[0] + c * st[1];
        for (int64_t oy = 0; oy < g.oh; ++oy)
          for (int64_t ox = 0; ox < g.ow; ++ox)
            out[plane_idx[oy * g.ow + ox] * g.c + c] += plane_gy[oy * st[2] + ox * st[3]];
      }
    }
  }, 1);
}

}  // namespace

void max_pool_backward(const PoolGeom& g, const Tensor& gy_in, const Tensor& idx_in, const Tensor& gx) {
  Tensor idx = kernels::onednn::dense(idx_in);
  check_pool_indices(g, idx);
  if (kernels::onednn::is_channels_last(gx)) {
    return kernels::visit_float(gx.dtype(), "max_pool2d_backward", [&](auto tag) {
      max_pool_backward_channels_last<typename decltype(tag)::type>(g, gy_in, idx.data<int64_t>(), gx);
    });
  }
  Tensor gy = kernels::onednn::dense(gy_in);
  kernels::visit_float(gy.dtype(), "max_pool2d_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* pg = gy.data<T>();
    const int64_t* pi = idx.data<int64_t>();
    T* pgx = gx.data<T>();
    for_planes(g, [&](int64_t p) {
      T* plane = pgx + p * g.h * g.w;
      zero(plane, g.h * g.w);
      for (int64_t o = p * g.oh * g.ow; o < (p + 1) * g.oh * g.ow; ++o) plane[pi[o]] += pg[o];
    });
  });
}

namespace {

// Average pooling over the windows that win(o, rows) gives for output row/column o.
template <class WindowFn>
void average_forward(const PoolGeom& g, const Tensor& x_in, const Tensor& y_out, const char* op,
                     WindowFn win) {
  Tensor x = kernels::onednn::dense(x_in);
  PlainOutput y(y_out);
  kernels::visit_float(x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = x.data<T>();
    T* py = y.data<T>();
    for_planes(g, [&](int64_t p) {
      const T* plane = px + p * g.h * g.w;
      for (int64_t oy = 0; oy < g.oh; ++oy) {
        Window wy = win(oy, true);
        for (int64_t ox = 0; ox < g.ow; ++ox) {
          Window wx = win(ox, false);
          T s = 0;
          for (int64_t iy = wy.start; iy < wy.end; ++iy)
            for (int64_t ix = wx.start; ix < wx.end; ++ix) s += plane[iy * g.w + ix];
          py[(p * g.oh + oy) * g.ow + ox] = s / T(wy.padded * wx.padded);
        }
      }
    });
  });
  y.write_back();
}

// gx = each output gradient spread evenly over its window (gx zeroed first).
template <class WindowFn>
void average_backward(const PoolGeom& g, const Tensor& gy_in, const Tensor& gx, const char* op,
                      WindowFn win) {
  Tensor gy = kernels::onednn::dense(gy_in);
  kernels::visit_float(gy.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* pg = gy.data<T>();
    T* pgx = gx.data<T>();
    for_planes(g, [&](int64_t p) {
      T* plane = pgx + p * g.h * g.w;
      zero(plane, g.h * g.w);
      for (int64_t oy = 0; oy < g.oh; ++oy) {
        Window wy = win(oy, true);
        for (int64_t ox = 0; ox < g.ow; ++ox) {
          Window wx = win(ox, false);
          T share = pg[(p * g.oh + oy) * g.ow + ox] / T(wy.padded * wx.padded);
          for (int64_t iy = wy.start; iy < wy.end; ++iy)
            for (int64_t ix = wx.start; ix < wx.end; ++ix) plane[iy * g.w + ix] += share;
        }
      }
    });
  });
}

auto fixed_windows(const PoolGeom& g) {
  return [&g](int64_t o, bool rows) {
    return rows ? window(o, g.sh, g.ph, g.kh, g.h) : window(o, g.sw, g.pw, g.kw, g.w);
  };
}

auto adaptive_windows(const PoolGeom& g) {
  return [&g](int64_t o, bool rows) {
    return rows ? adaptive_window(o, g.oh, g.h) : adaptive_window(o, g.ow, g.w);
  };
}

}  // namespace

void avg_pool_forward(const PoolGeom& g, const Tensor& x, const Tensor& y, const PoolForwardPlan* plan) {
  if (x.dtype() == f32 && avg_pool_forward_onednn(g, x, y, plan)) return;
  with_plain_layouts(plan, x, y, [&](const Tensor& px, const Tensor& py) {
    average_forward(g, px, py, "avg_pool2d", fixed_windows(g));
  });
}

void avg_pool_backward(const PoolGeom& g, const Tensor& gy, const Tensor& gx) {
  if (gy.dtype() == f32 && avg_pool_backward_onednn(g, gy, gx)) return;
  average_backward(g, gy, gx, "avg_pool2d_backward", fixed_windows(g));
}

void adaptive_avg_forward(const PoolGeom& g, const Tensor& x, const Tensor& y) {
  average_forward(g, x, y, "adaptive_avg_pool2d", adaptive_windows(g));
}

void adaptive_avg_backward(const PoolGeom& g, const Tensor& gy, const Tensor& gx) {
  average_backward(g, gy, gx, "adaptive_avg_pool2d_backward", adaptive_windows(g));
}

}  // namespace baton::kernels
