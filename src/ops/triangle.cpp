// triangle: tril and triu, the lower or upper triangle of the matrices in the last two
// dims (ONNX Trilu). Element (i, j) stays when j - i <= k (lower) or j - i >= k (upper),
// else it becomes zero; k shifts the diagonal right (k > 0) or left (k < 0). Any dtype. The
// gradient is the same mask applied to the output gradient.
//
//   %1 = triangle(%x) {upper=0, k=0}
#include <algorithm>
#include <cstring>

#include "baton/ops.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/loops.h"
#include "ops/common.h"

namespace baton::ops {
namespace {

TensorMeta infer(const InferContext& c) {
  if (c.input(0).dim() < 2) c.fail("expects a tensor of at least 2 dims (matrices in the last two)");
  return same_as_input(c);
}

// The kernel's parameters: which triangle, and its diagonal.
struct Triangle {
  bool upper;
  int64_t k;
};
Triangle triangle_of(const CallContext& c) { return {c.attrs.i("upper") != 0, c.attrs.i("k")}; }

// Row by row: the kept columns of a row are one run, copied; the rest are zeroed (all-zero
// bits are zero in every dtype).
void kernel(const KernelContext& c) {
  const Tensor x = kernels::dense(c.input(0));
  const Tensor& out = c.output();
  const int64_t rank = x.dim(), m = x.shape()[size_t(rank - 2)], n = x.shape()[size_t(rank - 1)];
  if (out.numel() == 0) return;
  const bool upper = c.params<Triangle>().upper;
  // k clamped to where it still changes something, so i + k cannot overflow.
  const int64_t k = std::clamp<int64_t>(c.params<Triangle>().k, -m - 1, n + 1);
  const size_t esize = dtype_size(x.dtype());
  const auto* in = static_cast<const char*>(x.raw_data());
  auto* o = static_cast<char*>(out.raw_data());
  const int64_t rows = x.numel() / n;
  kernels::parallel_range(
      rows,
      [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {
          const int64_t i = r % m;
          // Kept columns [lo, hi).
          const int64_t lo = upper ? std::clamp<int64_t>(i + k, 0, n) : 0;
          const int64_t hi = upper ? n : std::clamp<int64_t>(i + k + 1, 0, n);
          const char* src = in + size_t(r * n) * esize;
          char* dst = o + size_t(r * n) * esize;
          if (lo > 0) std::memset(dst, 0, size_t(lo) * esize);
          if (hi > lo && dst != src) std::memmove(dst + size_t(lo) * esize, src + size_t(lo) * esize, size_t(hi - lo) * esize);
          if (hi < n) std::memset(dst + size_t(std::max(hi, lo)) * esize, 0, size_t(n - std::max(hi, lo)) * esize);
        }
      },
      kernels::grain_for(n));
}

Attrs attrs_of(bool upper, int64_t k) { return {{"upper", int64_t(upper)}, {"k", k}}; }

}  // namespace

BATON_OP(triangle_op, "triangle")
    .inputs(1)
    .int_attr("upper")
    .int_attr("k")
    .fusion(Fusion::Injective)
    .infer(infer)
    .params(triangle_of)
    .cpu(kernel)
    .grad([](const GradContext& c) {
      const int64_t k = c.attrs.i("k");
      return Grads{c.attrs.i("upper") != 0 ? triu(c.grad_output(), k, c.loc) : tril(c.grad_output(), k, c.loc)};
    })
    .cost([](const CallContext&, std::span<const TensorMeta> out) {
      return Cost{0, 2 * double(out[0].shape.numel()) * double(dtype_size(out[0].dtype))};
    })
    // Each element reads only the same element of x: the output may take x's buffer.
    .output_overwrites(0)
    .onnx("Trilu");

}  // namespace baton::ops

namespace baton {

Tensor tril(const Tensor& x, int64_t k, SourceLoc loc) {
  return ops::call(ops::triangle_op, {x}, ops::attrs_of(false, k), loc);
}

Tensor triu(const Tensor& x, int64_t k, SourceLoc loc) {
  return ops::call(ops::triangle_op, {x}, ops::attrs_of(true, k), loc);
}

}  // namespace baton
