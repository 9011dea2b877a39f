// The weight gradient of convolutions with few input channels (a network's first layer,
// 1-3 channels) as a sum over the batch of small GEMMs:
//   gw[o, (c,ky,kx)] += gy_n[o, p] * cols_n[p, (c,ky,kx)]     (cols_n = im2col of x_n)
// oneDNN's blocked kernels pad the channels to a block of 8 there (5x slower than this on
// an AVX2 machine), while its nhwc kernels on AVX-512 ran 3x faster than this:
// conv_backward_onednn.cpp times both once per shape and runs the faster.
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <vector>

#include "kernels/cpu/loops.h"
#include "kernels/cpu/onednn.h"
#include "kernels/cpu/conv.h"

namespace baton::kernels {
namespace {

// cols[p * K + k] for one image: the input value under tap k of output position p.
void im2col(const ConvGeom& g, const float* x, float* cols) {
  const int64_t taps = g.kh * g.kw, K = g.c * taps;
  for (int64_t oy = 0; oy < g.oh; ++oy)
    for (int64_t ox = 0; ox < g.ow; ++ox) {
      float* row = cols + (oy * g.ow + ox) * K;
      for (int64_t ci = 0; ci < g.c; ++ci)
        for (int64_t ky = 0; ky < g.kh; ++ky) {
          const int64_t iy = oy * g.sh - g.ph + ky * g.dh;
          for (int64_t kx = 0; kx < g.kw; ++kx) {
            const int64_t ix = ox * g.sw - g.pw + kx * g.dw;
            const bool inside = iy >= 0 && iy < g.h && ix >= 0 && ix < g.w;
            row[ci * taps + ky * g.kw + kx] = inside ? x[(ci * g.h + iy) * g.w + ix] : 0.0f;
          }
        }
    }
}

}  // namespace

bool conv_weight_grad_by_gemm(const ConvGeom& g) { return g.groups == 1 && g.c <= 3; }

void conv_backward_weight_gemm_f32(const ConvGeom& g, const Tensor& gy_in, const Tensor& x_in,
                                   const Tensor& gw) {
  Tensor gy = kernels::onednn::dense(gy_in), x = kernels::onednn::dense(x_in);
  const int64_t P = g.oh * g.ow, K = g.c * g.kh * g.kw, O = g.o;
  const float* pgy = gy.data<float>();
  const float* px = x.data<float>();
  const int threads = std::max<int64_t>(1, std::min<int64_t>(g.n, kernels::max_threads()));
  // One accumulator per thread (images split between threads), summed at the end.
  std::vector<float> partial(size_t(threads * O * K), 0.0f);
  kernels::parallel_range(threads, [&](int64_t b, int64_t e) {
    std::vector<float> cols(size_t(P * K));
    for (int64_t t = b; t < e; ++t)
      for (int64_t n = g.n * t / threads; n < g.n * (t + 1) / threads; ++n) {
        im2col(g, px + n * g.c * g.h * g.w, cols.data());
        dnnl_sgemm('N', 'N', O, K, P, 1.0f, pgy + n * O * P, P, cols.data(), K, 1.0f,
                   partial.data() + t * O * K, K);
      }
  }, 1);
  float* out = gw.data<float>();
  for (int64_t i = 0; i < O * K; ++i) {
    float s = 0;
    for (int t = 0; t < threads; ++t) s += partial[size_t(t * O * K + i)];
    out[i] = s;
  }
}

}  // namespace baton::kernels
