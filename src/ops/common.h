// Helpers shared by op definitions.
#pragma once
#include <utility>

#include "ops/registry.h"

namespace baton::ops {

// A view of x's storage with another shape, strides and offset (no copy).
Tensor make_view(const Tensor& x, Shape shape, Shape strides, int64_t offset);

// Casts the operand of lower dtype so both share promote_types(a, b).
std::pair<Tensor, Tensor> promote(const Tensor& a, const Tensor& b, SourceLoc loc);

// A 0-d tensor for a scalar operand next to `other`: it keeps other's dtype when its kind
// fits (2.0 * f64 -> f64, 2 * i32 -> i32); a float scalar with an integer tensor is f32.
Tensor scalar_operand(Scalar s, const Tensor& other);

// Throws DTypeError unless every input has the dtype of input 0.
void require_same_dtype(const CallContext& c);
// Throws DTypeError unless input i is f32 or f64.
void require_float(const CallContext& c, size_t i = 0);

// The dims a reduction covers, normalised and sorted; empty `dims` means all.
std::vector<int64_t> reduction_dims(const std::vector<int64_t>& dims, int64_t rank,
                                    const CallContext& c);
// x's shape with the reduced dims removed (or kept as 1 with keepdim).
Shape reduced_shape(const Shape& shape, const std::vector<int64_t>& dims, bool keepdim);

}  // namespace baton::ops

// Each binary op takes two tensors, or a tensor and a number on either side.
#define BATON_DEFINE_BINARY(name, body)                                          \
  Tensor name(const Tensor& a_in, const Tensor& b_in, SourceLoc loc) {           \
    auto [a, b] = ops::promote(a_in, b_in, loc);                                      \
    body                                                                         \
  }                                                                              \
  Tensor name(const Tensor& a, Scalar b, SourceLoc loc) {                        \
    return name(a, ops::scalar_operand(b, a), loc);                                   \
  }                                                                              \
  Tensor name(Scalar a, const Tensor& b, SourceLoc loc) {                        \
    return name(ops::scalar_operand(a, b), b, loc);                                   \
  }

