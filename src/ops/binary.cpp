// Binary arithmetic with numpy broadcasting: add sub mul div pow maximum minimum.
#include <cmath>
#include <functional>
#include <type_traits>

#include "baton/ops.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/element_fns.h"
#include "kernels/cpu/loops.h"
#include "ops/common.h"

namespace baton::ops {
namespace {

TensorMeta broadcast_infer(const InferContext& c) {
  require_same_dtype(c);
  return {c.input(0).dtype(), broadcast_shapes(c.input(0).shape(), c.input(1).shape(), c)};
}

// Integer +, - and * wrap around on overflow, as in PyTorch and numpy; computed on the
// unsigned type, where wrapping is defined (on the signed one it is undefined behaviour).
template <class T, class F>
T apply(F f, T a, T b) {
  constexpr bool wrapping = std::is_same_v<F, std::plus<>> || std::is_same_v<F, std::minus<>> ||
                            std::is_same_v<F, std::multiplies<>>;
  if constexpr (wrapping && std::is_integral_v<T> && std::is_signed_v<T>) {
    using U = std::make_unsigned_t<T>;
    return T(f(U(a), U(b)));
  } else {
    return T(f(a, b));
  }
}

template <class F>
KernelFn arithmetic_kernel(F f) {
  return [f](const KernelContext& c) {
    kernels::visit_dtype(c.output().dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      kernels::map_elements<T, T, T>(c.output(), [f](T a, T b) { return apply(f, a, b); }, c.input(0),
                                     c.input(1));
    });
  };
}

Cost per_element(const CallContext&, std::span<const TensorMeta> out) {
  double n = double(out[0].shape.numel());
  return {n, 3 * n * double(dtype_size(out[0].dtype))};
}

Tensor unbroadcast(const Tensor& g, const Tensor& like) { return sum_to_size(g, like); }

TensorMeta numeric_broadcast_infer(const InferContext& c) {
  if (c.input(0).dtype() == b8 || c.input(1).dtype() == b8)
    c.fail<DTypeError>("expects numeric tensors, not ", b8);
  return broadcast_infer(c);
}

// Integer power by squaring, wrapping on overflow like PyTorch's integer pow. A negative
// exponent gives the truncated result (1, -1 or 0); PyTorch throws there instead.
template <class T>
T int_pow(T base, T e) {
  if (e < 0) return base == 1 ? T(1) : base == -1 ? T((e & 1) ? -1 : 1) : T(0);
  using U = std::make_unsigned_t<T>;
  U r = 1, b = U(base);
  for (; e; e >>= 1, b *= b)
    if (e & 1) r *= b;
  return T(r);
}

// a ** b. A one-element exponent of 2 or 0.5 (x.pow(2), the common case) skips std::pow,
// which is a scalar libm call.
void pow_kernel(const KernelContext& c) {
  const Tensor &a = c.input(0), &b = c.input(1);
  kernels::visit_numeric(c.output().dtype(), c.op_name().c_str(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T>) {
      if (b.numel() == 1) {
        T e = *static_cast<const T*>(b.raw_data());
        if (e == T(2)) return kernels::map_elements<T, T>(c.output(), [](T x) { return x * x; }, a);
        if (e == T(0.5))
          return kernels::map_elements<T, T>(c.output(), kernels::ew::Sqrt{}, a);
      }
      kernels::map_elements<T, T, T>(c.output(), [](T x, T y) { return T(std::pow(x, y)); }, a, b);
    } else {
      kernels::map_elements<T, T, T>(c.output(), int_pow<T>, a, b);
    }
  });
}

// The gradient of maximum/minimum goes to the selected operand; at ties it is split
// half and half between both, as in PyTorch.
Grads select_grads(const GradContext& c, const Tensor& a_wins, const Tensor& b_wins) {
  const Tensor& g = c.grad_output();
  Tensor zero = zeros({}, g.dtype());
  Tensor half = g * 0.5;
  Tensor tie = c.input(0) == c.input(1);
  auto part = [&](const Tensor& wins, const Tensor& like) {
    return unbroadcast(where(wins, g, where(tie, half, zero)), like);
  };
  return Grads{c.needs_grad(0) ? part(a_wins, c.input(0)) : Tensor{},
               c.needs_grad(1) ? part(b_wins, c.input(1)) : Tensor{}};
}


}  // namespace

BATON_OP(add_op, "add")
    .inputs(2)
    .commutes()
    .fusion(Fusion::Broadcast)
    .infer(broadcast_infer)
    .cpu(arithmetic_kernel(std::plus<>{}))
    .layout_follows_inputs()
    .grad([](const GradContext& c) {
      return Grads{unbroadcast(c.grad_output(), c.input(0)), unbroadcast(c.grad_output(), c.input(1))};
    })
    .cost(per_element)
    .onnx("Add");

