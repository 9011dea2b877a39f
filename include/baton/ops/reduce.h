// Reductions over dims (all dims when dims is empty), with keepdim. A bad dim is an
// IndexError naming the op and the caller's file:line. Integer and bool sums and products
// are i64; mean, var, logsumexp and softmax of integers are f32. Float sums accumulate in
// double (f32) or with 8 partial sums (f64).
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
// max/min: the values only (see argmax/argmin for indices); NaN propagates. The gradient
// goes to the elements equal to the result, shared evenly between ties.
Tensor max(const Tensor& x, const Dims& dims = {}, bool keepdim = false,
           SourceLoc loc = SourceLoc::current());
Tensor min(const Tensor& x, const Dims& dims = {}, bool keepdim = false,
           SourceLoc loc = SourceLoc::current());
// Variance with Bessel's correction (divides by n - correction).
Tensor var(const Tensor& x, const Dims& dims = {}, bool keepdim = false, int64_t correction = 1,
           SourceLoc loc = SourceLoc::current());
Tensor logsumexp(const Tensor& x, const Dims& dims, bool keepdim = false,
                 SourceLoc loc = SourceLoc::current());
// Index (i64) of the largest / smallest element along dim: the first one on ties (a NaN
// counts as both largest and smallest). Not differentiable.
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false, SourceLoc loc = SourceLoc::current());
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim = false, SourceLoc loc = SourceLoc::current());
// Numerically stable (the max along dim is subtracted first).
Tensor softmax(const Tensor& x, int64_t dim, SourceLoc loc = SourceLoc::current());
Tensor log_softmax(const Tensor& x, int64_t dim, SourceLoc loc = SourceLoc::current());

// The k largest (or smallest) elements along dim, sorted, and their positions (i64): equal
// values in the order of their positions, NaN above every number. Like PyTorch's topk and
// ONNX's TopK.
struct TopK {
  Tensor values, indices;
};
TopK topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true, SourceLoc loc = SourceLoc::current());
// The same with k in a one-element integer tensor, read when it runs (in a graph, the
// outputs' size along dim is a symbol a run binds).
TopK topk(const Tensor& x, const Tensor& k, int64_t dim = -1, bool largest = true,
          SourceLoc loc = SourceLoc::current());

// Running sums along dim: out[i] = x[0] + ... + x[i]. exclusive leaves x[i] itself out
// (out[0] = 0), reverse sums from the end (out[i] = x[i] + ... + x[n-1]). Integers keep
// their dtype (and wrap like C++ on overflow); bool is a DTypeError. Like ONNX CumSum.
Tensor cumsum(const Tensor& x, int64_t dim, bool exclusive = false, bool reverse = false,
              SourceLoc loc = SourceLoc::current());
// The same with the dim in a one-element integer tensor, read when it runs (a graph's input).
Tensor cumsum(const Tensor& x, const Tensor& dim, bool exclusive = false, bool reverse = false,
              SourceLoc loc = SourceLoc::current());

// The sum over the dims a 1-D integer tensor holds (at least one; negative ones count from
// the end), read when it runs: where a graph computes them (ONNX ReduceSum's axes input),
// its output dims are symbols a run binds.
Tensor sum_over(const Tensor& x, const Tensor& dims, bool keepdim = false, SourceLoc loc = SourceLoc::current());

// Sums x down to `shape` (the reverse of broadcasting): the gradient of a broadcast.
Tensor sum_to_size(const Tensor& x, const Shape& shape, SourceLoc loc = SourceLoc::current());
// The same down to like's shape. Where the two shapes hold symbols a graph cannot compare
// (a value-sized op's sizes against static ones), the dims to sum are chosen when it runs.
Tensor sum_to_size(const Tensor& x, const Tensor& like, SourceLoc loc = SourceLoc::current());

}  // namespace baton
