// argmax and argmin over one dim: the index of the first largest (smallest) element, a NaN
// counting as both (the first NaN wins).
#pragma once
#include <cstdint>
#include <vector>

#include "baton/tensor.h"

namespace baton::kernels {

// out[i] = the index, along the reduced dims (dims: sorted, normalised, seen as one), of
// the first largest (`largest`) or smallest element of those output i reduces; x holds at
// least one element per output. Any dtype visit_dtype takes.
void arg_extreme_into(const Tensor& x, const std::vector<int64_t>& dims, bool largest, int64_t* out);

}  // namespace baton::kernels
