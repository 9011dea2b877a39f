// Parameter initialisation, in place and without autograd history (global generator).
#pragma once
#include "baton/tensor.h"

namespace baton::nn::init {

void uniform_(Tensor& t, double low, double high);
void normal_(Tensor& t, double mean = 0, double std = 1);
void constant_(Tensor& t, double value);
// fan_in: size(1) * receptive field; fan_out: size(0) * receptive field.
int64_t fan_in(const Tensor& weight);
int64_t fan_out(const Tensor& weight);
// PyTorch's default for Linear and Conv: kaiming-uniform with a = sqrt(5), i.e.
// uniform in +-1/sqrt(fan_in).
void kaiming_uniform_default_(Tensor& weight);
// He initialisation for ReLU networks: normal with std sqrt(2 / fan), fan_out by default.
void kaiming_normal_(Tensor& weight, bool fan_out_mode = true);

}  // namespace baton::nn::init
