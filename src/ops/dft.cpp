// dft: the discrete Fourier transform along one dim (ONNX DFT). x is [..., n, ..., c] with
// c = 1 (real numbers) or 2 (real, imaginary). Each line along `dim` is cut or zero-padded
// to `length` L, loaded into complex doubles and transformed by an FftPlan
// (kernels/cpu/fft.h: mixed-radix Cooley-Tukey, Bluestein for lengths with a large prime
// factor; O(L log L) for every L); f32 is computed in double and rounded once. Three forms:
//   full      X[k] = sum_t x[t] e^{-+2 pi i k t / L} (the inverse with 1/L), k < L;
//   onesided  the forward transform's bins k <= L/2 (a real signal's spectrum is
//             conjugate-symmetric, so they say everything);
//   inverse + onesided (IRFFT): x holds such a half spectrum; its conjugate-symmetric
//             extension is transformed back and the real signal [..., L, ..., 1] returned.
// The transform is linear, so the gradient is its adjoint, written with dft itself: the
// opposite transform (times L, or 1/L) of the output gradient, cut back to n; for IRFFT,
// the forward half spectrum of the gradient weighted by the number of times each bin
// appears in the extension, over L.
//
//   %1 = dft(%x) {dim=1, length=16, inverse=0, onesided=0}
#include <algorithm>
#include <cmath>
#include <new>
#include <vector>

#include "baton/ops.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/fft.h"
#include "kernels/cpu/loops.h"
#include "ops/common.h"

