// Helpers shared by the reduction ops (sum, prod, max, min, logsumexp, argmax, softmax...).
// A reduction op carries the attributes "dims" (empty = all) and "keepdim".
#pragma once
#include <string_view>

#include "baton/ops.h"
#include "ops/common.h"

namespace baton::ops {

Attrs reduce_attrs(const std::vector<int64_t>& dims, bool keepdim);
// The call's "dims", normalised and sorted (IndexError naming the op on a bad dim); the
// reduction kernels' parameters (OpDef::params), read as c.params<Dims>().
std::vector<int64_t> reduce_dims(const CallContext& c);
// Output of dtype t with the reduced dims removed (or kept as 1 with "keepdim").
TensorMeta reduce_meta(const CallContext& c, DType t);
// Throws ValueError when some output would reduce zero elements (max of nothing): of
// input 0 over the op's dims, or of `shape` over `dims` (normalised).
void require_nonempty_reduction(const CallContext& c);
void require_nonempty_reduction(const CallContext& c, const Shape& shape, const std::vector<int64_t>& dims);
// t, shaped like the op's output, reshaped with keepdim and broadcast to input 0's shape
// (the gradient of a sum, or the output seen next to every input element).
Tensor expand_back(const Tensor& t, const CallContext& c);

// The gradients of softmax and log_softmax over dim, given the output gradient g and the
// op's output y, each in one pass (exposed for tests).
Tensor softmax_backward(const Tensor& g, const Tensor& y, int64_t dim, SourceLoc loc = SourceLoc::current());
Tensor log_softmax_backward(const Tensor& g, const Tensor& y, int64_t dim, SourceLoc loc = SourceLoc::current());

// Reads every input element once: flops and bytes of input 0.
Cost reduce_cost(const CallContext& c, std::span<const TensorMeta> out);

// For composite reductions (mean, var): checks dims as the op `name` and returns how many
// elements each output reduces (a 0-d tensor of dtype when a reduced size is symbolic).
SizeCount reduced_count(std::string_view name, const Tensor& x, const std::vector<int64_t>& dims,
                        DType dtype, SourceLoc loc);

}  // namespace baton::ops
