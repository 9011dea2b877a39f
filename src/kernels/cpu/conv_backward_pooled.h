// The input, weight and bias gradients of a convolution whose output a max pooling with
// disjoint windows read, taken from the pooling's output gradient: conv2d_backward_pooled,
// which src/passes/fuse_pool_gradient.cpp makes from the pooling's backward and the two
// gradient steps that read its result. Where a plan's two backward convolutions both
// chose baton's Winograd (the input gradient in its transposed form), one pass over the
// output's tiles computes both from the pooled gradient (conv_winograd.h), and the
// convolution's output gradient (4x the pooled size, three quarters zeros) is never
// stored. Otherwise that gradient is made in the step's scratch and the two planned
// convolutions run on it, as the steps did apart.
#pragma once
#include <memory>

#include "baton/tensor.h"
#include "kernels/cpu/conv.h"
#include "kernels/cpu/pool.h"

namespace baton::kernels {

// The channel blocks (nChw8c: 8) a plan stores the operands in; 0: as their strides say.
struct ConvBackwardPooledBlocks {
  int64_t gy = 0, offsets = 0, maxima = 0, x = 0, gx = 0;
};

// A plan step's backward convolutions, both prepared for an output gradient stored as the
// plan stores activations (channels-last, or its channel blocks where they fill whole
// blocks), and whether the one Winograd pass runs.
struct ConvBackwardPooledPlan {
  ConvBackwardPooledBlocks blocks;
  int64_t dy_block = 0;  // the output gradient's, when made
  std::shared_ptr<const ConvBackwardPlan> input, weight;
  int64_t winograd_block = 0;  // > 0: the one pass, in blocks of these bytes
  size_t convs_scratch = 0;    // the convolutions' own scratch; the output gradient lies past it
  int threads = 0;             // the intra-op threads it was prepared for
};

// x and gx: metadata in the plan's layouts. `prepared` gets what runs and the scratch.
std::shared_ptr<const ConvBackwardPooledPlan> prepare_conv_backward_pooled_f32(const ConvGeom& g, const PoolGeom& p,
                                                                              const Tensor& x, const Tensor& gx,
                                                                              const ConvBackwardPooledBlocks& blocks,
                                                                              PreparedKernel& prepared);

// gx ([n, c, h, w]), gw ([o, c, kh, kw]) and gb ([o]) of convolution g (groups 1), whose
// output the pooling p (PoolGeom::disjoint) read. gy: the pooling's output gradient;
// offsets (i32, gy's shape): each maximum's position in its window; maxima (gy's shape, or
// null): the pooling's values, where a gradient counts only if > 0 (the relu before the
// pooling). f32 (a plan's, or none) or f64; any strides, or the blocks a plan chose. Throws
// IndexError for an offset outside its window.
void conv_backward_pooled(const ConvGeom& g, const PoolGeom& p, const Tensor& gy, const Tensor& offsets,
                          const Tensor* maxima, const Tensor& w, const Tensor& x, const Tensor& gx, const Tensor& gw,
                          const Tensor& gb, const ConvBackwardPooledPlan* plan = nullptr);

}  // namespace baton::kernels
