// Strided copy with dtype conversion and broadcasting: dst[...] = src[...].
#pragma once
#include "baton/tensor.h"

namespace baton::kernels {

// dst may be any view (sliced, transposed); src broadcasts to dst's shape.
void copy_into(const Tensor& dst, const Tensor& src);

// t itself when contiguous, else a contiguous copy. Kernels use it: no op is dispatched,
// so nothing is recorded or profiled.
Tensor dense(const Tensor& t);

}  // namespace baton::kernels
