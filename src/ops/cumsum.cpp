// cumsum: running sums along one dim (ONNX CumSum), inclusive or exclusive, from the start
// or from the end. f32 accumulates in double; integers keep their dtype and wrap on
// overflow (they add as unsigned numbers, so overflow is defined). The gradient of a
// running sum is the running sum of the gradient in the other direction, with the same
// exclusive flag.
//
//   %1 = cumsum(%x) {dim=1, exclusive=0, reverse=0}
#include <algorithm>
#include <concepts>
#include <type_traits>
#include <vector>

#include "baton/ops.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/loops.h"
#include "kernels/cpu/reduce.h"
#include "ops/common.h"

namespace baton::ops {
namespace {

template <class T>
struct AccOf {
  using type = double;
};
template <std::integral T>
struct AccOf<T> {
  using type = std::make_unsigned_t<T>;
};
template <class T>
using Acc = typename AccOf<T>::type;

TensorMeta infer(const InferContext& c) {
  if (c.input(0).dtype() == b8) c.fail<DTypeError>("expects a numeric tensor, got ", c.input(0).dtype());
  normalize_dim(c.attrs.i("dim"), c.input(0).dim(), c);
  return same_as_input(c);
}

// x is [outer, n, inner] around dim. The work splits into (outer slice, block of up to
// kBlock inner columns) items; each runs down its columns in memory order, one
// accumulator per column.
template <class T>
void scan(const T* in, T* out, const kernels::Strip& s, bool exclusive, bool reverse) {
  constexpr int64_t kBlock = 256;
  const int64_t blocks = (s.inner + kBlock - 1) / kBlock;
  const int64_t work_per_item = s.n * std::min(s.inner, kBlock);
  kernels::parallel_range(
      s.outer * blocks,
      [&](int64_t b, int64_t e) {
        Acc<T> acc[kBlock];
        for (int64_t item = b; item < e; ++item) {
          const int64_t o = item / blocks, j0 = (item % blocks) * kBlock;
          const int64_t width = std::min(kBlock, s.inner - j0);
          std::fill(acc, acc + width, Acc<T>(0));
          for (int64_t step = 0; step < s.n; ++step) {
            const int64_t r = reverse ? s.n - 1 - step : step;
            const int64_t base = (o * s.n + r) * s.inner + j0;
            for (int64_t j = 0; j < width; ++j) {
              const Acc<T> v = Acc<T>(in[base + j]);
              if (exclusive) {
                out[base + j] = T(acc[j]);
                acc[j] += v;
              } else {
                acc[j] += v;
                out[base + j] = T(acc[j]);
              }
            }
          }
        }
      },
      kernels::grain_for(work_per_item));
}

void kernel(const KernelContext& c) {
  const Tensor x = kernels::dense(c.input(0));
  if (x.numel() == 0) return;
  const int64_t dim = normalize_dim(c.attrs.i("dim"), x.dim(), c);
  const kernels::Strip s = kernels::strip_around(x.shape(), dim);
  const bool exclusive = c.attrs.i("exclusive") != 0, reverse = c.attrs.i("reverse") != 0;
  kernels::visit_numeric(x.dtype(), c.op_name().c_str(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    scan<T>(x.data<T>(), c.output().data<T>(), s, exclusive, reverse);
  });
}

}  // namespace

BATON_OP(cumsum_op, "cumsum")
    .inputs(1)
    .int_attr("dim")
    .int_attr("exclusive")
    .int_attr("reverse")
    .fusion(Fusion::Reduction)  // a scan along one dim
    .infer(infer)
    .cpu(kernel)
    .grad([](const GradContext& c) {
      return Grads{cumsum(c.grad_output(), c.attrs.i("dim"), c.attrs.i("exclusive") != 0,
                          c.attrs.i("reverse") == 0, c.loc)};
    })
    .cost([](const CallContext&, std::span<const TensorMeta> out) {
      const double n = double(out[0].shape.numel());
      return Cost{n, 2 * n * double(dtype_size(out[0].dtype))};
    })
    .onnx("CumSum");

}  // namespace baton::ops

namespace baton {

Tensor cumsum(const Tensor& x, int64_t dim, bool exclusive, bool reverse, SourceLoc loc) {
  return ops::call(ops::cumsum_op, {x},
                   {{"dim", dim}, {"exclusive", int64_t(exclusive)}, {"reverse", int64_t(reverse)}}, loc);
}

}  // namespace baton
