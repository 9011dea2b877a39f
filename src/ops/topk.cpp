// topk: the k largest (or smallest) elements along one dim, sorted, with their positions
// (ONNX TopK, PyTorch topk). Each line along the dim is ranked on its own with a partial
// sort of (value, position) pairs, O(n log k): larger values first (smaller with
// largest=0), equal values by lower position, NaN above every number (as PyTorch ranks it).
//
//   %1, %2 = topk(%x) {k=3, dim=1, largest=1}   (values in x's dtype, positions i64)
//
// topk_by_values takes k as a tensor, read when it runs (ONNX TopK's K computed from a
// model's inputs): a value-sized op whose graph node holds k as a fresh symbol, `count`.
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

// The outputs' meta for k elements (a size or a symbol) along the dim.
std::vector<TensorMeta> outputs_for(const InferContext& c, int64_t k) {
  const Tensor& x = c.input(0);
  if (x.dtype() == DType::b8) c.fail<DTypeError>("expects a numeric tensor, got ", x.dtype());
  const int64_t dim = dim_of(c), n = x.shape()[size_t(dim)];
  if (!sym::is_symbol(k) && (k < 0 || (!sym::is_symbol(n) && k > n)))
    c.fail<ValueError>("k = ", k, " is not in [0, ", sym::to_string(n), "] (the size of dim ", dim, ")");
  Shape out = x.shape();
  out[size_t(dim)] = k;
  return {{x.dtype(), out}, {DType::i64, out}};
}

// k from input 1 (topk_by_values): one integer.
int64_t k_input(const CallContext& c) {
  const Tensor& k = c.input(1);
  if (!(k.dtype() == DType::i64 || k.dtype() == DType::i32) || k.numel() != 1)
    c.fail<DTypeError>("k must be one i32 or i64 value, got ", k.dtype(), k.shape());
  return integer_values(k)[0];
}

// The kernels' parameters: the dim, the order and (topk's, from its attribute) k.
struct TopkParams {
  int64_t dim;
  bool largest;
  int64_t k = 0;
};
TopkParams topk_params(const CallContext& c) {
  return {dim_of(c), c.attrs.i("largest") != 0, c.attrs.has("k") ? c.attrs.i("k") : 0};
}

// Ranks x's lines into values and positions of k elements along the dim.
void run_topk(const CallContext& c, int64_t k, const Tensor& values, const Tensor& positions) {
  const Tensor x = kernels::dense(c.input(0));
  const int64_t dim = c.params<TopkParams>().dim;
  if (k > x.shape()[size_t(dim)])
    c.fail<ValueError>("k = ", k, " is more than the ", x.shape()[size_t(dim)], " elements along dim ", dim);
  if (values.numel() == 0) return;
  const kernels::Strip s = kernels::strip_around(x.shape(), dim);
  const bool largest = c.params<TopkParams>().largest;
  kernels::visit_numeric(x.dtype(), "topk", [&](auto tag) {
    using T = typename decltype(tag)::type;
    top_lines<T>(x.data<T>(), values.data<T>(), positions.data<int64_t>(), s, k, largest);
  });
}

std::vector<Tensor> make_topk(const CallContext& c) {
  const int64_t k = k_input(c);
  const std::vector<TensorMeta> meta = outputs_for(c, k);
  std::vector<Tensor> out{empty(meta[0].shape, meta[0].dtype), empty(meta[1].shape, meta[1].dtype)};
  run_topk(c, k, out[0], out[1]);
  return out;
}

Grads topk_grad(const GradContext& c) {
  Grads grads(c.inputs.size());  // none for k
  if (c.grad_output(0).defined())
    grads[0] = scatter_add(scatter_base(c.input(0), c.loc), c.attrs.i("dim"), c.output(1), c.grad_output(0), c.loc);
  return grads;
}

Cost topk_cost(const CallContext& c, std::span<const TensorMeta> out) {
  const double n = double(c.input(0).numel()), k = double(out[0].shape.numel()) / std::max(n, 1.0);
  return Cost{n * std::log2(std::max(k * n, 2.0)), n * double(dtype_size(c.input(0).dtype()))};
}

}  // namespace

BATON_OP(topk_op, "topk")
    .inputs(1)
    .outputs(2)
    .int_attr("k")
    .int_attr("dim")
    .int_attr("largest")
    .infer([](const InferContext& c) { return outputs_for(c, c.attrs.i("k")); })
    .params(topk_params)
    .cpu([](const KernelContext& c) { run_topk(c, c.params<TopkParams>().k, c.output(0), c.output(1)); })
    .grad(topk_grad)
    .cost(topk_cost);

BATON_OP(topk_by_values_op, "topk_by_values")
    .inputs(2)
    .outputs(2)
    .int_attr("dim")
    .int_attr("largest")
    .int_attr("count", OpDef::optional)
    .params(topk_params)
    .value_sized(make_topk)
    .infer([](const InferContext& c) { return outputs_for(c, count_attr(c)); })
    .grad(topk_grad)
    .cost(topk_cost);

}  // namespace baton::ops

namespace baton {

TopK topk(const Tensor& x, int64_t k, int64_t dim, bool largest, SourceLoc loc) {
  const Tensor inputs[] = {x};
  std::vector<Tensor> out =
      ops::call_many(ops::topk_op, inputs, {{"k", k}, {"dim", dim}, {"largest", int64_t(largest)}}, loc);
  return {out[0], out[1]};
}

TopK topk(const Tensor& x, const Tensor& k, int64_t dim, bool largest, SourceLoc loc) {
  const Tensor inputs[] = {x, k};
  const ops::Attrs attrs{{"dim", dim}, {"largest", int64_t(largest)}};
  std::vector<Tensor> out =
      ops::call_many(ops::topk_by_values_op, inputs, ops::with_count_symbol(attrs, inputs, "topk"), loc);
  return {out[0], out[1]};
}

}  // namespace baton
