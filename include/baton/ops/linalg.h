#pragma once
#include "baton/tensor.h"

namespace baton {

// Matrix product with numpy semantics: 1-D operands are promoted and squeezed back,
// leading (batch) dims broadcast. Runs on oneDNN.
Tensor matmul(const Tensor& a, const Tensor& b, SourceLoc loc = SourceLoc::current());

// The lower (tril) or upper (triu) triangle of the matrices in the last two dims of x
// (rank >= 2, any dtype); the other elements are zero. Element (i, j) is kept when
// j - i <= k (tril) or j - i >= k (triu): k = 0 is the main diagonal, k > 0 a diagonal
// above it, k < 0 one below. Like torch.tril/triu and ONNX Trilu.
Tensor tril(const Tensor& x, int64_t k = 0, SourceLoc loc = SourceLoc::current());
Tensor triu(const Tensor& x, int64_t k = 0, SourceLoc loc = SourceLoc::current());

}  // namespace baton
