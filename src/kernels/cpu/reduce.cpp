#include "kernels/cpu/reduce.h"

#include <omp.h>

#include <algorithm>

#include "baton/ops.h"
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
  // Kernels run without autograd; this permute/copy must not record history.
  Tensor moved = x.detach();
  bool identity = true;
  for (size_t i = 0; i < order.size(); ++i) identity &= order[i] == int64_t(i);
  if (!identity) moved = permute(moved, order);
  r.rows = dense(moved);
  return r;
}


std::optional<Strip> adjacent_strip(const Tensor& x, const std::vector<int64_t>& dims) {
  if (dims.empty() || x.dim() == 0 || !x.is_contiguous()) return std::nullopt;
  for (size_t i = 1; i < dims.size(); ++i)
    if (dims[i] != dims[i - 1] + 1) return std::nullopt;
  Strip s;
  const Shape& shape = x.shape();
  for (int64_t d = 0; d < x.dim(); ++d) {
    int64_t size = shape[size_t(d)];
    if (d < dims.front()) s.outer *= size;
    else if (d <= dims.back()) s.n *= size;
    else s.inner *= size;
  }
  return s;
}

std::optional<RunSplit> split_runs(const Tensor& x, const std::vector<int64_t>& dims) {
  if (dims.size() < 2 || !x.is_contiguous() || adjacent_strip(x, dims)) return std::nullopt;
  size_t k = dims.size() - 1;
  while (k > 0 && dims[k - 1] == dims[k] - 1) --k;
  RunSplit r{{dims.begin() + long(k), dims.end()}, {dims.begin(), dims.begin() + long(k)}, {}};
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d < r.inner.front() || d > r.inner.back()) r.partial_shape.push_back(x.shape()[size_t(d)]);
  return r;
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
