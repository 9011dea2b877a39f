// Fused in-place parameter updates: one pass over memory per parameter. They write their
// tensor arguments in place (no autograd), like TensorFlow's Apply* ops on variables.
#pragma once
#include "baton/tensor.h"

namespace baton {

struct SgdHyper {
  double lr = 0.01, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false;
};
// PyTorch's SGD: d = g + wd*p; buf = momentum*buf + (1-dampening)*d (buf = d on the first
// step); d = nesterov ? d + momentum*buf : buf; p -= lr*d. momentum_buffer may be
// undefined when momentum == 0.
void sgd_update_(Tensor& param, const Tensor& grad, Tensor& momentum_buffer, const SgdHyper& h,
                 bool first_step, SourceLoc loc = SourceLoc::current());

struct AdamHyper {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  bool decoupled_weight_decay = false;  // AdamW
};
// Adam / AdamW with bias correction at step `step` (1-based).
void adam_update_(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                  const AdamHyper& h, int64_t step, SourceLoc loc = SourceLoc::current());

}  // namespace baton
