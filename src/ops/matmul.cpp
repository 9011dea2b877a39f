// matmul with numpy semantics: 1-D operands promoted, batch dims broadcast.
#include "baton/ops.h"
#include "ops/common.h"
#include "kernels/cpu/matmul.h"

namespace baton::ops {
namespace {

// The operands as the user passed them (before 1-D promotion) must agree on K.
void check_operands(const CallContext& c) {
  const Tensor &a = c.input(0), &b = c.input(1);
  if (a.dim() == 0 || b.dim() == 0) c.fail("operands must have at least one dimension");
  const int64_t ka = a.size(-1), kb = b.dim() == 1 ? b.size(0) : b.size(-2);
  // A symbolic K is trusted to match (no output size derives from it); the rule checks
  // the real sizes when the graph runs.
  if (ka != kb && ka >= 0 && kb >= 0) c.fail("inner dimensions differ: ", ka, " vs ", kb);
}

Shape batch_of(const Shape& s) { return Shape(std::span<const int64_t>(s.data(), s.size() - 2)); }

TensorMeta matmul_infer(const InferContext& c) {
  require_same_dtype(c);
  require_float(c);
  const Tensor &a = c.input(0), &b = c.input(1);
  if (a.dim() < 2 || b.dim() < 2) c.fail("the op takes matrices; matmul() promotes vectors");
  check_operands(c);
  Shape out = broadcast_shapes(batch_of(a.shape()), batch_of(b.shape()), c);
  out.push_back(a.size(-2));
  out.push_back(b.size(-1));
  return {a.dtype(), out};
}

Tensor mT(const Tensor& t) { return transpose(t, -1, -2); }

}  // namespace

BATON_OP(matmul_op, "matmul")
    .inputs(2)
    .infer(matmul_infer)
    .cpu([](const KernelContext& c) {
      kernels::matmul_kernel(c.input(0), c.input(1), nullptr, c.output(),
                             static_cast<const kernels::MatmulPlan*>(c.prepared));
    })
    .prepared_by([](const CallContext& c, std::span<const Tensor> outputs) {
      Prepared p;
      if (outputs[0].dtype() == f32)
        p.state = kernels::prepare_matmul_f32(c.input(0), c.input(1), false, outputs[0], p);
      return p;
    })
    .column_major({0, 1}, [](const CallContext& c, std::span<const Tensor> outputs) {
      return kernels::column_major_result_is_faster(c.input(0), c.input(1), false, outputs[0].shape());
    })
    .grad([](const GradContext& c) {
      const Tensor &a = c.input(0), &b = c.input(1), &g = c.grad_output();
      return Grads{c.needs_grad(0) ? sum_to_size(matmul(g, mT(b)), a) : Tensor{},
                   c.needs_grad(1) ? sum_to_size(matmul(mT(a), g), b) : Tensor{}};
    })
    .cost([](const CallContext& c, std::span<const TensorMeta> out) {
      double n = double(out[0].shape.numel()), k = double(c.input(0).size(-1));
      return Cost{2 * n * k, double(dtype_size(out[0].dtype)) *
                                 double(c.input(0).numel() + c.input(1).numel() + n)};
    })
    .onnx("MatMul");

}  // namespace baton::ops

namespace baton {

Tensor matmul(const Tensor& a_in, const Tensor& b_in, SourceLoc loc) {
  auto [a, b] = ops::promote(a_in, b_in, loc);
  ops::Attrs none;
  Tensor both[2] = {a, b};
  ops::check_operands(ops::CallContext{ops::matmul_op, both, none, loc});
  const bool vec_a = a.dim() == 1, vec_b = b.dim() == 1;
  Tensor out = ops::call(ops::matmul_op, {vec_a ? unsqueeze(a, 0, loc) : a,
                                          vec_b ? unsqueeze(b, 1, loc) : b}, none, loc);
  if (vec_b) out = squeeze(out, -1, loc);
  if (vec_a) out = squeeze(out, vec_b ? -1 : -2, loc);
  return out;
}

}  // namespace baton
