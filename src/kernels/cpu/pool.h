// Pooling loops over NCHW planes (f32 and f64): memory-bound, so direct loops over each
// plane, planes split over threads. f32 max/avg forward and avg backward go to oneDNN
// first; the max backward stays the index scatter for both types.
#pragma once
#include <cstdint>

#include "baton/tensor.h"

namespace baton::kernels {

struct PoolGeom {
  int64_t n, c, h, w;
  int64_t kh, kw, sh, sw, ph, pw;
  int64_t oh, ow;
  int64_t planes() const { return n * c; }
};

// y = max over each window; idx = the flat (h * w) position of the first maximum.
void max_pool_forward(const PoolGeom& g, const Tensor& x, const Tensor& y, const Tensor& idx);
// gx[idx] += gy (gx zeroed first).
void max_pool_backward(const PoolGeom& g, const Tensor& gy, const Tensor& idx, const Tensor& gx);
// y = max over each window, without the indices (inference).
void max_pool_values(const PoolGeom& g, const Tensor& x, const Tensor& y);
// Average over each window, padding counted in the divisor (PyTorch's default).
void avg_pool_forward(const PoolGeom& g, const Tensor& x, const Tensor& y);
void avg_pool_backward(const PoolGeom& g, const Tensor& gy, const Tensor& gx);
// Adaptive windows: rows [floor(i*h/oh), ceil((i+1)*h/oh)), columns alike.
void adaptive_avg_forward(const PoolGeom& g, const Tensor& x, const Tensor& y);
void adaptive_avg_backward(const PoolGeom& g, const Tensor& gy, const Tensor& gx);

// f32 on oneDNN (pool_onednn.cpp), the same results as the loops; false when oneDNN has no
// optimized kernel for the geometry (the caller then runs the loops).
bool max_pool_forward_onednn(const PoolGeom& g, const Tensor& x, const Tensor& y, const Tensor& idx);
bool max_pool_values_onednn(const PoolGeom& g, const Tensor& x, const Tensor& y);
bool avg_pool_forward_onednn(const PoolGeom& g, const Tensor& x, const Tensor& y);
bool avg_pool_backward_onednn(const PoolGeom& g, const Tensor& gy, const Tensor& gx);

}  // namespace baton::kernels
