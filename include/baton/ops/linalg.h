#pragma once
#include "baton/tensor.h"

namespace baton {

// Matrix product with numpy semantics: 1-D operands are promoted and squeezed back,
// leading (batch) dims broadcast. Runs on oneDNN.
Tensor matmul(const Tensor& a, const Tensor& b, SourceLoc loc = SourceLoc::current());

}  // namespace baton
