// Non-finite scans and a relu that keeps NaN, for fused kernels. oneDNN's relu post-op
// computes max(x, 0), which turns NaN into 0 where relu keeps it (PyTorch's rule and
// ours). A NaN can come only from a non-finite operand (sums that overflow aside), so a
// kernel with the post-op checks its operands and, when one is not finite, runs without
// it and applies relu_keeping_nan after.
#pragma once
#include "baton/tensor.h"

namespace baton::kernels {

// Whether some element of an f32 or f64 tensor (any strides) is NaN or infinite.
bool has_non_finite(const Tensor& t);
// out = relu(out) in place, NaN kept, for f32 or f64 tensors whose elements fill their
// buffer in some order (contiguous, channels-last, or a plan's channel-blocked ones).
void relu_keeping_nan(const Tensor& out);

}  // namespace baton::kernels