BATON_OP(sub_op, "sub")
    .inputs(2)
    .fusion(Fusion::Broadcast)
    .infer(broadcast_infer)
    .cpu(arithmetic_kernel(std::minus<>{}))
    .layout_follows_inputs()
    .grad([](const GradContext& c) {
      return Grads{unbroadcast(c.grad_output(), c.input(0)),
                   c.needs_grad(1) ? unbroadcast(neg(c.grad_output()), c.input(1)) : Tensor{}};
    })
    .cost(per_element)
    .onnx("Sub");

BATON_OP(mul_op, "mul")
    .inputs(2)
    .commutes()
    .fusion(Fusion::Broadcast)
    .infer(broadcast_infer)
    .cpu(arithmetic_kernel(std::multiplies<>{}))
    .layout_follows_inputs()
    .grad([](const GradContext& c) {
      const Tensor& g = c.grad_output();
      return Grads{c.needs_grad(0) ? unbroadcast(g * c.input(1), c.input(0)) : Tensor{},
                   c.needs_grad(1) ? unbroadcast(g * c.input(0), c.input(1)) : Tensor{}};
    })
    .cost(per_element)
    .onnx("Mul");

BATON_OP(div_op, "div")
    .inputs(2)
    .fusion(Fusion::Broadcast)
    .infer([](const InferContext& c) {
      require_float(c);  // true division: integer operands are promoted by div() first
      return broadcast_infer(c);
    })
    .cpu(arithmetic_kernel(std::divides<>{}))
    .layout_follows_inputs()
    .grad([](const GradContext& c) {
      const Tensor& g = c.grad_output();
      const Tensor& b = c.input(1);
      return Grads{c.needs_grad(0) ? unbroadcast(g / b, c.input(0)) : Tensor{},
                   c.needs_grad(1) ? unbroadcast(neg(g * c.output()) / b, b) : Tensor{}};
    })
    .cost(per_element)
    .onnx("Div");

// d/da = b * a^(b-1) (0 where b == 0, so 0^0 has slope 0);
// d/db = a^b * log(a) (0 where a == 0 and b >= 0, where the limit is 0).
BATON_OP(pow_op, "pow")
    .inputs(2)
    .fusion(Fusion::Broadcast)
    .infer(numeric_broadcast_infer)
    .cpu(pow_kernel)
    .grad([](const GradContext& c) {
      const Tensor &g = c.grad_output(), &a = c.input(0), &b = c.input(1);
      Tensor zero = zeros({}, g.dtype());
      Tensor ga, gb;
      if (c.needs_grad(0)) ga = unbroadcast(where(b == 0, zero, g * b * pow(a, b - 1.0)), a);
      if (c.needs_grad(1)) {
        Tensor d = g * c.output() * log(a);
        gb = unbroadcast(where(a == 0, where(b >= 0, zero, d), d), b);
      }
      return Grads{ga, gb};
    })
    .cost(per_element)
    .onnx("Pow");

BATON_OP(maximum_op, "maximum")
    .inputs(2)
    .fusion(Fusion::Broadcast)
    .infer(broadcast_infer)
    .cpu(arithmetic_kernel(kernels::ew::Maximum{}))
    .layout_follows_inputs()
    .grad([](const GradContext& c) {
      return select_grads(c, c.input(0) > c.input(1), c.input(1) > c.input(0));
    })
    .cost(per_element)
    .onnx("Max");

BATON_OP(minimum_op, "minimum")
    .inputs(2)
    .fusion(Fusion::Broadcast)
    .infer(broadcast_infer)
    .cpu(arithmetic_kernel(kernels::ew::Minimum{}))
    .layout_follows_inputs()
    .grad([](const GradContext& c) {
      return select_grads(c, c.input(0) < c.input(1), c.input(1) < c.input(0));
    })
    .cost(per_element)
    .onnx("Min");

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
BATON_DEFINE_BINARY(pow, { return ops::call(ops::pow_op, {a, b}, {}, loc); })
BATON_DEFINE_BINARY(maximum, { return ops::call(ops::maximum_op, {a, b}, {}, loc); })
BATON_DEFINE_BINARY(minimum, { return ops::call(ops::minimum_op, {a, b}, {}, loc); })

void TensorArg::throw_undefined_operand(SourceLoc loc) {
  throw ValueError("operator", "an operand is an undefined Tensor (default-constructed or moved-from)", loc);
}

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
