// Strided copy with dtype conversion and broadcasting: dst[...] = src[...].
#pragma once
#include "baton/tensor.h"

namespace baton::kernels {

// dst may be any view (sliced, transposed); src broadcasts to dst's shape.
void copy_into(const Tensor& dst, const Tensor& src);

}  // namespace baton::kernels
