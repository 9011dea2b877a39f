// The matrix-product kernel shared by matmul and linear.
#pragma once
#include "baton/tensor.h"

namespace baton::kernels {

// out[..., M, N] = a[..., M, K] @ b[..., K, N] (+ bias[N]). a and b have out's rank; their
// batch dims are out's or 1 (broadcast). Any strides. f32 runs on oneDNN, f64 on loops.
void matmul_kernel(const Tensor& a, const Tensor& b, const Tensor* bias, const Tensor& out);

// x with size-1 dims prepended up to `rank` (a view).
Tensor with_rank(const Tensor& x, size_t rank);

}  // namespace baton::kernels
