// logsumexp over dims: log of the sum of exp, shifted by the max so nothing overflows.
#pragma once
#include <cstdint>
#include <vector>

#include "baton/tensor.h"

namespace baton::kernels {

// out[i] = m + log(sum(exp(x - m))) over the elements output i reduces (dims sorted and
// normalised), m their max; where m is infinite or NaN, out[i] = m. T is float or double.
template <class T>
void logsumexp_into(const Tensor& x, const std::vector<int64_t>& dims, T* out);

}  // namespace baton::kernels
