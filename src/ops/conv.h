// 2-D convolution geometry from an op call (the kernels are in kernels/cpu/conv.h).
#pragma once
#include "dispatch/registry.h"
#include "kernels/cpu/conv.h"

namespace baton::ops {

using kernels::ConvGeom;

// Validates input/weight shapes and options (attrs stride, padding, dilation, groups)
// and derives the output size; throws ShapeError/ValueError naming the op.
ConvGeom conv_geom(const CallContext& c, const Shape& input, const Shape& weight);

}  // namespace baton::ops
