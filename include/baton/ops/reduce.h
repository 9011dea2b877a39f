// Reductions over dims (all dims when dims is empty), with keepdim.
#pragma once
#include <vector>

#include "baton/tensor.h"

namespace baton {

using Dims = std::vector<int64_t>;

Tensor sum(const Tensor& x, const Dims& dims = {}, bool keepdim = false,
           SourceLoc loc = SourceLoc::current());
Tensor mean(const Tensor& x, const Dims& dims = {}, bool keepdim = false,
            SourceLoc loc = SourceLoc::current());
Tensor prod(const Tensor& x, const Dims& dims = {}, bool keepdim = false,
            SourceLoc loc = SourceLoc::current());
Tensor max(const Tensor& x, const Dims& dims = {}, bool keepdim = false,
           SourceLoc loc = SourceLoc::current());
Tensor min(const Tensor& x, const Dims& dims = {}, bool keepdim = false,
           SourceLoc loc = SourceLoc::current());
// Variance with Bessel's correction (divides by n - correction).
Tensor var(const Tensor& x, const Dims& dims = {}, bool keepdim = false, int64_t correction = 1,
           SourceLoc loc = SourceLoc::current());
Tensor logsumexp(const Tensor& x, const Dims& dims, bool keepdim = false,
                 SourceLoc loc = SourceLoc::current());
// Index (i64) of the largest / smallest element along dim.
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false, SourceLoc loc = SourceLoc::current());
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim = false, SourceLoc loc = SourceLoc::current());
Tensor softmax(const Tensor& x, int64_t dim, SourceLoc loc = SourceLoc::current());
Tensor log_softmax(const Tensor& x, int64_t dim, SourceLoc loc = SourceLoc::current());

// Sums x down to `shape` (the reverse of broadcasting): the gradient of a broadcast.
Tensor sum_to_size(const Tensor& x, const Shape& shape, SourceLoc loc = SourceLoc::current());

}  // namespace baton
