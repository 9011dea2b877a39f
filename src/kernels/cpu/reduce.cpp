#include "kernels/cpu/reduce.h"

#include <omp.h>

#include <algorithm>

#include "kernels/cpu/copy.h"

namespace baton::kernels {

ReductionRows reduction_rows(const Tensor& x, const std::vector<int64_t>& dims) {
  ReductionRows r;
  Shape order;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (!std::binary_search(dims.begin(), dims.end(), d)) {
      order.push_back(d);
      r.outer *= x.shape()[size_t(d)];
    }
  for (int64_t d : dims) {
    if (d >= x.dim()) continue;  // a 0-d tensor "reduced" over dim 0
    order.push_back(d);
    r.inner *= x.shape()[size_t(d)];
  }
  bool identity = true;
  for (size_t i = 0; i < order.size(); ++i) identity &= order[i] == int64_t(i);
  r.rows = dense(identity ? x : permuted(x, order));
  return r;
}


std::optional<Strip> strip_of(const Shape& shape, const std::vector<int64_t>& dims) {
  for (size_t i = 1; i < dims.size(); ++i)
    if (dims[i] != dims[i - 1] + 1) return std::nullopt;
  Strip s;
  for (int64_t d = 0; d < int64_t(shape.size()); ++d) {
    int64_t size = shape[size_t(d)];
    if (dims.empty() || (d >= dims.front() && d <= dims.back())) s.n *= size;
    else if (d < dims.front()) s.outer *= size;
    else s.inner *= size;
  }
  return s;
}

namespace {

// A channels-last x (a plan's activation, as a conv bias gradient reads it) seen in its
// memory order [n, h, w, c], where its dims sit at positions 0, 3, 1, 2: a strip when the
// reduced dims are adjacent there and the kept ones keep their order (the output's layout).
std::optional<Strip> channels_last_strip(const Tensor& x, const std::vector<int64_t>& dims) {
  static constexpr int64_t kPosition[4] = {0, 3, 1, 2};
  std::vector<int64_t> reduced, kept;
  for (int64_t d = 0; d < 4; ++d)
    (std::binary_search(dims.begin(), dims.end(), d) ? reduced : kept).push_back(kPosition[d]);
  if (!std::is_sorted(kept.begin(), kept.end())) return std::nullopt;
  std::sort(reduced.begin(), reduced.end());
  const Shape& s = x.shape();
  return strip_of(Shape{s[0], s[2], s[3], s[1]}, reduced);
}

}  // namespace

std::optional<Strip> adjacent_strip(const Tensor& x, const std::vector<int64_t>& dims) {
  if (dims.empty() || x.dim() == 0) return std::nullopt;
  if (is_channels_last(x)) return channels_last_strip(x, dims);
  if (!x.is_contiguous()) return std::nullopt;
  return strip_of(x.shape(), dims);
}

size_t innermost_run(const std::vector<int64_t>& dims) {
  size_t k = dims.size() - 1;
  while (k > 0 && dims[k - 1] == dims[k] - 1) --k;
  return k;
}

std::optional<RunSplit> split_runs(const Shape& shape, const std::vector<int64_t>& dims) {
  if (dims.size() < 2) return std::nullopt;
  const size_t k = innermost_run(dims);
  if (k == 0) return std::nullopt;
  RunSplit r{{dims.begin() + long(k), dims.end()}, {dims.begin(), dims.begin() + long(k)}, {}};
  for (int64_t d = 0; d < int64_t(shape.size()); ++d)
    if (d < r.inner.front() || d > r.inner.back()) r.partial_shape.push_back(shape[size_t(d)]);
  return r;
}

std::optional<RunSplit> split_runs(const Tensor& x, const std::vector<int64_t>& dims) {
  if (!x.is_contiguous() || adjacent_strip(x, dims)) return std::nullopt;
  return split_runs(x.shape(), dims);
}

Strip evaluated_strip(const Shape& shape, const std::vector<int64_t>& dims) {
  if (std::optional<Strip> s = strip_of(shape, dims)) return *s;
  return *strip_of(shape, {dims.begin() + long(innermost_run(dims)), dims.end()});
}

Strip strip_around(const Shape& shape, int64_t dim) {
  Strip s;
  for (int64_t d = 0; d < int64_t(shape.size()); ++d) {
    int64_t size = shape[size_t(d)];
    if (d < dim) s.outer *= size;
    else if (d == dim) s.n = size;
    else s.inner *= size;
  }
  return s;
}

}  // namespace baton::kernels
