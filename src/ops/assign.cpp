// assign: writes a value into a tensor in place and returns the new value. It is how
// graphs update state (Graph::variable, running statistics, Tensor::copy_ inside a
// compiled function); eagerly, Tensor::copy_ does the same without an op.
#include "kernels/cpu/copy.h"
#include "ops/common.h"

namespace baton::ops {

BATON_OP(assign_op, "assign")
    .inputs(2)
    .fusion(Fusion::Opaque)
    .mutates({0})
    .infer([](const InferContext& c) {
      const Tensor& dst = c.input(0);
      const Tensor& src = c.input(1);
      Shape target = broadcast_shapes(src.shape(), dst.shape(), c);
      if (!(target == dst.shape())) c.fail("cannot assign shape ", src.shape(), " to shape ", dst.shape());
      return TensorMeta{dst.dtype(), dst.shape()};
    })
    .cpu([](const KernelContext& c) {
      kernels::copy_into(c.input(0), c.input(1));
      kernels::copy_into(c.output(), c.input(0));
    });

}  // namespace baton::ops
