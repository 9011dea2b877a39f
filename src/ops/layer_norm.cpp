// layer_norm: normalizes over the last `axes` dims. The op returns (y, mean, rstd) as
// ONNX LayerNormalization does, mean and rstd shaped like x with the normalized dims 1;
// the affine weight and bias are applied by the public function with mul and add.
// layer_norm_backward is its input gradient through y in one pass per row.
#include <cmath>

#include "baton/ops.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/loops.h"
#include "kernels/cpu/reduce.h"
#include "ops/common.h"
#include "ops/sym_dims.h"

namespace baton::ops {
namespace {

// Rows of `n` contiguous elements, and the dims they span.
struct Layout {
  int64_t rows = 1, n = 1;
  Dims dims;
  Shape stat_shape;
};

Layout layout_of(const CallContext& c, const Shape& shape) {
  const int64_t axes = c.attrs.i("axes");
  const int64_t rank = int64_t(shape.size());
  if (axes < 1 || axes > rank) c.fail("cannot normalize over the last ", axes, " dims of rank ", rank);
  Layout l;
  l.stat_shape = shape;
  for (int64_t d = 0; d < rank; ++d) {
    if (d < rank - axes) {
      l.rows = dim_mul(l.rows, shape[size_t(d)]);  // symbolic for a symbolic batch
    } else {
      l.n = dim_mul(l.n, shape[size_t(d)]);
      l.dims.push_back(d);
      l.stat_shape[size_t(d)] = 1;
    }
  }
  return l;
}

// The kernel's parameters: the rows and epsilon.
struct LayerNormParams {
  Layout layout;
  double eps;
};
LayerNormParams layer_norm_params(const CallContext& c) {
  return {layout_of(c, c.input(0).shape()), c.attrs.f("eps")};
}

// Sum of (x - m)^2 over n contiguous values in double, in sum_terms's 8 accumulators (a
// single one waits on each addition: the loop cannot vectorize).
template <class T>
double sum_squared_deviations(const T* x, int64_t n, double m) {
  return kernels::sum_terms<double>(n, [&](int64_t i) { return (double(x[i]) - m) * (double(x[i]) - m); });
}

// Two passes in double per row: the mean first, then the variance of x - mean, which
// stays accurate when |mean| is large against the spread (one-pass E[x^2] - E[x]^2 does not).
template <class T>
void normalize_rows(const T* x, T* y, T* mean, T* rstd, const Layout& l, double eps) {
  kernels::parallel_range(l.rows, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const T* xr = x + r * l.n;
      T* yr = y + r * l.n;
      double m = kernels::sum_row<double>(xr, l.n) / double(l.n);
      double inv = 1.0 / std::sqrt(sum_squared_deviations(xr, l.n, m) / double(l.n) + eps);
      for (int64_t i = 0; i < l.n; ++i) yr[i] = T((double(xr[i]) - m) * inv);
      mean[r] = T(m);
      rstd[r] = T(inv);
    }
  }, kernels::grain_for(l.n));
}

// dx = rstd * (g - mean(g) - y * mean(g * y)) per row (y: the normalized output), the two
// sums in double (sum_terms; the row is in cache for the second).
template <class T>
void backward_rows(const T* g, const T* y, const T* rstd, T* dx, const Layout& l) {
  kernels::parallel_range(l.rows, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const T *gr = g + r * l.n, *yr = y + r * l.n;
      const double mean_g = kernels::sum_row<double>(gr, l.n) / double(l.n);
      const double mean_gy =
          kernels::sum_terms<double>(l.n, [&](int64_t i) { return double(gr[i]) * double(yr[i]); }) / double(l.n);
      const double inv = double(rstd[r]);
      T* out = dx + r * l.n;
      for (int64_t j = 0; j < l.n; ++j) out[j] = T(inv * (double(gr[j]) - mean_g - double(yr[j]) * mean_gy));
    }
  }, kernels::grain_for(l.n));
}

Tensor layer_norm_backward(const Tensor& g, const Tensor& y, const Tensor& rstd, int64_t axes, SourceLoc loc);

}  // namespace

BATON_OP(layer_norm_op, "layer_norm")
    .inputs(1)
    .int_attr("axes")
    .float_attr("eps")
    .outputs(3)
    .fusion(Fusion::Opaque)
    .infer([](const InferContext& c) {
      require_float(c);
      Layout l = layout_of(c, c.input(0).shape());
      DType t = c.input(0).dtype();
      return std::vector<TensorMeta>{{t, c.input(0).shape()}, {t, l.stat_shape}, {t, l.stat_shape}};
    })
    .params(layer_norm_params)
    .cpu([](const KernelContext& c) {
      Tensor x = kernels::dense(c.input(0));
      const LayerNormParams& p = c.params<LayerNormParams>();
      kernels::visit_float(x.dtype(), "layer_norm", [&](auto tag) {
        using T = typename decltype(tag)::type;
        normalize_rows<T>(x.data<T>(), c.output(0).data<T>(), c.output(1).data<T>(),
                          c.output(2).data<T>(), p.layout, p.eps);
      });
    })
    .grad([](const GradContext& c) {
      // With xhat = y = (x - mean) * rstd over N elements per row:
      //   dx = rstd * (gy - mean(gy) - xhat * mean(gy * xhat))
      //      + gmean / N - grstd * rstd^2 * xhat / N
      Layout l = layout_of(c, c.input(0).shape());
      const Tensor &xhat = c.output(0), &rstd = c.output(2);
      const SizeCount n = size_count(c.input(0), l.dims, xhat.dtype(), c.loc);
      Tensor dx;
      if (const Tensor& gy = c.grad_output(0); gy.defined())
        dx = layer_norm_backward(gy, xhat, rstd, c.attrs.i("axes"), c.loc);
      auto accumulate = [&](const Tensor& t) { dx = dx.defined() ? dx + t : t; };
      if (const Tensor& gm = c.grad_output(1); gm.defined())
        accumulate(n.apply([&](auto k) { return expand(gm / k, c.input(0).shape()); }));
      if (const Tensor& gr = c.grad_output(2); gr.defined())
        accumulate(n.apply([&](auto k) { return gr * rstd * rstd * xhat * (-1.0 / k); }));
      return Grads{dx};
    })
    .onnx("LayerNormalization");

