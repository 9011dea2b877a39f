// Fused in-place parameter updates: one pass over memory per parameter. They write their
// tensor arguments in place (no autograd), like TensorFlow's Apply* ops on variables.
//
// Everything that changes from one step to the next is a tensor the kernel reads (and,
// for the step counter, writes) when it runs: the learning rate `lr` (0-d f64) and the
// parameter's step counter `step` (0-d i64, incremented by the update, like PyTorch's
// state['step']). So a training step traced once by compile() and replayed sees the
// current learning rate and step. Only the fixed hyperparameters below are attributes.
#pragma once
#include "baton/tensor.h"

namespace baton {

struct SgdHyper {
  double momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false;
};
// PyTorch's SGD: d = g + wd*p; buf = momentum*buf + (1-dampening)*d (buf = d when `step` is
// 0 before the update); d = nesterov ? d + momentum*buf : buf; p -= lr*d; ++step.
// momentum_buffer may be undefined when momentum == 0.
void sgd_update_(Tensor& param, const Tensor& grad, const Tensor& lr, Tensor& step,
                 Tensor& momentum_buffer, const SgdHyper& h, SourceLoc loc = SourceLoc::current());

struct AdamHyper {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  bool decoupled_weight_decay = false;  // AdamW
};
// Adam / AdamW: increments `step`, then updates with bias correction at the new step
// (1-based), as PyTorch does.
void adam_update_(Tensor& param, const Tensor& grad, const Tensor& lr, Tensor& step, Tensor& exp_avg,
                  Tensor& exp_avg_sq, const AdamHyper& h, SourceLoc loc = SourceLoc::current());

}  // namespace baton
