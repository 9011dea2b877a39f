// Losses. reduction: "mean" (default), "sum" or "none".
#pragma once
#include <string>

#include "baton/tensor.h"

namespace baton {

// logits [N, C], target [N] of class indices (i64; i32 is widened). One fused op: a target
// outside [0, C) is an IndexError naming the op, the value and the caller's file:line.
Tensor cross_entropy(const Tensor& logits, const Tensor& target, const std::string& reduction = "mean",
                     SourceLoc loc = SourceLoc::current());
// log_probs [N, C], target [N] of class indices (i64): -log_probs[i, target[i]].
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const std::string& reduction = "mean",
                SourceLoc loc = SourceLoc::current());
// input and target of one shape (no broadcasting).
Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean",
                SourceLoc loc = SourceLoc::current());

}  // namespace baton
