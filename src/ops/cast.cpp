// cast: a contiguous copy, converting the dtype (kernels/cpu/convert.h says how). Also
// clone, contiguous and Tensor::to. The one op that reads and writes storage dtypes.
#include "baton/ops.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/loops.h"
#include "ops/common.h"

namespace baton::ops {

BATON_OP(cast_op, "cast")
    .inputs(1)
    .dtype_attr("dtype")
    .fusion(Fusion::Elementwise)
    .infer([](const InferContext& c) { return TensorMeta{c.attrs.dtype("dtype"), c.input(0).shape()}; })
    .storage_dtypes()
    .cpu([](const KernelContext& c) {
      const Tensor &x = c.input(0), &out = c.output();
      // Storage dtypes, and an input laid out unlike the output (contiguous() of a
      // transpose, which copy_into copies in tiles, not one strided element at a time).
      if (is_storage_only(x.dtype()) || is_storage_only(out.dtype()) || x.strides() != out.strides())
        return kernels::copy_into(out, x);
      kernels::visit_dtype(out.dtype(), [&](auto out_tag) {
        using O = typename decltype(out_tag)::type;
        kernels::visit_dtype(x.dtype(), [&](auto in_tag) {
          using I = typename decltype(in_tag)::type;
          kernels::map_elements<O, I>(out, [](I v) { return kernels::convert<O>(v); }, x);
        });
      });
    })
    .grad([](const GradContext& c) { return Grads{cast(c.grad_output(), c.input(0).dtype())}; })
    .onnx("Cast");

}  // namespace baton::ops

namespace baton {

Tensor cast(const Tensor& x, DType dtype, SourceLoc loc) {
  return ops::call(ops::cast_op, {x}, {{"dtype", dtype}}, loc);
}

Tensor contiguous(const Tensor& x, SourceLoc loc) {
  return x.is_contiguous() ? x : cast(x, x.dtype(), loc);
}

Tensor Tensor::contiguous(SourceLoc loc) const { return baton::contiguous(*this, loc); }
Tensor Tensor::clone(SourceLoc loc) const { return cast(*this, dtype(), loc); }
Tensor Tensor::to(DType t, SourceLoc loc) const { return t == dtype() ? *this : cast(*this, t, loc); }

}  // namespace baton
