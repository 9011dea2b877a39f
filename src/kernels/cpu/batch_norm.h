// Batch normalization on oneDNN (batch_norm_onednn.cpp); the loops are in ops/batch_norm.cpp.
#pragma once
#include "baton/tensor.h"

namespace baton::kernels {

// f32 on oneDNN ; false where the loops below are faster or oneDNN
// has no optimized kernel.
bool batch_norm_forward_onednn(const Tensor& x, const Tensor& w, const Tensor& b, double eps,
                               bool training, const Tensor& y, const Tensor& mean, const Tensor& var);
bool batch_norm_backward_onednn(const Tensor& g, const Tensor& x, const Tensor& w,
                                const Tensor& mean, const Tensor& var, double eps, const Tensor& gx,
                                const Tensor& gw, const Tensor& gb);

}  // namespace baton::kernels
