// Neural-network ops. Images are NCHW.
#pragma once
#include <array>

#include "baton/tensor.h"

namespace baton {

// y = x @ weight^T + bias; weight is [out_features, in_features], bias optional.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
              SourceLoc loc = SourceLoc::current());

struct Conv2dOptions {
  std::array<int64_t, 2> stride{1, 1};
  std::array<int64_t, 2> padding{0, 0};
  std::array<int64_t, 2> dilation{1, 1};
  int64_t groups = 1;
};
// weight: [out_channels, in_channels / groups, kh, kw]; bias optional.
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
              const Conv2dOptions& options = {}, SourceLoc loc = SourceLoc::current());

struct Pool2dOptions {
  std::array<int64_t, 2> kernel{2, 2};
  std::array<int64_t, 2> stride{0, 0};  // {0, 0}: the kernel size
  std::array<int64_t, 2> padding{0, 0};
};
Tensor max_pool2d(const Tensor& x, const Pool2dOptions& options, SourceLoc loc = SourceLoc::current());
Tensor avg_pool2d(const Tensor& x, const Pool2dOptions& options, SourceLoc loc = SourceLoc::current());
Tensor adaptive_avg_pool2d(const Tensor& x, std::array<int64_t, 2> output_size,
                           SourceLoc loc = SourceLoc::current());

// In training mode normalizes with the batch statistics and updates running_mean/var in
// place (momentum as in PyTorch); in inference mode uses the running statistics.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum = 0.1,
                  double eps = 1e-5, SourceLoc loc = SourceLoc::current());
// Normalizes over the last normalized_shape.size() dims.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5, SourceLoc loc = SourceLoc::current());
// Zeroes elements with probability p and scales the rest by 1/(1-p) when training.
Tensor dropout(const Tensor& x, double p, bool training, SourceLoc loc = SourceLoc::current());
// Rows of weight picked by integer indices: out.shape = indices.shape + [dim].
Tensor embedding(const Tensor& weight, const Tensor& indices, SourceLoc loc = SourceLoc::current());

}  // namespace baton
