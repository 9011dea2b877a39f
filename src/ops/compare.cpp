// Comparisons (bool results) and where.
#include <functional>
#include <string>

#include "baton/ops.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/loops.h"
#include "kernels/cpu/vmath.h"
#include "ops/unary.h"

namespace baton::ops {
namespace {

TensorMeta compare_infer(const InferContext& c) {
  require_same_dtype(c);
  return {b8, broadcast_shapes(c.input(0).shape(), c.input(1).shape(), c)};
}

template <class F>
KernelFn compare_kernel(F f) {
  return [f](const KernelContext& c) {
    kernels::visit_dtype(c.input(0).dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      kernels::map_elements<bool, T, T>(
          c.output(), [f](T a, T b) BATON_ELEMENT_FN { return bool(f(a, b)); }, c.input(0),
          c.input(1));
    });
  };
}

}  // namespace

#define BATON_COMPARISON(var, name, functor, onnx_name) \
  BATON_OP(var, name)                                   \
      .inputs(2)                                        \
      .fusion(Fusion::Broadcast)                        \
      .infer(compare_infer)                             \
      .cpu(compare_kernel(functor))                     \
      .onnx(onnx_name)
BATON_COMPARISON(eq_op, "eq", std::equal_to<>{}, "Equal").commutes();
BATON_COMPARISON(ne_op, "ne", std::not_equal_to<>{}, "").commutes();
BATON_COMPARISON(lt_op, "lt", std::less<>{}, "Less");
BATON_COMPARISON(le_op, "le", std::less_equal<>{}, "LessOrEqual");
BATON_COMPARISON(gt_op, "gt", std::greater<>{}, "Greater");
BATON_COMPARISON(ge_op, "ge", std::greater_equal<>{}, "GreaterOrEqual");
#undef BATON_COMPARISON

namespace {

// t broadcast to `shape`, in a tensor of its own (no op is called).
Tensor spread(const Tensor& t, const Shape& shape) {
  Tensor out = empty(shape, t.dtype());
  kernels::copy_into(out, t);
  return out;
}

// where on strings: each element assigned from its broadcast branch.
void where_strings(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  const Shape& shape = out.shape();
  const Tensor p = spread(cond, shape), x = spread(a, shape), y = spread(b, shape);
  const bool* pp = p.data<bool>();
  const std::string *px = x.data<std::string>(), *py = y.data<std::string>();
  std::string* po = out.data<std::string>();
  for (int64_t i = 0; i < out.numel(); ++i) po[i] = pp[i] ? px[i] : py[i];
}

}  // namespace

BATON_OP(where_op, "where")
    .inputs(3)
    .fusion(Fusion::Broadcast)
    .strings()
    .infer([](const InferContext& c) {
      if (c.input(0).dtype() != b8) c.fail<DTypeError>("the condition must be bool");
      if (c.input(1).dtype() != c.input(2).dtype()) c.fail<DTypeError>("both branches must share one dtype");
      Shape s = broadcast_shapes(c.input(0).shape(), c.input(1).shape(), c);
      return TensorMeta{c.input(1).dtype(), broadcast_shapes(s, c.input(2).shape(), c)};
    })
    .cpu([](const KernelContext& c) {
      if (c.output().dtype() == DType::string) return where_strings(c.input(0), c.input(1), c.input(2), c.output());
      kernels::visit_dtype(c.output().dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        kernels::map_elements<T, bool, T, T>(
            c.output(), [](bool p, T a, T b) BATON_ELEMENT_FN { return vm::select(p, a, b); },
            c.input(0), c.input(1), c.input(2));
      });
    })
    .grad([](const GradContext& c) {
      const Tensor& g = c.grad_output();
      Tensor zero = zeros({}, g.dtype());
      return Grads{Tensor{},
                   c.needs_grad(1) ? sum_to_size(where(c.input(0), g, zero), c.input(1)) : Tensor{},
                   c.needs_grad(2) ? sum_to_size(where(c.input(0), zero, g), c.input(2)) : Tensor{}};
    })
    .onnx("Where");

}  // namespace baton::ops

namespace baton {

BATON_DEFINE_BINARY(eq, { return ops::call(ops::eq_op, {a, b}, {}, loc); })
BATON_DEFINE_BINARY(ne, { return ops::call(ops::ne_op, {a, b}, {}, loc); })
BATON_DEFINE_BINARY(lt, { return ops::call(ops::lt_op, {a, b}, {}, loc); })
BATON_DEFINE_BINARY(le, { return ops::call(ops::le_op, {a, b}, {}, loc); })
BATON_DEFINE_BINARY(gt, { return ops::call(ops::gt_op, {a, b}, {}, loc); })
BATON_DEFINE_BINARY(ge, { return ops::call(ops::ge_op, {a, b}, {}, loc); })

Tensor where(const Tensor& cond, const Tensor& a_in, const Tensor& b_in, SourceLoc loc) {
  auto [a, b] = ops::promote(a_in, b_in, loc);
  return ops::call(ops::where_op, {cond, a, b}, {}, loc);
}

}  // namespace baton
