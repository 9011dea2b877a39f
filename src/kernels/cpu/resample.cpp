#include "kernels/cpu/resample.h"

#include <algorithm>
#include <cstring>

#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/loops.h"

namespace baton::kernels {
namespace {

bool copies_rows(const RowTaps& t) {
  return t.count == 1 && std::all_of(t.weight.begin(), t.weight.end(), [](double w) { return w == 1.0; });
}

// Nearest: each output row is one input row, moved as bytes.
void copy_rows(const Tensor& x, const Tensor& y, const AxisExtent& e, const RowTaps& t) {
  const int64_t out = t.rows(), row_bytes = e.inner * int64_t(dtype_size(x.dtype()));
  const auto* src = static_cast<const char*>(x.raw_data());
  auto* dst = static_cast<char*>(y.raw_data());
  parallel_range(
      e.outer * out,
      [&](int64_t begin, int64_t end) {
        for (int64_t item = begin; item < end; ++item) {
          const int64_t b = item / out, o = item % out;
          std::memcpy(dst + item * row_bytes, src + (b * e.in + t.index[size_t(o)]) * row_bytes, size_t(row_bytes));
        }
      },
      grain_for(e.inner));
}

// Each output row as the sum of its taps, accumulated tap by tap so the inner loop is a
// plain vectorizable axpy.
template <class T>
void weigh_rows(const T* x, T* y, const AxisExtent& e, const RowTaps& t) {
  const int64_t out = t.rows();
  parallel_range(
      e.outer * out,
      [&](int64_t begin, int64_t end) {
        for (int64_t item = begin; item < end; ++item) {
          const int64_t b = item / out, o = item % out;
          T* dst = y + item * e.inner;
          std::fill(dst, dst + e.inner, T(0));
          for (int k = 0; k < t.count; ++k) {
            const size_t tap = size_t(o * t.count + k);
            const T w = T(t.weight[tap]);
            if (w == T(0)) continue;
            const T* src = x + (b * e.in + t.index[tap]) * e.inner;
            for (int64_t i = 0; i < e.inner; ++i) dst[i] += w * src[i];
          }
        }
      },
      grain_for(e.inner * t.count));
}

// Items are (b, block of kBlock inner positions): each owns its slice of gx, so threads
// never add into the same element.
template <class T>
void spread_rows(const T* gy, T* gx, const AxisExtent& e, const RowTaps& t) {
  constexpr int64_t kBlock = 256;
  const int64_t out = t.rows(), blocks = (e.inner + kBlock - 1) / kBlock;
  std::fill(gx, gx + e.outer * e.in * e.inner, T(0));
  parallel_range(
      e.outer * blocks,
      [&](int64_t begin, int64_t end) {
        for (int64_t item = begin; item < end; ++item) {
          const int64_t b = item / blocks, i0 = (item % blocks) * kBlock, i1 = std::min(e.inner, i0 + kBlock);
          for (int64_t o = 0; o < out; ++o) {
            const T* src = gy + (b * out + o) * e.inner;
            for (int k = 0; k < t.count; ++k) {
              const size_t tap = size_t(o * t.count + k);
              const T w = T(t.weight[tap]);
              T* dst = gx + (b * e.in + t.index[tap]) * e.inner;
              for (int64_t i = i0; i < i1; ++i) dst[i] += w * src[i];
            }
          }
        }
      },
      grain_for(out * t.count * kBlock));
}

}  // namespace

void resample_rows(const Tensor& x, const Tensor& y, const AxisExtent& e, const RowTaps& taps) {
  if (copies_rows(taps)) return copy_rows(x, y, e, taps);
  visit_float(x.dtype(), "resize", [&](auto tag) {
    using T = typename decltype(tag)::type;
    weigh_rows<T>(x.data<T>(), y.data<T>(), e, taps);
  });
}

void resample_rows_adjoint(const Tensor& gy, const Tensor& gx, const AxisExtent& e, const RowTaps& taps) {
  visit_float(gy.dtype(), "resize_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    spread_rows<T>(gy.data<T>(), gx.data<T>(), e, taps);
  });
}

}  // namespace baton::kernels
