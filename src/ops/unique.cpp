// unique (ONNX Unique): the distinct slices of x along a dim (or the distinct elements of
// the flattened x), sorted ascending (lexicographically for slices) or in order of first
// appearance, with each one's first index, each slice's position among them (inverse) and
// how often each occurs. Values compare exactly: floats as doubles, integers and bools as
// int64; NaN has no order and is an error.
//
// How many there are depends on the values (OpDef::sized_by_values): in a graph the node
// holds a fresh symbol for the count, bound when a plan's run has found them.
//   %1, %2, %3, %4 = unique(%x) {dim=0, sorted=1, count=unique_1}
// Rows are sorted once (stable), so equal ones lie together, first occurrence first.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "baton/ops.h"
#include "core/tensor_impl.h"
#include "kernels/cpu/copy.h"
#include "ops/common.h"

namespace baton::ops {
namespace {

// The dim unique works along (-1 without one: the flattened input) and x's shape there.
struct Along {
  int64_t dim = 0;  // in the view `rows` below
  Shape shape;      // of x, flattened without a dim
};

Along along(const CallContext& c) {
  const Tensor& x = c.input(0);
  if (!c.attrs.has("dim")) return {0, Shape{x.shape().numel()}};
  if (x.dim() == 0) c.fail("a dim needs an input of rank 1 or more");
  return {normalize_dim(c.attrs.i("dim"), x.dim(), c), x.shape()};
}

std::vector<TensorMeta> infer(const InferContext& c) {
  const Along a = along(c);
  const int64_t count = count_attr(c), n = a.shape[size_t(a.dim)];
  Shape values = a.shape;
  values[size_t(a.dim)] = count;
  return {{c.input(0).dtype(), values}, {DType::i64, {count}}, {DType::i64, {n}}, {DType::i64, {count}}};
}

// x as dense [n, width] rows: the slices along the dim, each flattened.
Tensor rows_of(const Tensor& x, const Along& a) {
  const Tensor flat = kernels::dense(x);
  const Tensor shaped = make_view(flat, a.shape, contiguous_strides(a.shape), 0);
  Shape shape{a.shape[size_t(a.dim)]}, strides{shaped.strides()[size_t(a.dim)]};
  for (size_t d = 0; d < a.shape.size(); ++d)
    if (int64_t(d) != a.dim) shape.push_back(a.shape[d]), strides.push_back(shaped.strides()[d]);
  return kernels::dense(make_view(shaped, shape, strides, 0));
}

// Exact comparison of rows: floats as doubles, the rest as int64.
class RowOrder {
 public:
  RowOrder(const CallContext& c, const Tensor& rows) : floating_(is_floating(rows.dtype())) {
    const Tensor wide = cast(rows, floating_ ? DType::f64 : DType::i64).contiguous();
    if (floating_) f_ = wide.to_vector<double>();
    else i_ = wide.to_vector<int64_t>();
    for (double v : f_)
      if (std::isnan(v)) c.fail<ValueError>("NaN values have no order; unique cannot compare them");
    width_ = rows.size(0) == 0 ? 0 : rows.numel() / rows.size(0);
  }
  bool less(int64_t a, int64_t b) const {
    for (int64_t j = 0; j < width_; ++j) {
      const size_t ia = size_t(a * width_ + j), ib = size_t(b * width_ + j);
      if (floating_ ? f_[ia] != f_[ib] : i_[ia] != i_[ib]) return floating_ ? f_[ia] < f_[ib] : i_[ia] < i_[ib];
    }
    return false;
  }

 private:
  bool floating_;
  int64_t width_ = 0;
  std::vector<double> f_;
  std::vector<int64_t> i_;
};

Tensor i64_vector(const std::vector<int64_t>& v) { return tensor(v, Shape{int64_t(v.size())}); }

std::vector<Tensor> find_unique(const CallContext& c) {
  const Tensor& x = c.input(0);
  const Along a = along(c);
  const Tensor rows = rows_of(x, a);
  const int64_t n = rows.size(0);
  const RowOrder order(c, rows);
  std::vector<int64_t> by_value(static_cast<size_t>(n));
  std::iota(by_value.begin(), by_value.end(), 0);
  std::stable_sort(by_value.begin(), by_value.end(), [&](int64_t p, int64_t q) { return order.less(p, q); });
  // Groups of equal rows in value order: each one's first row and size; each row's group.
  std::vector<int64_t> first, size, group(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r = by_value[size_t(i)];
    if (i == 0 || order.less(by_value[size_t(i - 1)], r)) first.push_back(r), size.push_back(0);
    group[size_t(r)] = int64_t(first.size()) - 1;
    ++size.back();
  }
  const auto m = int64_t(first.size());
  std::vector<int64_t> out_order(static_cast<size_t>(m)), position(static_cast<size_t>(m));
  std::iota(out_order.begin(), out_order.end(), 0);
  auto by_first = [&](int64_t p, int64_t q) { return first[size_t(p)] < first[size_t(q)]; };
  if (c.attrs.i("sorted") == 0) std::sort(out_order.begin(), out_order.end(), by_first);
  std::vector<int64_t> indices, counts, inverse(static_cast<size_t>(n));
  for (int64_t k = 0; k < m; ++k) {
    const int64_t g = out_order[size_t(k)];
    position[size_t(g)] = k;
    indices.push_back(first[size_t(g)]);
    counts.push_back(size[size_t(g)]);
  }
  for (int64_t r = 0; r < n; ++r) inverse[size_t(r)] = position[size_t(group[size_t(r)])];
  // The distinct rows, then moved back to x's dim order.
  Shape picked_shape = rows.shape();
  picked_shape[0] = m;
  Tensor picked = empty(picked_shape, x.dtype());
  const size_t row_bytes = n == 0 ? 0 : size_t(rows.nbytes() / size_t(n));
  for (int64_t k = 0; k < m; ++k)
    std::memcpy(static_cast<char*>(picked.raw_data()) + size_t(k) * row_bytes,
                static_cast<const char*>(rows.raw_data()) + size_t(indices[size_t(k)]) * row_bytes, row_bytes);
  Shape values_shape = a.shape, values_strides(a.shape.size());
  values_shape[size_t(a.dim)] = m;
  const Shape picked_strides = picked.strides();
  values_strides[size_t(a.dim)] = picked_strides[0];
  for (size_t d = 0, k = 1; d < values_shape.size(); ++d)
    if (int64_t(d) != a.dim) values_strides[d] = picked_strides[k++];
  const Tensor values = kernels::dense(make_view(picked, values_shape, values_strides, 0));
  return {values, i64_vector(indices), i64_vector(inverse), i64_vector(counts)};
}

}  // namespace

BATON_OP(unique_op, "unique")
    .inputs(1)
    .outputs(4)
    .int_attr("dim", OpDef::optional)
    .int_attr("sorted")
    .int_attr("count", OpDef::optional)
    .value_sized(find_unique)
    .infer(infer);

}  // namespace baton::ops

namespace baton {

UniqueResult unique(const Tensor& x, std::optional<int64_t> dim, bool sorted, SourceLoc loc) {
  ops::Attrs attrs{{"sorted", int64_t(sorted)}};
  if (dim) attrs.set("dim", *dim);
  std::vector<Tensor> out =
      ops::call_many(ops::unique_op, {&x, 1}, ops::with_count_symbol(std::move(attrs), {&x, 1}, "unique"), loc);
  return {out[0], out[1], out[2], out[3]};
}

}  // namespace baton
