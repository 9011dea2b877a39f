// layer_norm: normalizes over the last `axes` dims. The op returns (y, mean, rstd) as
// ONNX LayerNormalization does, mean and rstd shaped like x with the normalized dims 1;
// the affine weight and bias are applied by the public function with mul and add.
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

// Sum of (x - m)^2 over n contiguous values in double, with sum_row's 8 accumulators (a
// single one waits on each addition: the loop cannot vectorize).
template <class T>
double sum_squared_deviations(const T* x, int64_t n, double m) {
  double acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) acc[k] += (double(x[i + k]) - m) * (double(x[i + k]) - m);
  double total = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) total += (double(x[i]) - m) * (double(x[i]) - m);
  return total;
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
        dx = rstd * (gy - mean(gy, l.dims, true) - xhat * mean(gy * xhat, l.dims, true));
      auto accumulate = [&](const Tensor& t) { dx = dx.defined() ? dx + t : t; };
      if (const Tensor& gm = c.grad_output(1); gm.defined())
        accumulate(n.apply([&](auto k) { return expand(gm / k, c.input(0).shape()); }));
      if (const Tensor& gr = c.grad_output(2); gr.defined())
        accumulate(n.apply([&](auto k) { return gr * rstd * rstd * xhat * (-1.0 / k); }));
      return Grads{dx};
    })
    .onnx("LayerNormalization");

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
