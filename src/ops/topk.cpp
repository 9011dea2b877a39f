// topk: the k largest (or smallest) elements along one dim, sorted, with their positions
// (ONNX TopK, PyTorch topk). Each line along the dim is ranked on its own with a partial
// sort of (value, position) pairs, O(n log k): larger values first (smaller with
// largest=0), equal values by lower position, NaN above every number (as PyTorch ranks it).
//
//   %1, %2 = topk(%x) {k=3, dim=1, largest=1}   (values in x's dtype, positions i64)
//
// Gradient: the values' gradient added at the positions they came from (scatter_add).
#include <algorithm>
#include <cmath>
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
bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) return std::isnan(v);
  return false;
}

// Whether a ranks before b: the larger (or smaller) value, NaN first, then the lower position.
template <class T>
struct Ranking {
  bool largest;
  bool operator()(const std::pair<T, int64_t>& a, const std::pair<T, int64_t>& b) const {
    const bool a_nan = is_nan(a.first), b_nan = is_nan(b.first);
    if (a_nan || b_nan) return a_nan && b_nan ? a.second < b.second : a_nan == largest;
    if (a.first != b.first) return largest ? a.first > b.first : a.first < b.first;
    return a.second < b.second;
  }
};

template <class T>
void top_lines(const T* x, T* values, int64_t* positions, const kernels::Strip& s, int64_t k, bool largest) {
  kernels::parallel_range(
      s.outer * s.inner,
      [&](int64_t begin, int64_t end) {
        std::vector<std::pair<T, int64_t>> line(size_t(s.n));
        for (int64_t item = begin; item < end; ++item) {
          const int64_t o = item / s.inner, j = item % s.inner;
          const T* in = x + o * s.n * s.inner + j;
          for (int64_t i = 0; i < s.n; ++i) line[size_t(i)] = {in[i * s.inner], i};
          std::partial_sort(line.begin(), line.begin() + k, line.end(), Ranking<T>{largest});
          const int64_t at = o * k * s.inner + j;
          for (int64_t r = 0; r < k; ++r) {
            values[at + r * s.inner] = line[size_t(r)].first;
            positions[at + r * s.inner] = line[size_t(r)].second;
          }
        }
      },
      kernels::grain_for(s.n * 4));
}

int64_t dim_of(const CallContext& c) {
  if (c.input(0).dim() == 0) c.fail("needs a tensor of rank 1 or more, got a scalar");
  return normalize_dim(c.attrs.i("dim"), c.input(0).dim(), c);
}

std::vector<TensorMeta> infer(const InferContext& c) {
  const Tensor& x = c.input(0);
  if (x.dtype() == DType::b8) c.fail<DTypeError>("expects a numeric tensor, got ", x.dtype());
  const int64_t dim = dim_of(c), k = c.attrs.i("k"), n = x.shape()[size_t(dim)];
  if (k < 0 || (!sym::is_symbol(n) && k > n))
    c.fail<ValueError>("k = ", k, " is not in [0, ", sym::to_string(n), "] (the size of dim ", dim, ")");
  Shape out = x.shape();
  out[size_t(dim)] = k;
  return {{x.dtype(), out}, {DType::i64, out}};
}

void kernel(const KernelContext& c) {
  const Tensor x = kernels::dense(c.input(0));
  const int64_t dim = dim_of(c), k = c.attrs.i("k");
  if (k > x.shape()[size_t(dim)])
    c.fail<ValueError>("k = ", k, " is more than the ", x.shape()[size_t(dim)], " elements along dim ", dim);
  if (c.output(0).numel() == 0) return;
  const kernels::Strip s = kernels::strip_around(x.shape(), dim);
  const bool largest = c.attrs.i("largest") != 0;
  kernels::visit_numeric(x.dtype(), "topk", [&](auto tag) {
    using T = typename decltype(tag)::type;
    top_lines<T>(x.data<T>(), c.output(0).data<T>(), c.output(1).data<int64_t>(), s, k, largest);
  });
}

}  // namespace

BATON_OP(topk_op, "topk")
    .inputs(1)
    .outputs(2)
    .int_attr("k")
    .int_attr("dim")
    .int_attr("largest")
    .infer(infer)
    .cpu(kernel)
    .grad([](const GradContext& c) {
      const Tensor& x = c.input(0);
      const Tensor& g = c.grad_output(0);
      if (!g.defined()) return Grads{Tensor()};
      return Grads{scatter_add(zeros_like(x), c.attrs.i("dim"), c.output(1), g, c.loc)};
    })
    .cost([](const CallContext& c, std::span<const TensorMeta>) {
      const double n = double(c.input(0).numel());
      return Cost{n * std::log2(double(std::max<int64_t>(c.attrs.i("k"), 2))), n * double(dtype_size(c.input(0).dtype()))};
    });

}  // namespace baton::ops

namespace baton {

TopK topk(const Tensor& x, int64_t k, int64_t dim, bool largest, SourceLoc loc) {
  const Tensor inputs[] = {x};
  std::vector<Tensor> out =
      ops::call_many(ops::topk_op, inputs, {{"k", k}, {"dim", dim}, {"largest", int64_t(largest)}}, loc);
  return {out[0], out[1]};
}

}  // namespace baton
