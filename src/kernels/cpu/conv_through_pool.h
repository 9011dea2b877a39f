// The weight and bias gradients of a convolution whose output a max pooling with disjoint
// windows read (through a relu or not), taken from the pooling's output gradient: the
// convolution's own output gradient, 4x the pooled size for 2x2 windows and three
// quarters zeros, is never written (src/passes/fuse_pool_gradient.cpp makes such steps
// where nothing else reads it).
#pragma once
#include "baton/tensor.h"
#include "kernels/cpu/conv.h"
#include "kernels/cpu/pool.h"

namespace baton::kernels {

// The channel blocks (nChw8c: 8) a plan stores the operands in; 0: as their strides say.
struct ThroughPoolBlocks {
  int64_t gy = 0, offsets = 0, maxima = 0, x = 0;
};

// gw ([o, c, kh, kw]) and gb ([o]) of convolution g (groups 1), whose output ([n, o, oh, ow],
// p's input) the pooling p (PoolGeom::disjoint) read. gy: the pooling's output gradient;
// offsets (i32, gy's shape): each maximum's position in its window, ky * kw + kx; maxima
// (gy's shape, or null): the pooling's values, where a gradient counts only if > 0 (the
// relu before the pooling). Or offsets u8: window codes (pool.h's window_code), which say
// both (maxima null). Any strides, or the channel blocks a plan keeps; f32 or f64.
// Throws IndexError for an offset outside its window.
void conv_backward_weight_through_pool(const ConvGeom& g, const PoolGeom& p, const Tensor& gy, const Tensor& offsets,
                                       const Tensor* maxima, const Tensor& x, const Tensor& gw, const Tensor& gb,
                                       const ThroughPoolBlocks& blocks = {});

}  // namespace baton::kernels
