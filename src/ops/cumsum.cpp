// cumsum: running sums along one dim (ONNX CumSum), inclusive or exclusive, from the start
// or from the end. f32 accumulates in double; integers keep their dtype and wrap on
// overflow (they add as unsigned numbers, so overflow is defined). The gradient of a
// running sum is the running sum of the gradient in the other direction, with the same
// exclusive flag. The dim may instead be a second input, a one-element integer tensor read
// when the op runs (ONNX's CumSum takes its axis so): the output's shape is x's either way.
//
//   %1 = cumsum(%x) {dim=1, exclusive=0, reverse=0}
//   %2 = cumsum(%x, %axis) {exclusive=0, reverse=0}
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

// The dim tensor (input 1): one integer, its value unknown until the op runs.
void check_dim_input(const CallContext& c) {
  const Tensor& d = c.input(1);
  if (!(d.dtype() == DType::i64 || d.dtype() == DType::i32) || d.numel() != 1)
    c.fail<DTypeError>("the dim must be one i32 or i64 value, got ", d.dtype(), d.shape());
}

TensorMeta infer(const InferContext& c) {
  if (c.input(0).dtype() == b8) c.fail<DTypeError>("expects a numeric tensor, got ", c.input(0).dtype());
  if (c.inputs.size() > 1) check_dim_input(c);
  else if (!c.attrs.has("dim")) c.fail<ValueError>("needs a dim: an attribute or a second input");
  else normalize_dim(c.attrs.i("dim"), c.input(0).dim(), c);
  return same_as_input(c);
}

// The kernel's parameters: the dim (normalized; -1 when input 1 holds it) and the flags.
struct ScanParams {
  int64_t dim;
  bool exclusive, reverse;
};
ScanParams scan_params(const CallContext& c) {
  const int64_t dim = c.inputs.size() == 1 ? normalize_dim(c.attrs.i("dim"), c.input(0).dim(), c) : -1;
  return {dim, c.attrs.i("exclusive") != 0, c.attrs.i("reverse") != 0};
}

// The dim, normalized: the attribute's, or the value of input 1.
int64_t dim_of(const KernelContext& c) {
  if (c.inputs.size() == 1) return c.params<ScanParams>().dim;
  check_dim_input(c);
  return normalize_dim(integer_values(c.input(1))[0], c.input(0).dim(), c);
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

// Rows (dim innermost): a row's running sum in a tight loop of its own, rows over threads
// (the strips' loop, one column wide, spent most of its time outside the addition).
template <class T>
void scan_rows(const T* in, T* out, int64_t rows, int64_t n, bool exclusive, bool reverse) {
  kernels::parallel_range(
      rows,
      [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {
          const T* x = in + r * n;
          T* y = out + r * n;
          Acc<T> acc = 0;
          auto add = [&](int64_t i) {
            const Acc<T> v = Acc<T>(x[i]);
            if (exclusive) y[i] = T(acc);
            acc += v;
            if (!exclusive) y[i] = T(acc);
          };
          if (reverse)
            for (int64_t i = n; i-- > 0;) add(i);
          else
            for (int64_t i = 0; i < n; ++i) add(i);
        }
      },
      kernels::grain_for(n));
}

void kernel(const KernelContext& c) {
  const Tensor x = kernels::dense(c.input(0));
  const int64_t dim = dim_of(c);
  if (x.numel() == 0) return;
  const kernels::Strip s = kernels::strip_around(x.shape(), dim);
  const bool exclusive = c.params<ScanParams>().exclusive, reverse = c.params<ScanParams>().reverse;
  kernels::visit_numeric(x.dtype(), c.op_name().c_str(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (s.inner == 1) scan_rows<T>(x.data<T>(), c.output().data<T>(), s.outer, s.n, exclusive, reverse);
    else scan<T>(x.data<T>(), c.output().data<T>(), s, exclusive, reverse);
  });
}

}  // namespace

BATON_OP(cumsum_op, "cumsum")
    .inputs(1, 2)
    .int_attr("dim", OpDef::optional)
    .int_attr("exclusive")
    .int_attr("reverse")
    .fusion(Fusion::Reduction)  // a scan along one dim
    .infer(infer)
    .params(scan_params)
    .cpu(kernel)
    .grad([](const GradContext& c) {
      const bool exclusive = c.attrs.i("exclusive") != 0, backwards = c.attrs.i("reverse") == 0;
      if (c.inputs.size() > 1) return Grads{cumsum(c.grad_output(), c.input(1), exclusive, backwards, c.loc), Tensor()};
      return Grads{cumsum(c.grad_output(), c.attrs.i("dim"), exclusive, backwards, c.loc)};
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

Tensor cumsum(const Tensor& x, const Tensor& dim, bool exclusive, bool reverse, SourceLoc loc) {
  return ops::call(ops::cumsum_op, {x, dim}, {{"exclusive", int64_t(exclusive)}, {"reverse", int64_t(reverse)}}, loc);
}

}  // namespace baton
