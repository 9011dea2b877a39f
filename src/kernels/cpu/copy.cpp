#include "kernels/cpu/copy.h"

#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/loops.h"

namespace baton::kernels {

void copy_into(const Tensor& dst, const Tensor& src) {
  std::array<Shape, 2> strides{dst.strides(), broadcast_strides(src, dst.shape())};
  auto layout = coalesce<2>(dst.shape(), strides);
  visit_dtype(dst.dtype(), [&](auto dtag) {
    using D = typename decltype(dtag)::type;
    visit_dtype(src.dtype(), [&](auto stag) {
      using S = typename decltype(stag)::type;
      D* d = static_cast<D*>(dst.raw_data());
      const S* s = static_cast<const S*>(src.raw_data());
      for_each_row(layout, [&](const std::array<int64_t, 2>& off, int64_t n,
                               const std::array<int64_t, 2>& st) {
        D* pd = d + off[0];
        const S* ps = s + off[1];
        for (int64_t i = 0; i < n; ++i) pd[i * st[0]] = D(ps[i * st[1]]);
      });
    });
  });
}

Tensor dense(const Tensor& t) {
  if (t.is_contiguous()) return t;
  Tensor out = empty(t.shape(), t.dtype());
  copy_into(out, t);
  return out;
}

}  // namespace baton::kernels
