// linear: y = x @ weight^T + bias, x of any rank >= 1 (leading dims are batch).
#include "baton/ops.h"
#include "ops/common.h"
#include "kernels/cpu/matmul.h"

namespace baton::ops {
namespace {

TensorMeta linear_infer(const InferContext& c) {
  require_same_dtype(c);
  require_float(c);
  const Tensor &x = c.input(0), &w = c.input(1);
  if (x.dim() < 1) c.fail("input must have at least one dimension");
  if (w.dim() != 2) c.fail("weight must be [out_features, in_features]");
  // A symbolic feature count is trusted to match (as in matmul); checked again at run time.
  if (x.size(-1) != w.size(1) && x.size(-1) >= 0 && w.size(1) >= 0)
    c.fail("input has ", x.size(-1), " features but weight expects ", w.size(1));
  if (c.inputs.size() == 3 && !(c.input(2).dim() == 1 && c.input(2).size(0) == w.size(0)))
    c.fail("bias must be [", sym::to_string(w.size(0)), "]");
  Shape out = x.shape();
  out.back() = w.size(0);
  return {x.dtype(), out};
}

// x seen as a matrix [rows, in] (a view when x's layout allows).
Tensor as_rows(const Tensor& x) { return reshape(x, {-1, x.size(-1)}); }

void linear_kernel(const KernelContext& c) {
  const Tensor& w = c.input(1);
  Tensor x2 = c.input(0).dim() == 2 ? c.input(0) : c.input(0).detach().reshape({-1, w.size(1)});
  Tensor out2 = make_view(c.output(), {x2.size(0), w.size(0)}, {w.size(0), 1}, c.output().offset());
  Tensor wt = make_view(w, {w.size(1), w.size(0)}, {w.strides()[1], w.strides()[0]}, w.offset());
  kernels::matmul_kernel(x2, wt, c.inputs.size() == 3 ? &c.input(2) : nullptr, out2);
}

}  // namespace

BATON_OP(linear_op, "linear")
    .inputs(2, 3)
    .infer(linear_infer)
    .cpu(linear_kernel)
    .grad([](const GradContext& c) {
      const Tensor &x = c.input(0), &w = c.input(1), &g = c.grad_output();
      Grads grads(c.inputs.size());
      if (c.needs_grad(0)) grads[0] = matmul(g, w);
      if (c.needs_grad(1)) grads[1] = matmul(transpose(as_rows(g), 0, 1), as_rows(x));
      if (c.inputs.size() == 3 && c.needs_grad(2)) grads[2] = sum(as_rows(g), {0});
      return grads;
    })
    .cost([](const CallContext& c, std::span<const TensorMeta> out) {
      double n = double(out[0].shape.numel()), k = double(c.input(1).size(1));
      return Cost{2 * n * k, double(dtype_size(out[0].dtype)) *
                                 double(c.input(0).numel() + c.input(1).numel() + n)};
    })
    .onnx("Gemm");

}  // namespace baton::ops

namespace baton {

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias, SourceLoc loc) {
  if (bias.defined()) return ops::call(ops::linear_op, {x, weight, bias}, {}, loc);
  return ops::call(ops::linear_op, {x, weight}, {}, loc);
}

}  // namespace baton
