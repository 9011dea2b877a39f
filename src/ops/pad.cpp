// pad: constant padding, pads ordered as in PyTorch (last dim first, low then high).
#include "baton/ops.h"
#include "kernels/cpu/copy.h"
#include "ops/common.h"
#include "ops/sym_dims.h"

namespace baton::ops {
namespace {

// Low pad of every dim (0 for dims the list does not reach), checked.
std::vector<int64_t> low_pads(const CallContext& c, const Shape& shape, std::vector<int64_t>* high) {
  const auto& pads = c.attrs.ints("pads");
  const size_t rank = shape.size();
  if (pads.size() % 2 != 0 || pads.size() > 2 * rank)
    c.fail<ValueError>("pads must hold a (low, high) pair for at most ", rank, " dims, got ",
                       Shape(pads));
  std::vector<int64_t> lo(rank, 0), hi(rank, 0);
  for (size_t k = 0; k < pads.size() / 2; ++k) {
    size_t d = rank - 1 - k;
    lo[d] = pads[2 * k];
    hi[d] = pads[2 * k + 1];
    if (lo[d] < 0 || hi[d] < 0)
      c.fail<ValueError>("negative padding ", Shape(pads), " is not supported; use slice()");
  }
  if (high) *high = hi;
  return lo;
}

// The part of a padded tensor that holds the input.
Tensor interior(const Tensor& padded, const Shape& input_shape, const std::vector<int64_t>& lo) {
  int64_t offset = padded.offset();
  for (size_t d = 0; d < lo.size(); ++d) offset += lo[d] * padded.strides()[d];
  return make_view(padded, input_shape, padded.strides(), offset);
}

// The kernel's parameters: every dim's low pad and the padding value.
struct PadParams {
  std::vector<int64_t> low;
  double value;
};
PadParams pad_params(const CallContext& c) { return {low_pads(c, c.input(0).shape(), nullptr), c.attrs.f("value")}; }

}  // namespace

BATON_OP(pad_op, "pad")
    .inputs(1)
    .ints_attr("pads")
    .float_attr("value")
    .fusion(Fusion::Injective)
    .infer([](const InferContext& c) {
      std::vector<int64_t> hi;
      std::vector<int64_t> lo = low_pads(c, c.input(0).shape(), &hi);
      Shape out = c.input(0).shape();
      for (size_t d = 0; d < out.size(); ++d) {
        if (lo[d] == 0 && hi[d] == 0) continue;  // an unpadded dim may be symbolic
        require_static_dim(c, out, d, "a padded dim",
                           "a symbolic size plus padding is no size a symbol can express");
        out[d] = sym::add(out[d], sym::add(lo[d], hi[d]));  // checked: pads may come from graph text
      }
      return TensorMeta{c.input(0).dtype(), out};
    })
    .params(pad_params)
    .cpu([](const KernelContext& c) {
      const PadParams& p = c.params<PadParams>();
      const Tensor& out = c.output();
      kernels::copy_into(out, scalar_tensor(p.value, out.dtype()));
      const Tensor& x = c.input(0);
      if (x.numel() > 0) kernels::copy_into(interior(out, x.shape(), p.low), x);
    })
    .grad([](const GradContext& c) {
      const Shape& shape = c.input(0).shape();
      std::vector<int64_t> lo = low_pads(c, shape, nullptr);
      Tensor g = c.grad_output();
      for (size_t d = 0; d < lo.size(); ++d)
        if (g.shape()[d] != shape[d]) g = slice(g, int64_t(d), lo[d], lo[d] + shape[d], 1, c.loc);
      return Grads{g};
    })
    .onnx("Pad");

}  // namespace baton::ops

namespace baton {

Tensor pad(const Tensor& x, const std::vector<int64_t>& pads, double value, SourceLoc loc) {
  return ops::call(ops::pad_op, {x}, {{"pads", pads}, {"value", value}}, loc);
}

}  // namespace baton
