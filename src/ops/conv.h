// 2-D convolution geometry from an op call (the kernels are in kernels/cpu/conv.h).
#pragma once
#include "dispatch/registry.h"
#include "kernels/cpu/conv.h"
#include "kernels/cpu/pool.h"

namespace baton::ops {

using kernels::ConvGeom;

// Validates input/weight shapes and options (attrs stride, padding, dilation, groups)
// and derives the output size; throws ShapeError/ValueError naming the op.
ConvGeom conv_geom(const CallContext& c, const Shape& input, const Shape& weight);

// A convolution and the max pooling over its output, as the ops fused from both read them.
struct ConvPoolGeoms {
  ConvGeom conv;
  kernels::PoolGeom pool;
};

// The geometries of an op fused from a convolution (groups 1) of this input and weight
// shape and the max pooling over its output (attrs pool_kernel and pool_stride, no
// padding); `disjoint`: the pooling's windows must not overlap.
ConvPoolGeoms conv_pool_geoms(const CallContext& c, const Shape& input, const Shape& weight, bool disjoint);

// Window codes (kernels/cpu/pool.h) hold windows of at most 4 positions: fails otherwise.
void require_window_codes_fit(const CallContext& c, const kernels::PoolGeom& p);

// The geometries of a gradient step fused through the max pooling (inputs 0 and 1: the
// pooling's output gradient and window offsets, optional input `maxima`: its values),
// the pooled operands checked against them and the other operands' dtypes. With
// `window_codes`, input 1 may instead be u8 window codes (kernels/cpu/pool.h), which hold
// the maxima's signs too (no maxima input then).
ConvPoolGeoms pooled_gradient_geoms(const CallContext& c, const Shape& input, const Shape& weight, size_t maxima,
                                    bool window_codes = false);

}  // namespace baton::ops
