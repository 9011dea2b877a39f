// Direct f64 convolution loops: simple and exact, for gradient checks (f32 uses oneDNN).
#include "kernels/cpu/loops.h"
#include "kernels/cpu/onednn.h"
#include "kernels/cpu/conv.h"

namespace baton::kernels {
namespace {

// Calls f(out_index, in_index, weight_index) for every tap of output channel `oc` of
// image `n` whose input position lies inside the (unpadded) input.
template <class F>
void for_each_tap(const ConvGeom& g, int64_t n, int64_t oc, F&& f) {
  const int64_t group = oc / g.og();
  for (int64_t y = 0; y < g.oh; ++y)
    for (int64_t x = 0; x < g.ow; ++x) {
      const int64_t out_i = ((n * g.o + oc) * g.oh + y) * g.ow + x;
      for (int64_t ci = 0; ci < g.cg(); ++ci) {
        const int64_t chan = group * g.cg() + ci;
        for (int64_t ky = 0; ky < g.kh; ++ky) {
          const int64_t iy = y * g.sh - g.ph + ky * g.dh;
          if (iy < 0 || iy >= g.h) continue;
          for (int64_t kx = 0; kx < g.kw; ++kx) {
            const int64_t ix = x * g.sw - g.pw + kx * g.dw;
            if (ix < 0 || ix >= g.w) continue;
            f(out_i, ((n * g.c + chan) * g.h + iy) * g.w + ix, ((oc * g.cg() + ci) * g.kh + ky) * g.kw + kx);
          }
        }
      }
    }
}

void fill_zero(double* p, int64_t n) { std::fill(p, p + n, 0.0); }

}  // namespace

void conv_forward_f64(const ConvGeom& g, const Tensor& x_in, const Tensor& w_in, const Tensor* bias,
                      const Tensor& out) {
  namespace dnn = onednn;
  Tensor x = dnn::dense(x_in), w = dnn::dense(w_in);
  const double *px = x.data<double>(), *pw = w.data<double>();
  double* po = out.data<double>();
  std::vector<double> b(size_t(g.o), 0.0);
  if (bias) b = dnn::dense(*bias).to_vector<double>();
  for (int64_t i = 0; i < out.numel(); ++i) po[i] = b[size_t((i / (g.oh * g.ow)) % g.o)];
  kernels::parallel_range(g.n * g.o, [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k)
      for_each_tap(g, k / g.o, k % g.o, [&](int64_t o, int64_t i, int64_t wi) { po[o] += px[i] * pw[wi]; });
  }, 1);
}

void conv_backward_input_f64(const ConvGeom& g, const Tensor& gy_in, const Tensor& w_in,
                             const Tensor& gx) {
  namespace dnn = onednn;
  Tensor gy = dnn::dense(gy_in), w = dnn::dense(w_in);
  const double *pg = gy.data<double>(), *pw = w.data<double>();
  double* pgx = gx.data<double>();
  fill_zero(pgx, gx.numel());
  kernels::parallel_range(g.n, [&](int64_t begin, int64_t end) {  // images write disjoint rows
    for (int64_t n = begin; n < end; ++n)
      for (int64_t oc = 0; oc < g.o; ++oc)
        for_each_tap(g, n, oc, [&](int64_t o, int64_t i, int64_t wi) { pgx[i] += pg[o] * pw[wi]; });
  }, 1);
}

void conv_backward_weight_f64(const ConvGeom& g, const Tensor& gy_in, const Tensor& x_in,
                              const Tensor& gw) {
  namespace dnn = onednn;
  Tensor gy = dnn::dense(gy_in), x = dnn::dense(x_in);
  const double *pg = gy.data<double>(), *px = x.data<double>();
  double* pgw = gw.data<double>();
  fill_zero(pgw, gw.numel());
  kernels::parallel_range(g.o, [&](int64_t begin, int64_t end) {  // channels write disjoint rows
    for (int64_t oc = begin; oc < end; ++oc)
      for (int64_t n = 0; n < g.n; ++n)
        for_each_tap(g, n, oc, [&](int64_t o, int64_t i, int64_t wi) { pgw[wi] += pg[o] * px[i]; });
  }, 1);
}

}  // namespace baton::kernels
