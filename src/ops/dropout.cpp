// dropout: in training, zeroes each element with probability p and scales the rest by
// 1/(1-p). The op returns (y, mask) with mask = 0 or 1/(1-p) in x's dtype, so the
// gradient is g * mask, with the very mask the forward pass drew.
#include "baton/ops.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/loops.h"
#include "ops/common.h"

namespace baton::ops {

BATON_OP(dropout_op, "dropout")
    .inputs(1)
    .float_attr("p")
    .outputs(2)
    .fusion(Fusion::Opaque)
    .random()
    .infer([](const InferContext& c) {
      require_float(c);
      TensorMeta m = same_as_input(c);
      return std::vector<TensorMeta>{m, m};
    })
    .params([](const CallContext& c) { return c.attrs.f("p"); })
    .cpu([](const KernelContext& c) {
      const double p = c.params<double>(), scale = 1.0 / (1.0 - p);
      // Drawn in f64 from the global generator whatever x's dtype, so manual_seed fixes
      // the same mask for f32 and f64 inputs.
      Tensor u = empty(c.input(0).shape(), f64);
      fill_uniform(u);
      kernels::visit_float(c.input(0).dtype(), "dropout", [&](auto tag) {
        using T = typename decltype(tag)::type;
        kernels::map_elements<T, double>(c.output(1), [=](double v) { return T(v >= p ? scale : 0.0); }, u);
        kernels::map_elements<T, T, T>(c.output(0), [](T x, T m) { return x * m; }, c.input(0),
                                       c.output(1));
      });
    })
    // The mask is piecewise constant in x: no gradient flows through it.
    .grad([](const GradContext& c) {
      const Tensor& g = c.grad_output(0);
      return Grads{g.defined() ? g * c.output(1) : Tensor{}};
    })
    .onnx("Dropout");

}  // namespace baton::ops

namespace baton {

Tensor dropout(const Tensor& x, double p, bool training, SourceLoc loc) {
  if (!(p >= 0 && p < 1))
    throw ValueError("dropout", str("p must be in [0, 1), got ", p), loc);
  if (!training || p == 0) return x;
  Tensor input = is_floating(x.dtype()) ? x : cast(x, f32, loc);
  return ops::call_many(ops::dropout_op, {&input, 1}, {{"p", p}}, loc)[0];
}

}  // namespace baton
