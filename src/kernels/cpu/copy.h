// Strided copy with dtype conversion and broadcasting: dst[...] = src[...].
#pragma once
#include "baton/tensor.h"

namespace baton::kernels {

// dst may be any view (sliced, transposed); src broadcasts to dst's shape.
void copy_into(const Tensor& dst, const Tensor& src);

// Whether t's elements fill numel() consecutive slots, its dims in some order (contiguous
// or channels-last; not a slice or an expand).
bool is_dense(const Tensor& t);
// Rank 4 and stored channels-last (NHWC), and not also plain (one channel, or 1x1 images).
bool is_channels_last(const Tensor& t);
// Whether t reads one value wherever it is read: one element, or every dim of more than
// one broadcast (stride 0: an expanded scalar, as a sum's or mean's gradient is).
bool holds_one_value(const Tensor& t);

// t itself when contiguous, else a contiguous copy. Kernels use it: no op is dispatched,
// so nothing is recorded or profiled.
Tensor dense(const Tensor& t);

// What kernels use in place of the ops of the same meaning (zeros, Tensor::to, permute,
// reshape): no op is dispatched, and the kernels layer needs nothing from the ops above.
Tensor zeros(const Shape& shape, DType dtype);         // a new contiguous tensor
Tensor zeros_laid_out_as(const Tensor& meta);           // a new one with meta's strides
Tensor converted(const Tensor& t, DType dtype);         // a new contiguous tensor
Tensor permuted(const Tensor& t, const Shape& order);   // a view: dim i is t's dim order[i]
Tensor reshaped(const Tensor& t, const Shape& shape);   // a view of a contiguous t

}  // namespace baton::kernels
