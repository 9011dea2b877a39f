// A convolution (with its relu) and the max pooling that alone reads its output, in one
// pass: each pooled output's window of convolution outputs is summed in registers and
// reduced at once, so the convolution's output (4x the pooled size for 2x2 windows) is
// never written nor read back. src/passes/fuse_conv_pool.cpp makes such steps: for a
// network's first layers, whose few input channels leave oneDNN's kernels memory-bound,
// the vector path below; for more channels, baton's Winograd pooling in its output
// transform (ConvPoolPlan).
#pragma once
#include <memory>

#include "baton/tensor.h"
#include "kernels/cpu/conv.h"
#include "kernels/cpu/pool.h"

namespace baton::kernels {

// Input channels up to which a plan runs the vector path below (its work per output grows
// with them, the traffic it saves does not); convolutions of more go by ConvPoolPlan.
constexpr int64_t kConvPoolDirectChannels = 4;

// The channel blocks (nChw8c: 8) a plan stores the outputs in; 0: as their strides say.
struct ConvPoolBlocks {
  int64_t maxima = 0, offsets = 0;
};

// maxima[n, o, py, px] = the maximum of act(conv(x, w) + b) over pooling window (py, px)
// of the convolution's output, offsets (i32; null for none) = its first position
// ky * kw + kx in the window: what max_pool2d_window returns for that output (a NaN wins,
// ties keep the first). A u8 `offsets` gets window codes instead (pool.h's window_code:
// the position and whether the maximum is > 0). Convolution g (groups 1) and pooling p (p's input is g's output, no padding).
// Taps over the padding are skipped, not multiplied by zero. f32 or f64, x of any strides,
// outputs of any strides or in the blocks a plan chose. f32 3x3 convolutions of stride
// and dilation 1 under 2x2 windows of stride 2, 8k output channels, run a vector path
// (conv_max_pool_vector_lanes).
void conv_max_pool_forward(const ConvGeom& g, const PoolGeom& p, bool relu, const Tensor& x, const Tensor& w,
                           const Tensor& b, const Tensor& maxima, const Tensor* offsets,
                           const ConvPoolBlocks& blocks = {});
// The lanes of conv_max_pool_forward's vector path for these operands (maxima and offsets
// as metadata will do): 16 output channels a lane group on AVX-512 machines for one input
// channel (the first layer) and outputs whose groups of 16 channels lie side by side, 8
// for the rest of the path, 0 where the loops run.
int conv_max_pool_vector_lanes(const ConvGeom& g, const PoolGeom& p, DType dtype, const Tensor& maxima,
                               const Tensor* offsets, const ConvPoolBlocks& blocks = {});

// Convolutions of more input channels in a plan (f32, baton's Winograd's geometry, 2x2
// windows of stride 2): the convolution's own plan, made for its result in the outputs'
// layout, which times baton's Winograd against oneDNN. Where Winograd runs, it pools in its
// output transform; else the result goes to the step's lent scratch (past the
// convolution's own) and the pooling loops run on it.
struct ConvPoolPlan {
  ConvPoolBlocks blocks;
  std::shared_ptr<const ConvForwardPlan> conv;  // null: the vector path or the loops
  size_t conv_scratch = 0;                      // conv's own scratchpad bytes
};
bool conv_max_pool_by_plan_fits(const ConvGeom& g, const PoolGeom& p, DType dtype);
// x: metadata in the plan's layout (x_block: its channel block); `prepared` gets what runs
// and the scratch (the convolution's, and room for its result).
std::shared_ptr<const ConvPoolPlan> prepare_conv_max_pool_f32(const ConvGeom& g, const PoolGeom& p, bool relu,
                                                              const Tensor& x, int64_t x_block, ConvPoolBlocks blocks,
                                                              const Tensor* constant_weights, PreparedKernel& prepared);
// conv_max_pool_forward by such a plan.
void conv_max_pool_by_plan(const ConvGeom& g, const PoolGeom& p, bool relu, const Tensor& x, const Tensor& w,
                           const Tensor& b, const Tensor& maxima, const Tensor* offsets, const ConvPoolPlan& plan);

}  // namespace baton::kernels
