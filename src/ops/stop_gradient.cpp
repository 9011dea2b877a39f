// stop_gradient: Tensor::detach() of a symbolic tensor. Eagerly detach() is a plain
// alias without history; in a graph it must be a node, so that graph autodiff sees
// where gradients stop (the op has no gradient rule).
#include "ops/common.h"

namespace baton::ops {

BATON_OP(stop_gradient_op, "stop_gradient")
    .inputs(1)
    .fusion(Fusion::Injective)
    .view([](const CallContext& c) {
      const Tensor& x = c.input(0);
      return make_view(x, x.shape(), x.strides(), x.offset());
    })
    .onnx("Identity");

}  // namespace baton::ops

namespace baton {

Tensor Tensor::detach() const {
  if (is_symbolic()) return ops::call(ops::stop_gradient_op, {*this}, {}, SourceLoc::current());  // recorded
  return make_view(*this, shape(), strides(), offset());  // eagerly: an alias with no history
}

}  // namespace baton
