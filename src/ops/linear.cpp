// linear: y = x @ weight^T + bias, x of any rank >= 1 (leading dims are batch).
#include "baton/ops.h"
#include "ops/common.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/matmul.h"
#include "ops/epilogue.h"

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
  if (c.inputs.size() >= 3 && !(c.input(2).dim() == 1 && c.input(2).size(0) == w.size(0)))
    c.fail("bias must be [", sym::to_string(w.size(0)), "]");
  Shape out = x.shape();
  out.back() = w.size(0);
  return {x.dtype(), out};
}

// x seen as a matrix [rows, in] (a view when x's layout allows).
Tensor as_rows(const Tensor& x) { return reshape(x, {-1, x.size(-1)}); }

// The product's operands: x as rows [n, in], weight transposed (a view), out as [n, out]
// (a matrix out as it is: a plan may store it column-major).
struct RowsProduct {
  Tensor x, wt, out;
  // `x_rows`: x seen as rows (a view, or a copy when its layout allows none).
  RowsProduct(const Tensor& x_rows, const Tensor& w, const Tensor& out_any)
      : x(x_rows),
        wt(make_view(w, {w.size(1), w.size(0)}, {w.strides()[1], w.strides()[0]}, w.offset())),
        out(out_any.dim() == 2 ? out_any
                               : make_view(out_any, {x_rows.size(0), w.size(0)}, {w.size(0), 1}, out_any.offset())) {}
};

// x [..., in] as rows [n, in] in a kernel: a view of x when dense, else of a dense copy (no
// op is called).
Tensor dense_rows(const Tensor& x) {
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < x.dim(); ++d) rows *= x.size(d);
  return kernels::reshaped(kernels::dense(x), {rows, x.size(-1)});
}

// accumulate: the output holds the residual, and the product and bias are added to it.
void linear_product(const KernelContext& c, bool accumulate) {
  const Tensor& w = c.input(1);
  Tensor x2 = c.input(0).dim() == 2 ? c.input(0) : dense_rows(c.input(0));
  RowsProduct p(x2, w, c.output());
  kernels::matmul_kernel(p.x, p.wt, c.inputs.size() >= 3 ? &c.input(2) : nullptr, p.out,
                         static_cast<const kernels::MatmulPlan*>(c.prepared), accumulate);
}

void linear_kernel(const KernelContext& c) { linear_product(c, false); }

// Whether linear_fused adds its residual in the product's pass: f32 (oneDNN's sum post-op
// adds it to the product and bias as the separate add does).
bool sums_residual_in_product(std::span<const Tensor> inputs, const Tensor& out) {
  return inputs.size() == 4 && out.dtype() == f32;
}

// linear_fused: the residual is added in the product's pass (f32: the output holds the
// residual first, its own buffer when the plan gave it that one, else a copy) or after it
// (f64, from a copy when the output took its buffer), and the activation runs over the
// stored result as its op computes it, while the result is in cache: bit for bit the
// separate ops' values (oneDNN's relu post-op would make NaN 0: finite.h).
void linear_fused_kernel(const KernelContext& c) {
  const Tensor& out = c.output();
  const Tensor* residual = c.inputs.size() == 4 ? &c.input(3) : nullptr;
  const bool in_place = residual && residual->raw_data() == out.raw_data();  // the plan's layout: same strides
  const bool accumulate = sums_residual_in_product(c.inputs, out);
  Tensor kept;  // the residual, where the product would write over it first
  if (accumulate && !in_place) kernels::copy_into(out, *residual);
  if (!accumulate && in_place) kept = kernels::converted(*residual, residual->dtype());
  linear_product(c, accumulate);
  const Tensor* add_after = accumulate ? nullptr : kept.defined() ? &kept : residual;
  kernels::add_then_activate(out, add_after, c.params<kernels::Activation>());
}

// The oneDNN primitive, made with the plan: from x's metadata when x is rows already or
// contiguous (a reshape then is the view made here); otherwise a run copies x and finds
// its primitive then.
Prepared prepare_linear(const CallContext& c, std::span<const Tensor> outputs) {
  const Tensor &x = c.input(0), &w = c.input(1);
  if (outputs[0].dtype() != f32 || !(x.dim() == 2 || x.is_contiguous())) return {};
  const int64_t rows = x.dim() == 2 ? x.size(0) : outputs[0].numel() / std::max<int64_t>(w.size(0), 1);
  Tensor x2 = x.dim() == 2 ? x : make_view(x, {rows, w.size(1)}, {w.size(1), 1}, x.offset());
  RowsProduct p(x2, w, outputs[0]);
  Prepared prepared;
  prepared.state = kernels::prepare_matmul_f32(p.x, p.wt, c.inputs.size() >= 3, p.out, prepared,
                                               sums_residual_in_product(c.inputs, outputs[0]));
  return prepared;
}

// Whether a plan should store the output column-major (kernels::column_major_result_is_faster).
// Not with a residual, which then could not share the output's buffer.
bool linear_prefers_column_major(const CallContext& c, std::span<const Tensor> outputs) {
  if (c.inputs.size() > 3 || c.input(0).dim() != 2) return false;
  const RowsProduct p(c.input(0), c.input(1), outputs[0]);
  return kernels::column_major_result_is_faster(p.x, p.wt, c.inputs.size() == 3, p.out.shape());
}

Cost linear_cost(const CallContext& c, std::span<const TensorMeta> out) {
  double n = double(out[0].shape.numel()), k = double(c.input(1).size(1));
  return Cost{2 * n * k, double(dtype_size(out[0].dtype)) * double(c.input(0).numel() + c.input(1).numel() + n)};
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
    .prepared_by(prepare_linear)
    .column_major({0, 1}, linear_prefers_column_major)
    .cost(linear_cost)
    .onnx("Gemm");

// act(linear(x, w, bias) + residual), as a plan runs it (src/passes/fuse_epilogue.cpp):
// inputs x, weight, bias (optional without a residual), residual (the output's shape); the
// activation as in conv2d_fused (ops/epilogue.h). No gradient rule: plans make it after
// differentiation.
BATON_OP(linear_fused_op, "linear_fused")
    .inputs(2, 4)
    .string_attr("activation")
    .float_attr("negative_slope", OpDef::optional)
    .float_attr("alpha", OpDef::optional)
    .float_attr("min", OpDef::optional)
    .float_attr("max", OpDef::optional)
    .infer([](const InferContext& c) {
      activation_of(c);  // validates the activation's name and parameters
      const TensorMeta out = linear_infer(c);
      if (c.inputs.size() == 4 && !(c.input(3).shape() == out.shape))
        c.fail("the residual must have the output's shape ", out.shape);
      return out;
    })
    .params(activation_of)
    .cpu(linear_fused_kernel)
    .prepared_by(prepare_linear)
    .column_major({0, 1, 3}, linear_prefers_column_major)
    .output_overwrites(3)  // the sum post-op accumulates into the residual's buffer
    .cost(linear_cost);

}  // namespace baton::ops

namespace baton {

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias, SourceLoc loc) {
  if (bias.defined()) return ops::call(ops::linear_op, {x, weight, bias}, {}, loc);
  return ops::call(ops::linear_op, {x, weight}, {}, loc);
}

}  // namespace baton
