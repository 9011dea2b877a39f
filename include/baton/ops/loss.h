// Losses. reduction: "mean" (default), "sum" or "none".
#pragma once
#include <string>

#include "baton/tensor.h"

namespace baton {

// logits [N, C], target [N] of class indices (i64).
Tensor cross_entropy(const Tensor& logits, const Tensor& target, const std::string& reduction = "mean",
                     SourceLoc loc = SourceLoc::current());
// log_probs [N, C], target [N] of class indices (i64).
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const std::string& reduction = "mean",
                SourceLoc loc = SourceLoc::current());
Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean",
                SourceLoc loc = SourceLoc::current());

}  // namespace baton
