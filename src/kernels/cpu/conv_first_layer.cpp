// The weight gradient of convolutions with few input channels (a network's first layer,
// 1-3 channels) as a sum over the batch of small GEMMs:
//   gw[o, (c,ky,kx)] += gy_n[o, p] * cols_n[p, (c,ky,kx)]     (cols_n = im2col of x_n)
// (and the bias gradient as one more column of cols, all ones)
// oneDNN's blocked kernels pad the channels to a block of 8 there (5x slower than this on
// an AVX2 machine), while its nhwc kernels on AVX-512 ran 3x faster than this:
// conv_backward_onednn.cpp times both once per shape and runs the faster.
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <vector>

#include "kernels/cpu/loops.h"
#include "kernels/cpu/onednn.h"
#include "kernels/cpu/conv.h"
#include "kernels/cpu/vec8.h"

namespace baton::kernels {
namespace {

// cols[p * row_stride + k] for one image: the input value under tap k of output
// position p (k < c * kh * kw; the row's other columns are left as they are).
void im2col(const ConvGeom& g, const float* x, float* cols, int64_t row_stride) {
  const int64_t taps = g.kh * g.kw;
  for (int64_t oy = 0; oy < g.oh; ++oy)
    for (int64_t ox = 0; ox < g.ow; ++ox) {
      float* row = cols + (oy * g.ow + ox) * row_stride;
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

// out[j] (8 channels' lanes) = sum over p of gy[p, lanes] * cols[p, j], for `Taps` columns
// j: each gy vector is loaded once and feeds Taps independent sums held in registers.
template <int Taps>
void accumulate_taps(const float* gy, int64_t block, const float* cols, int64_t P, int64_t K, F32x8* out) {
  F32x8 acc[Taps] = {};
  for (int64_t p = 0; p < P; ++p) {
    const F32x8 g = load8<F32x8>(gy + p * block);
    const float* c = cols + p * K;
    for (int j = 0; j < Taps; ++j) acc[j] += c[j] * g;
  }
  for (int j = 0; j < Taps; ++j) out[j] = acc[j];
}
using TapsFn = void (*)(const float*, int64_t, const float*, int64_t, int64_t, F32x8*);
constexpr int kMaxTaps = 8;
constexpr TapsFn kAccumulateTaps[kMaxTaps + 1] = {nullptr,             accumulate_taps<1>, accumulate_taps<2>,
                                                  accumulate_taps<3>, accumulate_taps<4>, accumulate_taps<5>,
                                                  accumulate_taps<6>, accumulate_taps<7>, accumulate_taps<8>};

// sums[o, k] += sum over p of gy[o, p] * cols[p, k] for one image whose gy is
// channel-blocked: block b of `block` channels holds, per position p, its channels side by
// side, so 8 of them are one vector and each sum a vector FMA per position; the columns go
// in even groups of at most 8. (As 8-row GEMMs, one per block, it took longer: the GEMM's
// setup dominates such small products.)
void accumulate_blocked(const float* gy, const float* cols, int64_t P, int64_t K, int64_t O, int64_t block,
                        float* sums) {
  const int64_t groups = (K + kMaxTaps - 1) / kMaxTaps, per_group = (K + groups - 1) / groups;
  F32x8 out[kMaxTaps];
  for (int64_t o = 0; o < O; o += kVec8) {
    const float* g = gy + (o / block) * block * P + o % block;  // channel o's lane in its block
    for (int64_t k0 = 0; k0 < K; k0 += per_group) {
      const int64_t taps = std::min(per_group, K - k0);
      kAccumulateTaps[taps](g, block, cols + k0, P, K, out);
      for (int64_t j = 0; j < taps; ++j)
        for (int64_t lane = 0; lane < kVec8; ++lane) sums[(o + lane) * K + k0 + j] += out[j][lane];
    }
  }
}

}  // namespace

bool conv_weight_grad_by_gemm(const ConvGeom& g) { return g.groups == 1 && g.c <= 3; }

void conv_backward_weight_gemm_f32(const ConvGeom& g, const Tensor& gy_in, const Tensor& x_in, const Tensor& gw,
                                   int64_t gy_block, const Tensor* gb) {
  Tensor gy = gy_block ? gy_in : kernels::onednn::dense(gy_in), x = kernels::onednn::dense(x_in);
  // With the bias gradient, cols get a last column of ones: the GEMM then sums gy over
  // the positions in that column, in the same pass.
  const int64_t P = g.oh * g.ow, taps = g.c * g.kh * g.kw, K = taps + (gb ? 1 : 0), O = g.o;
  const float* pgy = gy.data<float>();
  const float* px = x.data<float>();
  const int threads = std::max<int64_t>(1, std::min<int64_t>(g.n, kernels::max_threads()));
  // One accumulator per thread (images split between threads), summed at the end.
  std::vector<float> partial(size_t(threads * O * K), 0.0f);
  kernels::parallel_range(threads, [&](int64_t b, int64_t e) {
    std::vector<float> cols(size_t(P * K), 1.0f);
    for (int64_t t = b; t < e; ++t)
      for (int64_t n = g.n * t / threads; n < g.n * (t + 1) / threads; ++n) {
        im2col(g, px + n * g.c * g.h * g.w, cols.data(), K);
        float* sums = partial.data() + t * O * K;
        if (!gy_block) {
          dnnl_sgemm('N', 'N', O, K, P, 1.0f, pgy + n * O * P, P, cols.data(), K, 1.0f, sums, K);
          continue;
        }
        accumulate_blocked(pgy + n * O * P, cols.data(), P, K, O, gy_block, sums);
      }
  }, 1);
  float* out = gw.data<float>();
  for (int64_t o = 0; o < O; ++o)
    for (int64_t k = 0; k < K; ++k) {
      float s = 0;
      for (int t = 0; t < threads; ++t) s += partial[size_t((t * O + o) * K + k)];
      if (k < taps) out[o * taps + k] = s;
      else gb->data<float>()[o] = s;
    }
}

}  // namespace baton::kernels
