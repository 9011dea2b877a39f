// A convolution (with its relu) and the max pooling that alone reads its output, in one
// pass: each pooled output's window of convolution outputs is summed in registers and
// reduced at once, so the convolution's output (4x the pooled size for 2x2 windows) is
// never written nor read back. src/passes/fuse_conv_pool.cpp makes such steps for a
// network's first layers, whose few input channels leave oneDNN's kernels memory-bound.
#pragma once
#include "baton/tensor.h"
#include "kernels/cpu/conv.h"
#include "kernels/cpu/pool.h"

namespace baton::kernels {

// The channel blocks (nChw8c: 8) a plan stores the outputs in; 0: as their strides say.
struct ConvPoolBlocks {
  int64_t maxima = 0, offsets = 0;
};

// maxima[n, o, py, px] = the maximum of act(conv(x, w) + b) over pooling window (py, px)
// of the convolution's output, offsets (i32; null for none) = its first position
// ky * kw + kx in the window: what max_pool2d_window returns for that output (a NaN wins,
// ties keep the first). Convolution g (groups 1) and pooling p (p's input is g's output, no padding).
// Taps over the padding are skipped, not multiplied by zero. f32 or f64, x of any strides,
// outputs of any strides or in the blocks a plan chose. f32 3x3 convolutions of stride
// and dilation 1 under 2x2 windows of stride 2, 8k output channels, run a vector path
// (conv_max_pool_vectors_fit).
void conv_max_pool_forward(const ConvGeom& g, const PoolGeom& p, bool relu, const Tensor& x, const Tensor& w,
                           const Tensor& b, const Tensor& maxima, const Tensor* offsets,
                           const ConvPoolBlocks& blocks = {});
bool conv_max_pool_vectors_fit(const ConvGeom& g, const PoolGeom& p, DType dtype);

}  // namespace baton::kernels
