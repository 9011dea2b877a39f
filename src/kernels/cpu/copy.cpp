#include "kernels/cpu/copy.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <utility>
#include <vector>

#include "core/tensor_impl.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/loops.h"
#include "kernels/cpu/text.h"

namespace baton::kernels {

std::string storage_only_message(DType t) {
  if (t == DType::string)
    return "string tensors hold text: views, cast (to and from numbers) and the text ops take them, "
           "arithmetic does not (docs/dtypes.md)";
  return str(t, " is a storage dtype: tensors hold it and cast converts it, but ops compute on ", compute_dtype(t),
             "; cast to ", compute_dtype(t), " first (docs/dtypes.md)");
}

bool is_dense(const Tensor& t) {
  // The dims that step, by (stride, size), sorted by insertion into Shapes: kernels ask
  // this on every call, and a Shape of a few dims allocates nothing.
  Shape strides, sizes;
  for (size_t d = 0; d < size_t(t.dim()); ++d) {
    const int64_t stride = t.strides()[d], size = t.shape()[d];
    if (size == 1) continue;
    size_t k = strides.size();
    while (k > 0 && std::pair(strides[k - 1], sizes[k - 1]) > std::pair(stride, size)) --k;
    strides.insert(k, stride);
    sizes.insert(k, size);
  }
  int64_t next = 1;
  for (size_t k = 0; k < strides.size(); ++k) {
    if (strides[k] != next) return false;
    next *= sizes[k];
  }
  return true;
}

bool holds_one_value(const Tensor& t) {
  const TensorImpl& impl = *t.impl();
  for (size_t d = 0; d < impl.shape.size(); ++d)
    if (impl.shape[d] != 1 && impl.strides[d] != 0) return false;
  return true;
}

bool is_channels_last(const Tensor& t) {
  return t.dim() == 4 && !t.is_contiguous() && t.strides() == channels_last_strides(t.shape());
}

namespace {

// A transposing copy: dst's innermost dim is contiguous while src steps through memory
// along it (a transpose made contiguous). Element by element, each read lands on its own
// cache line, and lines a power-of-two stride apart share one cache set (1024x1024 floats
// took 1.6 ms); instead tiles of kTile x kTile go through a buffer, read along src's
// contiguous dim (`across`) and written along dst's rows. Threads take tiles of rows.
// False where the layout is not such a transpose.
template <class D, class S, class F>
bool copy_transposing(D* d, const S* s, const StridedLayout<2>& layout, F& convert_one) {
  constexpr int64_t kTile = 32;
  const Shape& shape = layout.shape;
  const auto &dst_strides = layout.strides[0], &src_strides = layout.strides[1];
  const size_t rank = shape.size(), inner = rank - 1;
  if (rank < 2 || dst_strides[inner] != 1 || src_strides[inner] <= 1) return false;
  size_t across = rank;
  for (size_t k = 0; k < inner; ++k)
    if (src_strides[k] == 1) across = k;
  if (across == rank || shape[across] < 8) return false;
  Shape outer_dims;  // the dims besides the two the tiles cover, outermost first
  for (size_t k = 0; k < inner; ++k)
    if (k != across) outer_dims.push_back(int64_t(k));
  const int64_t rows = shape[across], cols = shape[inner], row_tiles = (rows + kTile - 1) / kTile;
  const int64_t dst_row = dst_strides[across], src_col = src_strides[inner];
  int64_t outer = 1;
  for (int64_t k : outer_dims) outer *= shape[size_t(k)];
  parallel_range(outer * row_tiles, [&](int64_t begin, int64_t end) {
    D tile[kTile][kTile];  // tile[j][i]: column j of the tile's rows, as src holds it
    for (int64_t item = begin; item < end; ++item) {
      int64_t rest = item / row_tiles, dst_at = 0, src_at = 0;
      for (size_t k = outer_dims.size(); k-- > 0;) {
        const size_t dim = size_t(outer_dims[k]);
        dst_at += rest % shape[dim] * dst_strides[dim];
        src_at += rest % shape[dim] * src_strides[dim];
        rest /= shape[dim];
      }
      const int64_t i0 = item % row_tiles * kTile, tile_rows = std::min(kTile, rows - i0);
      for (int64_t j0 = 0; j0 < cols; j0 += kTile) {
        const int64_t tile_cols = std::min(kTile, cols - j0);
        for (int64_t j = 0; j < tile_cols; ++j) {
          const S* in = s + src_at + (j0 + j) * src_col + i0;
          for (int64_t i = 0; i < tile_rows; ++i) tile[j][i] = convert_one(in[i]);
        }
        for (int64_t i = 0; i < tile_rows; ++i) {
          D* out = d + dst_at + (i0 + i) * dst_row + j0;
          for (int64_t j = 0; j < tile_cols; ++j) out[j] = tile[j][i];
        }
      }
    }
  }, grain_for(kTile * cols));
  return true;
}

// dst[...] = convert_one(src[...]) over any strides, src broadcast. Where both sides are one
// run of memory (a cast of a contiguous tensor), a plain loop, which the compiler
// vectorizes, split over threads when it is long.
template <class D, class S, class F>
void copy_elements(const Tensor& dst, const Tensor& src, F&& convert_one) {
  std::array<Shape, 2> strides{dst.strides(), broadcast_strides(src, dst.shape())};
  auto layout = coalesce<2>(dst.shape(), strides);
  D* d = static_cast<D*>(dst.raw_data());
  const S* s = static_cast<const S*>(src.raw_data());
  constexpr bool numbers = !std::is_same_v<D, std::string> && !std::is_same_v<S, std::string>;
  if (numbers && dst.numel() > 0 && holds_one_value(src) && dst.is_contiguous()) {  // a fill
    const D v = convert_one(*s);
    parallel_range(dst.numel(), [d, v](int64_t begin, int64_t end) { std::fill(d + begin, d + end, v); });
    return;
  }
  if (numbers && layout.shape.size() == 1 && layout.strides[0][0] == 1 && layout.strides[1][0] == 1) {
    parallel_range(layout.shape[0], [d, s, &convert_one](int64_t begin, int64_t end) {
      D* __restrict out = d;  // (a u8 store may alias anything, even the pointers: local copies)
      const S* __restrict in = s;
      for (int64_t i = begin; i < end; ++i) out[i] = convert_one(in[i]);
    });
    return;
  }
  if constexpr (numbers)
    if (copy_transposing(d, s, layout, convert_one)) return;
  for_each_row(layout, [&](const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& st) {
    D* pd = d + off[0];
    const S* ps = s + off[1];
    for (int64_t i = 0; i < n; ++i) pd[i * st[0]] = convert_one(ps[i * st[1]]);
  });
}

// Copies to, from or between string tensors: elements are objects, never bytes to move.
void copy_text(const Tensor& dst, const Tensor& src) {
  using Text = std::string;
  if (dst.dtype() == src.dtype()) return copy_elements<Text, Text>(dst, src, [](const Text& t) { return t; });
  if (dst.dtype() == DType::string)
    return visit_any_dtype(src.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      copy_elements<Text, S>(dst, src, [](S v) { return format_value(v); });
    });
  visit_any_dtype(dst.dtype(), [&](auto tag) {
    using D = typename decltype(tag)::type;
    copy_elements<D, Text>(dst, src, [](const Text& t) { return parse_value<D>(t); });
  });
}

}  // namespace