// Inputs: g (the gradient of y), y (the normalized output) and rstd; the result is
// rstd * (g - mean(g) - y * mean(g * y)) over the last `axes` dims. It is linear in g and
// symmetric, so its gradient for g is itself; for y and rstd, with h the incoming gradient:
//   d/dy = -rstd * (h * mean(g * y) + g * mean(h * y)),
//   d/drstd = sum(h * (g - mean(g) - y * mean(g * y))) over the row.
BATON_OP(layer_norm_backward_op, "layer_norm_backward")
    .inputs(3)
    .int_attr("axes")
    .fusion(Fusion::Opaque)
    .infer([](const InferContext& c) {
      require_float(c);
      require_same_dtype(c);
      const Layout l = layout_of(c, c.input(0).shape());
      if (!(c.input(1).shape() == c.input(0).shape()) || !(c.input(2).shape() == l.stat_shape))
        c.fail("expects the gradient and the output of one shape and rstd of the statistics' shape, got ",
               c.input(0).shape(), ", ", c.input(1).shape(), ", ", c.input(2).shape());
      return same_as_input(c);
    })
    .params([](const CallContext& c) { return layout_of(c, c.input(0).shape()); })
    .cpu([](const KernelContext& c) {
      Tensor g = kernels::dense(c.input(0)), y = kernels::dense(c.input(1)), rstd = kernels::dense(c.input(2));
      kernels::visit_float(g.dtype(), "layer_norm_backward", [&](auto tag) {
        using T = typename decltype(tag)::type;
        backward_rows<T>(g.data<T>(), y.data<T>(), rstd.data<T>(), c.output().data<T>(), c.params<Layout>());
      });
    })
    .grad([](const GradContext& c) {
      const Tensor &g = c.input(0), &y = c.input(1), &rstd = c.input(2), &h = c.grad_output();
      const Dims dims = layout_of(c, g.shape()).dims;
      const Tensor mean_gy = mean(g * y, dims, true);
      return Grads{layer_norm_backward(h, y, rstd, c.attrs.i("axes"), c.loc),
                   -(rstd * (h * mean_gy + g * mean(h * y, dims, true))),
                   sum(h * (g - mean(g, dims, true) - y * mean_gy), dims, true)};
    })
    .cost([](const CallContext& c, std::span<const TensorMeta>) {
      const double n = double(c.input(0).numel());
      return Cost{6 * n, 3 * n * double(dtype_size(c.input(0).dtype()))};
    })
    .onnx("");  // exported as its formula (export_math.cpp)

namespace {

Tensor layer_norm_backward(const Tensor& g, const Tensor& y, const Tensor& rstd, int64_t axes, SourceLoc loc) {
  return call(layer_norm_backward_op, {g, y, rstd}, {{"axes", axes}}, loc);
}

}  // namespace

}  // namespace baton::ops

namespace baton {

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps, SourceLoc loc) {
  const int64_t axes = int64_t(normalized_shape.size());
  bool matches = axes >= 1 && axes <= x.dim();
  for (int64_t k = 0; matches && k < axes; ++k)
    matches = x.shape()[size_t(x.dim() - axes + k)] == normalized_shape[size_t(k)];
  if (!matches)
    throw ShapeError("layer_norm", str("normalized_shape ", normalized_shape,
                                       " must equal the last dims of the input ", x.shape()), loc);
  for (const Tensor* p : {&weight, &bias})
    if (p->defined() && !(p->shape() == normalized_shape))
      throw ShapeError("layer_norm", str(p == &weight ? "weight" : "bias", " has shape ",
                                         p->shape(), ", expected ", normalized_shape), loc);
  if (eps < 0) throw ValueError("layer_norm", str("eps must be >= 0, got ", eps), loc);
  Tensor input = is_floating(x.dtype()) ? x : cast(x, f32, loc);
  Tensor y = ops::call_many(ops::layer_norm_op, {&input, 1}, {{"axes", axes}, {"eps", eps}}, loc)[0];
  if (weight.defined()) y = mul(y, weight, loc);
  if (bias.defined()) y = add(y, bias, loc);
  return y;
}

}  // namespace baton
