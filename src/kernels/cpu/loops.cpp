#include "kernels/cpu/loops.h"

#include <omp.h>

namespace baton::kernels {

int omp_threads() { return omp_get_num_threads(); }
int omp_thread() { return omp_get_thread_num(); }
int max_threads() { return omp_get_max_threads(); }

Shape broadcast_strides(const Tensor& t, const Shape& out_shape) {
  Shape result(out_shape.size(), 0);
  const size_t lead = out_shape.size() - size_t(t.dim());
  for (size_t d = 0; d < size_t(t.dim()); ++d)
    result[lead + d] = t.shape()[d] == 1 ? 0 : t.strides()[d];
  return result;
}

template <size_t N>
StridedLayout<N> coalesce(const Shape& shape, const std::array<Shape, N>& strides) {
  StridedLayout<N> out;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    const size_t r = out.shape.size();
    bool merge = r > 0;
    for (size_t k = 0; k < N && merge; ++k)
      merge = out.strides[k][r - 1] == strides[k][d] * shape[d];
    if (merge) {
      out.shape[r - 1] *= shape[d];
      for (size_t k = 0; k < N; ++k) out.strides[k][r - 1] = strides[k][d];
    } else {
      out.shape.push_back(shape[d]);
      for (size_t k = 0; k < N; ++k) out.strides[k].push_back(strides[k][d]);
    }
  }
  if (out.shape.empty() && shape.numel() == 1) {  // a single element: one row of one
    out.shape.push_back(1);
    for (size_t k = 0; k < N; ++k) out.strides[k].push_back(1);
  }
  return out;
}

template StridedLayout<1> coalesce<1>(const Shape&, const std::array<Shape, 1>&);
template StridedLayout<2> coalesce<2>(const Shape&, const std::array<Shape, 2>&);
template StridedLayout<3> coalesce<3>(const Shape&, const std::array<Shape, 3>&);
template StridedLayout<4> coalesce<4>(const Shape&, const std::array<Shape, 4>&);

}  // namespace baton::kernels