void copy_into(const Tensor& dst, const Tensor& src) {
  if (dst.dtype() == DType::string || src.dtype() == DType::string) return copy_text(dst, src);
  // One layout on both sides, with no gaps: one block of bytes, whatever the dims' order
  // (coalescing below merges only dims already in row-major order).
  if (dst.dtype() == src.dtype() && dst.shape() == src.shape() && dst.strides() == src.strides() && is_dense(dst)) {
    std::memmove(dst.raw_data(), src.raw_data(), size_t(dst.numel()) * dtype_size(dst.dtype()));
    return;
  }
  visit_any_dtype(dst.dtype(), [&](auto dtag) {
    using D = typename decltype(dtag)::type;
    visit_any_dtype(src.dtype(), [&](auto stag) {
      using S = typename decltype(stag)::type;
      copy_elements<D, S>(dst, src, [](S v) { return convert<D>(v); });
    });
  });
}

Tensor dense(const Tensor& t) {
  if (t.is_contiguous()) return t;
  Tensor out = empty(t.shape(), t.dtype());
  copy_into(out, t);
  return out;
}

Tensor zeros(const Shape& shape, DType dtype) {
  Tensor out = empty(shape, dtype);
  std::memset(out.raw_data(), 0, size_t(out.numel()) * dtype_size(dtype));
  return out;
}

Tensor converted(const Tensor& t, DType dtype) {
  Tensor out = empty(t.shape(), dtype);
  copy_into(out, t);
  return out;
}

Tensor zeros_laid_out_as(const Tensor& meta) {
  int64_t extent = 1;  // elements up to the last one's offset (strides of a tensor are >= 0)
  for (int64_t d = 0; d < meta.dim(); ++d) extent += (meta.shape()[size_t(d)] - 1) * meta.strides()[size_t(d)];
  return make_view(kernels::zeros({meta.numel() == 0 ? 0 : extent}, meta.dtype()), meta.shape(), meta.strides(), 0);
}

Tensor permuted(const Tensor& t, const Shape& order) {
  Shape shape, strides;
  for (int64_t d : order) {
    shape.push_back(t.shape()[size_t(d)]);
    strides.push_back(t.strides()[size_t(d)]);
  }
  return make_view(t, shape, strides, t.offset());
}

Tensor reshaped(const Tensor& t, const Shape& shape) {
  if ((!t.is_contiguous() && t.numel() != 0) || Shape(shape).numel() != t.numel())  // no elements: any strides
    throw std::logic_error("kernels::reshaped: needs a contiguous tensor of as many elements");
  return make_view(t, shape, contiguous_strides(shape), t.offset());
}

}  // namespace baton::kernels
