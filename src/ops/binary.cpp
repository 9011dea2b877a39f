// Binary arithmetic with numpy broadcasting: add sub mul div.
#include <functional>

#include "baton/ops.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/loops.h"
#include "ops/common.h"

namespace baton::ops {
namespace {

TensorMeta broadcast_infer(const InferContext& c) {
  require_same_dtype(c);
  return {c.input(0).dtype(), broadcast_shapes(c.input(0).shape(), c.input(1).shape(), c)};
}

template <class F>
KernelFn arithmetic_kernel(F f) {
  return [f](const KernelContext& c) {
    kernels::visit_dtype(c.output().dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      kernels::map_elements<T, T, T>(c.output(), [f](T a, T b) { return T(f(a, b)); }, c.input(0),
                                     c.input(1));
    });
  };
}

Cost per_element(const CallContext&, std::span<const TensorMeta> out) {
  double n = double(out[0].shape.numel());
  return {n, 3 * n * double(dtype_size(out[0].dtype))};
}

Tensor unbroadcast(const Tensor& g, const Tensor& like) { return sum_to_size(g, like.shape()); }

}  // namespace

BATON_OP(add_op, "add")
    .fusion(Fusion::Broadcast)
    .infer(broadcast_infer)
    .cpu(arithmetic_kernel(std::plus<>{}))
    .grad([](const GradContext& c) {
      return Grads{unbroadcast(c.grad_output(), c.input(0)), unbroadcast(c.grad_output(), c.input(1))};
    })
    .cost(per_element)
    .onnx("Add");

BATON_OP(sub_op, "sub")
    .fusion(Fusion::Broadcast)
    .infer(broadcast_infer)
    .cpu(arithmetic_kernel(std::minus<>{}))
    .grad([](const GradContext& c) {
      return Grads{unbroadcast(c.grad_output(), c.input(0)),
                   c.needs_grad(1) ? unbroadcast(neg(c.grad_output()), c.input(1)) : Tensor{}};
    })
    .cost(per_element)
    .onnx("Sub");

BATON_OP(mul_op, "mul")
    .fusion(Fusion::Broadcast)
    .infer(broadcast_infer)
    .cpu(arithmetic_kernel(std::multiplies<>{}))
    .grad([](const GradContext& c) {
      const Tensor& g = c.grad_output();
      return Grads{c.needs_grad(0) ? unbroadcast(g * c.input(1), c.input(0)) : Tensor{},
                   c.needs_grad(1) ? unbroadcast(g * c.input(0), c.input(1)) : Tensor{}};
    })
    .cost(per_element)
    .onnx("Mul");

BATON_OP(div_op, "div")
    .fusion(Fusion::Broadcast)
    .infer([](const InferContext& c) {
      require_float(c);  // true division: integer operands are promoted by div() first
      return broadcast_infer(c);
    })
    .cpu(arithmetic_kernel(std::divides<>{}))
    .grad([](const GradContext& c) {
      const Tensor& g = c.grad_output();
      const Tensor& b = c.input(1);
      return Grads{c.needs_grad(0) ? unbroadcast(g / b, c.input(0)) : Tensor{},
                   c.needs_grad(1) ? unbroadcast(neg(g * c.output()) / b, b) : Tensor{}};
    })
    .cost(per_element)
    .onnx("Div");

}  // namespace baton::ops

namespace baton {


static Tensor to_float(const Tensor& t, SourceLoc loc) {
  return is_floating(t.dtype()) ? t : cast(t, f32, loc);
}

BATON_DEFINE_BINARY(add, { return ops::call(ops::add_op, {a, b}, {}, loc); })
BATON_DEFINE_BINARY(sub, { return ops::call(ops::sub_op, {a, b}, {}, loc); })
BATON_DEFINE_BINARY(mul, { return ops::call(ops::mul_op, {a, b}, {}, loc); })
BATON_DEFINE_BINARY(div, {
  return ops::call(ops::div_op, {to_float(a, loc), to_float(b, loc)}, {}, loc);
})

Tensor operator-(TensorArg x) { return neg(x.tensor, x.loc); }

#define BATON_DEFINE_OPERATOR(sym, fn)                                                     \
  Tensor operator sym(TensorArg a, const Tensor& b) { return fn(a.tensor, b, a.loc); }     \
  Tensor operator sym(TensorArg a, Scalar b) { return fn(a.tensor, b, a.loc); }           \
  Tensor operator sym(Scalar a, TensorArg b) { return fn(a, b.tensor, b.loc); }
BATON_DEFINE_OPERATOR(+, add)
BATON_DEFINE_OPERATOR(-, sub)
BATON_DEFINE_OPERATOR(*, mul)
BATON_DEFINE_OPERATOR(/, div)
BATON_DEFINE_OPERATOR(<, lt)
BATON_DEFINE_OPERATOR(<=, le)
BATON_DEFINE_OPERATOR(>, gt)
BATON_DEFINE_OPERATOR(>=, ge)
BATON_DEFINE_OPERATOR(==, eq)
BATON_DEFINE_OPERATOR(!=, ne)

}  // namespace baton
