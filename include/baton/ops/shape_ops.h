// Shape ops. reshape/view/transpose/permute/squeeze/unsqueeze/expand/slice return views
// (no copy) where the layout allows; the rest copy.
#pragma once
#include <optional>
#include <vector>

#include "baton/tensor.h"

namespace baton {

// A -1 in shape is inferred from the element count. reshape copies when a view is
// impossible; view throws instead.
Tensor reshape(const Tensor& x, const Shape& shape, SourceLoc loc = SourceLoc::current());
Tensor view(const Tensor& x, const Shape& shape, SourceLoc loc = SourceLoc::current());
Tensor transpose(const Tensor& x, int64_t d0, int64_t d1, SourceLoc loc = SourceLoc::current());
Tensor permute(const Tensor& x, const Shape& dims, SourceLoc loc = SourceLoc::current());
Tensor squeeze(const Tensor& x, int64_t dim, SourceLoc loc = SourceLoc::current());
Tensor unsqueeze(const Tensor& x, int64_t dim, SourceLoc loc = SourceLoc::current());
// The same at the dims a 1-D integer tensor holds, read when they run (ONNX's Unsqueeze and
// Squeeze with computed axes): in a graph the output dims are symbols a run binds. The
// output is a copy; squeeze_at fails unless each dim it removes is 1.
Tensor unsqueeze_at(const Tensor& x, const Tensor& dims, SourceLoc loc = SourceLoc::current());
Tensor squeeze_at(const Tensor& x, const Tensor& dims, SourceLoc loc = SourceLoc::current());
// Broadcasts size-1 dims to `shape` (-1 keeps a dim) without copying.
Tensor expand(const Tensor& x, const Shape& shape, SourceLoc loc = SourceLoc::current());
// reshape and expand to the sizes a 1-D integer tensor holds, read when the op runs (a shape
// computed in a graph, TensorFlow's reshape(x, shape_tensor)). The output is a copy. In a
// graph its dims are fresh symbols (`reshape_to_1`), bound when a run has read the values.
// reshape_to infers one -1; with copy_zeros a 0 keeps x's size at that position (ONNX's
// Reshape). expand_to broadcasts both ways, as numpy does: a 1 keeps x's size (ONNX's Expand).
Tensor reshape_to(const Tensor& x, const Tensor& shape, bool copy_zeros = false,
                  SourceLoc loc = SourceLoc::current());
Tensor expand_to(const Tensor& x, const Tensor& shape, SourceLoc loc = SourceLoc::current());
// start, start + delta, ... short of limit, with the three in 0-d tensors of one dtype read
// when the op runs (ONNX's Range): max(ceil((limit - start) / delta), 0) values, a fresh
// symbol (`range_of_1`) in a graph.
Tensor range_of(const Tensor& start, const Tensor& limit, const Tensor& delta, SourceLoc loc = SourceLoc::current());
Tensor flatten(const Tensor& x, int64_t start = 0, int64_t end = -1,
               SourceLoc loc = SourceLoc::current());
// Elements [start, end) with step along dim (negative start/end count from the end).
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1,
             SourceLoc loc = SourceLoc::current());
Tensor contiguous(const Tensor& x, SourceLoc loc = SourceLoc::current());
Tensor cast(const Tensor& x, DType dtype, SourceLoc loc = SourceLoc::current());

Tensor cat(const std::vector<Tensor>& xs, int64_t dim = 0, SourceLoc loc = SourceLoc::current());
Tensor stack(const std::vector<Tensor>& xs, int64_t dim = 0, SourceLoc loc = SourceLoc::current());
// Pieces of split_size along dim (the last may be smaller).
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0,
                          SourceLoc loc = SourceLoc::current());
// Constant padding; pads = {last_lo, last_hi, second_last_lo, second_last_hi, ...} as in PyTorch.
Tensor pad(const Tensor& x, const std::vector<int64_t>& pads, double value = 0,
           SourceLoc loc = SourceLoc::current());
// out[i][j] = x[i][index[i][j]] (dim = 1), and so on for any rank.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index, SourceLoc loc = SourceLoc::current());
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index,
                    SourceLoc loc = SourceLoc::current());
// The coordinates of x's nonzero elements (NaN counts), row-major: int64 [count, rank]
// (PyTorch's nonzero; ONNX's NonZero is its transpose). The count depends on the values:
// in a graph it is a fresh symbol (`nonzero_1`), bound when a run has computed it.
Tensor nonzero(const Tensor& x, SourceLoc loc = SourceLoc::current());
// The distinct slices of x along `dim` (without one: the distinct elements of the
// flattened x), ascending (lexicographically for slices) or, unsorted, in order of first
// appearance; NaN is an error. Their count is a fresh symbol in a graph, as nonzero's.
struct UniqueResult {
  Tensor values;         // x with `dim` (or the flattened x) cut to the distinct slices
  Tensor first_indices;  // i64 [count]: where each first occurs
  Tensor inverse;        // i64 [x.size(dim)]: each slice's position in `values`
  Tensor counts;         // i64 [count]: how often each occurs
};
UniqueResult unique(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool sorted = true,
                    SourceLoc loc = SourceLoc::current());
// A copy of base with src added at the indexed places (the gradients of gather and
// index_select); repeated indices accumulate. scatter_add: index and src share a shape,
// base[..index[i][j]..] += src[i][j]. index_add: index is 1-D, base[index[j]] += src[j] along dim.
Tensor scatter_add(const Tensor& base, int64_t dim, const Tensor& index, const Tensor& src,
                   SourceLoc loc = SourceLoc::current());
Tensor index_add(const Tensor& base, int64_t dim, const Tensor& index, const Tensor& src,
                 SourceLoc loc = SourceLoc::current());

// Ops that read only x's shape, at run time: in a graph with symbolic sizes they see the
// sizes of each run. Neither is differentiable.
// A 0-d tensor of dtype holding the product of x's sizes over dims (all when empty).
Tensor element_count(const Tensor& x, std::vector<int64_t> dims, DType dtype,
                     SourceLoc loc = SourceLoc::current());
// A tensor of x's shape with every element value (zeros_like/ones_like of a symbolic tensor).
Tensor full_like(const Tensor& x, Scalar value, DType dtype, SourceLoc loc = SourceLoc::current());

// Reverses the first lengths[b] elements along time_dim of each slice b along batch_dim
// (ONNX ReverseSequence); the rest stay. lengths: i64 [x.size(batch_dim)], each in
// [0, x.size(time_dim)].
Tensor reverse_sequence(const Tensor& x, const Tensor& lengths, int64_t batch_dim, int64_t time_dim,
                        SourceLoc loc = SourceLoc::current());

}  // namespace baton