namespace baton::ops {
namespace {

using kernels::Complex;

constexpr int64_t kMaxLength = int64_t(1) << 28;

struct DftSpec {
  int64_t dim = 0, length = 0;
  bool inverse = false, onesided = false;
  bool real_output() const { return inverse && onesided; }
  // Size of the output along dim.
  int64_t bins() const { return onesided && !inverse ? length / 2 + 1 : length; }
};

DftSpec spec_of(const CallContext& c) {
  const Tensor& x = c.input(0);
  if (x.dim() < 2) c.fail("expects [..., n, ..., 1 or 2] (a real or complex number in the last dim), got rank ", x.dim());
  const int64_t channels = x.shape().back();
  if (channels != 1 && channels != 2)
    c.fail("the last dim must hold a real (size 1) or complex (size 2) number, not size ", sym::to_string(channels));
  DftSpec s;
  s.dim = normalize_dim(c.attrs.i("dim"), x.dim(), c);
  if (s.dim == x.dim() - 1) c.fail<IndexError>("dim ", c.attrs.i("dim"), " is the dim of complex parts; transform another");
  s.length = c.attrs.i("length");
  if (s.length < 1 || s.length > kMaxLength)
    c.fail<ValueError>("length ", sym::to_string(s.length), " is out of range [1, ", kMaxLength, "]");
  s.inverse = c.attrs.i("inverse") != 0;
  s.onesided = c.attrs.i("onesided") != 0;
  return s;
}

TensorMeta infer(const InferContext& c) {
  require_float(c);
  const DftSpec s = spec_of(c);
  Shape out = c.input(0).shape();
  out[size_t(s.dim)] = s.bins();
  out.back() = s.real_output() ? 1 : 2;
  return {c.input(0).dtype(), out};
}

// x and the output as [outer, n, inner, channels] around dim.
struct Lines {
  int64_t outer = 1, inner = 1, n_in = 0, c_in = 0, n_out = 0, c_out = 0;
};

Lines lines_of(const Shape& in, const Shape& out, int64_t dim) {
  Lines l;
  for (int64_t d = 0; d < dim; ++d) l.outer *= in[size_t(d)];
  for (size_t d = size_t(dim) + 1; d + 1 < in.size(); ++d) l.inner *= in[d];
  l.n_in = in[size_t(dim)], l.c_in = in.back(), l.n_out = out[size_t(dim)], l.c_out = out.back();
  return l;
}

// Line (o, i) of x as complex numbers: the first min(n, L) values, zeros after. For IRFFT
// the half spectrum is extended by X[L - k] = conj(X[k]).
template <class T>
void load(const T* x, const Lines& l, int64_t o, int64_t i, const DftSpec& s, Complex* line) {
  std::fill(line, line + s.length, Complex(0));
  const int64_t count = std::min(l.n_in, s.real_output() ? s.length / 2 + 1 : s.length);
  for (int64_t t = 0; t < count; ++t) {
    const T* v = x + ((o * l.n_in + t) * l.inner + i) * l.c_in;
    line[t] = Complex(double(v[0]), l.c_in == 2 ? double(v[1]) : 0.0);
  }
  if (s.real_output())
    for (int64_t k = 1; k < (s.length + 1) / 2; ++k) line[s.length - k] = std::conj(line[k]);
}

template <class T>
void store(const Complex* line, const Lines& l, int64_t o, int64_t i, double scale, T* out) {
  for (int64_t k = 0; k < l.n_out; ++k) {
    T* v = out + ((o * l.n_out + k) * l.inner + i) * l.c_out;
    v[0] = T(line[k].real() * scale);
    if (l.c_out == 2) v[1] = T(line[k].imag() * scale);
  }
}

template <class T>
void transform_lines(const T* x, T* out, const Lines& l, const DftSpec& s, const kernels::FftPlan& plan) {
  const double scale = s.inverse ? 1.0 / double(s.length) : 1.0;
  const double work = double(s.length) * std::max(1.0, std::log2(double(s.length))) * 4;
  kernels::parallel_range(
      l.outer * l.inner,
      [&](int64_t b, int64_t e) {
        std::vector<Complex> line(size_t(s.length)), scratch(size_t(plan.scratch_size()));
        for (int64_t li = b; li < e; ++li) {
          const int64_t o = li / l.inner, i = li % l.inner;
          load(x, l, o, i, s, line.data());
          plan.run(line.data(), scratch.data());
          store(line.data(), l, o, i, scale, out);
        }
      },
      std::max<int64_t>(1, int64_t(double(kernels::kParallelGrain) / work)));
}

void kernel(const KernelContext& c) {
  const DftSpec& s = c.params<DftSpec>();
  const Tensor x = kernels::dense(c.input(0));
  const Tensor& out = c.output();
  if (out.numel() == 0) return;
  const Lines l = lines_of(x.shape(), out.shape(), s.dim);
  try {
    const kernels::FftPlan plan(s.length, s.inverse ? +1 : -1);
    kernels::visit_float(x.dtype(), c.op_name().c_str(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      transform_lines<T>(x.data<T>(), out.data<T>(), l, s, plan);
    });
  } catch (const std::bad_alloc&) {
    c.fail<ValueError>("out of memory for a transform of length ", s.length);
  }
}

// t cut or zero-padded along dim to n values.
Tensor fit_along(const Tensor& t, int64_t dim, int64_t n, SourceLoc loc) {
  const int64_t have = t.shape()[size_t(dim)];
  if (n <= have) return n == have ? t : slice(t, dim, 0, n, 1, loc);
  std::vector<int64_t> pads(size_t(2 * (t.dim() - dim)), 0);
  pads.back() = n - have;
  return pad(t, pads, 0, loc);
}

// IRFFT's adjoint weights: bin k of the half spectrum appears twice in the extension
// (k and L - k) unless k = 0 or k = L/2; shaped to broadcast along dim of `like`.
Tensor hermitian_weights(const Tensor& like, int64_t dim, int64_t length, SourceLoc loc) {
  const int64_t bins = length / 2 + 1;
  std::vector<double> w(size_t(bins), 2.0 / double(length));
  w[0] = 1.0 / double(length);
  if (length % 2 == 0) w.back() = 1.0 / double(length);
  Shape shape(size_t(like.dim()), 1);
  shape[size_t(dim)] = bins;
  return cast(tensor(w, shape, loc), like.dtype(), loc);
}

Grads gradient(const GradContext& c) {
  const DftSpec s = spec_of(c);
  const Tensor& x = c.input(0);
  const Tensor& g = c.grad_output();
  const int64_t n = x.shape()[size_t(s.dim)];
  if (sym::is_symbol(n)) c.fail("the gradient needs a static size along dim ", s.dim);
  Tensor back;
  if (s.real_output())
    back = dft(g, s.dim, s.length, false, true, c.loc) * hermitian_weights(g, s.dim, s.length, c.loc);
  else if (s.inverse)
    back = dft(g, s.dim, s.length, false, false, c.loc) * (1.0 / double(s.length));
  else
    back = dft(g, s.dim, s.length, true, false, c.loc) * double(s.length);
  back = fit_along(back, s.dim, n, c.loc);
  if (x.shape().back() == 1) back = slice(back, -1, 0, 1, 1, c.loc);
  return {back};
}

}  // namespace

BATON_OP(dft_op, "dft")
    .inputs(1)
    .int_attr("dim")
    .int_attr("length")
    .int_attr("inverse")
    .int_attr("onesided")
    .infer(infer)
    .params(spec_of)
    .cpu(kernel)
    .grad(gradient)
    .cost([](const CallContext& c, std::span<const TensorMeta> out) {
      // About 5 L log2 L flops per line of L outputs.
      const double length = double(std::max<int64_t>(c.attrs.i("length"), 2));
      const double values = double(out[0].shape.numel());
      const double bytes = (double(c.input(0).numel()) + values) * double(dtype_size(out[0].dtype));
      return Cost{5 * values * std::log2(length), bytes};
    })
    .onnx("DFT");

}  // namespace baton::ops

namespace baton {

Tensor dft(const Tensor& x, int64_t dim, int64_t length, bool inverse, bool onesided, SourceLoc loc) {
  if (length == -1 && dim >= -x.dim() && dim < x.dim()) {
    const int64_t n = x.shape()[size_t(dim < 0 ? dim + x.dim() : dim)];
    if (sym::is_symbol(n))
      throw ShapeError("dft", str("the size along dim ", dim, " of ", x.dtype(), x.shape(),
                                  " is symbolic; give the transform length"), loc);
    length = inverse && onesided ? 2 * (n - 1) : n;
  }
  return ops::call(ops::dft_op, {x},
                   {{"dim", dim}, {"length", length}, {"inverse", int64_t(inverse)}, {"onesided", int64_t(onesided)}},
                   loc);
}

}  // namespace baton
