#include "ops/reduce.h"

namespace baton::ops {

Attrs reduce_attrs(const std::vector<int64_t>& dims, bool keepdim) {
  return {{"dims", dims}, {"keepdim", int64_t(keepdim)}};
}

std::vector<int64_t> reduce_dims(const CallContext& c) {
  std::vector<int64_t> dims = reduction_dims(c.attrs.ints("dims"), c.input(0).dim(), c);
  if (c.input(0).dim() == 0) dims.clear();  // a 0-d tensor reduces to itself
  return dims;
}

TensorMeta reduce_meta(const CallContext& c, DType t) {
  return {t, reduced_shape(c.input(0).shape(), reduce_dims(c), c.attrs.i("keepdim") != 0)};
}

void require_nonempty_reduction(const CallContext& c) {
  require_nonempty_reduction(c, c.input(0).shape(), reduce_dims(c));
}

void require_nonempty_reduction(const CallContext& c, const Shape& shape, const std::vector<int64_t>& dims) {
  for (int64_t d : dims)
    if (shape[size_t(d)] == 0) c.fail<ValueError>("cannot reduce over an empty dim (no identity) of ", shape);
}

Tensor expand_back(const Tensor& t, const CallContext& c) {
  const Tensor& x = c.input(0);
  Shape kept = reduced_shape(x.shape(), reduce_dims(c), /*keepdim=*/true);
  return expand(reshape(t, kept), x.shape());
}

Cost reduce_cost(const CallContext& c, std::span<const TensorMeta>) {
  double n = double(c.input(0).numel());
  return {n, n * double(dtype_size(c.input(0).dtype()))};
}

SizeCount reduced_count(std::string_view name, const Tensor& x, const std::vector<int64_t>& dims,
                        DType dtype, SourceLoc loc) {
  Attrs attrs{{"dims", dims}};
  CallContext c{composite_op(name), {&x, 1}, attrs, loc};
  return size_count(x, reduction_dims(dims, x.dim(), c), dtype, loc);
}

}  // namespace baton::ops
