// Batch normalization on oneDNN (batch_norm_onednn.cpp); the loops are in ops/batch_norm.cpp.
#pragma once
#include <memory>
#include <string>

#include "baton/tensor.h"
#include "kernels/cpu/prepared.h"

namespace baton::kernels {

// A batch norm's oneDNN primitive and reorders, made once for a plan step from x's
// metadata; nullptr where the loops run (see batch_norm_onednn.cpp). `prepared` gets
// oneDNN's name for it.
struct BatchNormPlan;
std::shared_ptr<const BatchNormPlan> prepare_batch_norm_f32(const Tensor& x, double eps, bool training,
                                                            bool backward, PreparedKernel& prepared);

// f32 on oneDNN; false where the loops are faster or oneDNN has no optimized kernel. With a
// plan made for x's shape, no primitive is looked up.
bool batch_norm_forward_onednn(const Tensor& x, const Tensor& w, const Tensor& b, double eps,
                               bool training, const Tensor& y, const Tensor& mean, const Tensor& var,
                               const BatchNormPlan* plan = nullptr);
bool batch_norm_backward_onednn(const Tensor& g, const Tensor& x, const Tensor& w,
                                const Tensor& mean, const Tensor& var, double eps, const Tensor& gx,
                                const Tensor& gw, const Tensor& gb, const BatchNormPlan* plan = nullptr);

}  // namespace baton::kernels
