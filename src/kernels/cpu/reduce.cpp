#include "kernels/cpu/reduce.h"

#include <algorithm>

#include "baton/ops.h"

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
    order.push_back(d);
    r.inner *= x.shape()[size_t(d)];
  }
  // Kernels run without autograd; this permute/copy must not record history.
  Tensor moved = x.detach();
  bool identity = true;
  for (size_t i = 0; i < order.size(); ++i) identity &= order[i] == int64_t(i);
  if (!identity) moved = permute(moved, order);
  r.rows = moved.is_contiguous() ? moved : moved.contiguous();
  return r;
}

}  // namespace baton::kernels
