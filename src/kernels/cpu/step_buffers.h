// Activations that a fused plan step makes for itself in the scratch its plan lends it
// (a convolution's result before its pooling, an output gradient before the convolution's
// backward), in the layouts the step's kernels were prepared for.
#pragma once
#include <cstddef>
#include <cstdint>

#include "baton/tensor.h"

namespace baton::kernels {

// An f32 activation of shape nchw as metadata (no storage), what a step's kernels are
// prepared for: in channel blocks of `block` (plain strides over blocked bytes, as a
// plan's buffers), or channels-last for 0.
Tensor activation_metadata(const Shape& nchw, int64_t block);
// The same over `bytes` (a step's lent scratch; null: allocated).
Tensor activation_over(const Shape& nchw, int64_t block, void* bytes);

// Bytes rounded up to whole cache lines: parts of one lent scratch.
inline size_t cache_aligned(size_t bytes) { return (bytes + 63) / 64 * 64; }

}  // namespace baton::kernels
