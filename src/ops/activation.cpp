// Activations: relu sigmoid gelu silu softplus leaky_relu elu clamp, and the gradients
// that run as one element-wise op each: relu_backward, sigmoid_backward, tanh_backward,
// gelu_backward, gelu_tanh_backward, silu_backward (the formulas written with ops took
// three to ten passes in eager mode). Their own gradients are written with ops.
#include <cmath>
#include <limits>
#include <numbers>
#include <type_traits>

#include "kernels/cpu/element_fns.h"
#include "ops/unary.h"

namespace baton::ops {
namespace {

Tensor zero_like_scalar(const Tensor& g) { return zeros({}, g.dtype()); }

// A double bound as T; integer types saturate (clamp(x, -inf, 5) on i32 is valid).
template <class T>
T bound(double v) {
  if constexpr (std::is_integral_v<T>) {
    if (v <= double(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
    if (v >= double(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  }
  return T(v);
}

// An activation's gradient op (g, y or x) -> g * f'(...): float, one shape.
TensorMeta gradient_infer(const InferContext& c) {
  require_float(c);
  require_same_dtype(c);
  if (!(c.input(0).shape() == c.input(1).shape()))
    c.fail("the gradient ", c.input(0).shape(), " and the value ", c.input(1).shape(), " must have one shape");
  return same_as_input(c);
}

template <class F>
KernelFn gradient_kernel(F f) {
  return [f](const KernelContext& c) {
    kernels::visit_float(c.output().dtype(), c.op_name().c_str(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      kernels::map_elements<T, T, T>(c.output(), f, c.input(0), c.input(1));
    });
  };
}

Cost gradient_cost(const CallContext&, std::span<const TensorMeta> out, double flops) {
  const double n = double(out[0].shape.numel());
  return Cost{flops * n, 3 * n * double(dtype_size(out[0].dtype))};
}

// phi(x), the standard normal density: gelu's second derivative is g phi(x) (2 - x^2).
Tensor normal_density(const Tensor& x) {
  return exp(x * x * -0.5) * (std::numbers::inv_sqrtpi / std::numbers::sqrt2);
}

// clamp's kernel parameters.
struct ClampBounds {
  double min, max;
};

}  // namespace

BATON_OP(relu_backward_op, "relu_backward")
    .inputs(2)
    .fusion(Fusion::Elementwise)
    .layout_follows_inputs()
    .infer([](const InferContext& c) {
      require_same_dtype(c);
      if (!(c.input(0).shape() == c.input(1).shape()))
        c.fail("the gradient and the output must have one shape");
      return same_as_input(c);
    })
    .cpu([](const KernelContext& c) {
      kernels::visit_numeric(c.output().dtype(), c.op_name().c_str(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        kernels::map_elements<T, T, T>(c.output(), kernels::ew::ReluBackward{}, c.input(0), c.input(1));
      });
    })
    // Linear in g; a step function of out (zero derivative almost everywhere).
    .grad([](const GradContext& c) {
      return Grads{relu_backward(c.grad_output(), c.input(1)), Tensor{}};
    })
    .cost([](const CallContext&, std::span<const TensorMeta> out) {
      double n = double(out[0].shape.numel());
      return Cost{n, 3 * n * double(dtype_size(out[0].dtype))};
    })
    .onnx("");  // exported through its grad-free forward, never on its own

// The gradients below: input 0 is g, input 1 the result y or the input x; h is the
// incoming gradient. Each is linear in g, so d/dg is the op itself applied to h.

// g y (1 - y); d/dy = h g (1 - 2 y).
BATON_OP(sigmoid_backward_op, "sigmoid_backward")
    .inputs(2)
    .fusion(Fusion::Elementwise)
    .layout_follows_inputs()
    .infer(gradient_infer)
    .cpu(gradient_kernel(kernels::ew::SigmoidBackward{}))
    .grad([](const GradContext& c) {
      const Tensor &g = c.input(0), &y = c.input(1), &h = c.grad_output();
      return Grads{sigmoid_backward(h, y, c.loc), h * g * (1.0 - y * 2.0)};
    })
    .cost([](const CallContext& c, std::span<const TensorMeta> out) { return gradient_cost(c, out, 3); })
    .onnx("");  // exported as its formula (export_ops.cpp)

// g (1 - y^2); d/dy = -2 h g y.
BATON_OP(tanh_backward_op, "tanh_backward")
    .inputs(2)
    .fusion(Fusion::Elementwise)
    .layout_follows_inputs()
    .infer(gradient_infer)
    .cpu(gradient_kernel(kernels::ew::TanhBackward{}))
    .grad([](const GradContext& c) {
      const Tensor &g = c.input(0), &y = c.input(1), &h = c.grad_output();
      return Grads{tanh_backward(h, y, c.loc), h * g * y * -2.0};
    })
    .cost([](const CallContext& c, std::span<const TensorMeta> out) { return gradient_cost(c, out, 3); })
    .onnx("");

// g (Phi(x) + x phi(x)); d/dx = h g phi(x) (2 - x^2).
BATON_OP(gelu_backward_op, "gelu_backward")
    .inputs(2)
    .fusion(Fusion::Elementwise)
    .layout_follows_inputs()
    .infer(gradient_infer)
    .cpu(gradient_kernel(kernels::ew::GeluBackward{}))
    .grad([](const GradContext& c) {
      const Tensor &g = c.input(0), &x = c.input(1), &h = c.grad_output();
      return Grads{gelu_backward(h, x, c.loc), h * g * normal_density(x) * (2.0 - x * x)};
    })
    .cost([](const CallContext& c, std::span<const TensorMeta> out) { return gradient_cost(c, out, 30); })
    .onnx("");

// g (0.5 (1 + t) + 0.5 x (1 - t^2) u'), t = tanh(u), u = k (x + c x^3);
// d/dx = h g (1 - t^2) (u' + 0.5 x (u'' - 2 t u'^2)).
BATON_OP(gelu_tanh_backward_op, "gelu_tanh_backward")
    .inputs(2)
    .fusion(Fusion::Elementwise)
    .layout_follows_inputs()
    .infer(gradient_infer)
    .cpu(gradient_kernel(kernels::ew::GeluTanhBackward{}))
    .grad([](const GradContext& c) {
      const Tensor &g = c.input(0), &x = c.input(1), &h = c.grad_output();
      constexpr double k = 0.7978845608028654, cubic = 0.044715;  // sqrt(2 / pi)
      Tensor x2 = x * x;
      Tensor t = tanh(x * (x2 * cubic + 1.0) * k);
      Tensor du = (x2 * (3 * cubic) + 1.0) * k, ddu = x * (6 * cubic * k);
      Tensor second = (1.0 - t * t) * (du + x * (ddu - t * du * du * 2.0) * 0.5);
      return Grads{gelu_tanh_backward(h, x, c.loc), h * g * second};
    })
    .cost([](const CallContext& c, std::span<const TensorMeta> out) { return gradient_cost(c, out, 25); })
    .onnx("");

// g s (1 + x (1 - s)), s = sigmoid(x); d/dx = h g s (1 - s) (2 + x (1 - 2 s)).
BATON_OP(silu_backward_op, "silu_backward")
    .inputs(2)
    .fusion(Fusion::Elementwise)
    .layout_follows_inputs()
    .infer(gradient_infer)
    .cpu(gradient_kernel(kernels::ew::SiluBackward{}))
    .grad([](const GradContext& c) {
      const Tensor &g = c.input(0), &x = c.input(1), &h = c.grad_output();
      Tensor s = sigmoid(x);
      return Grads{silu_backward(h, x, c.loc), h * g * s * (1.0 - s) * (x * (1.0 - s * 2.0) + 2.0)};
    })
    .cost([](const CallContext& c, std::span<const TensorMeta> out) { return gradient_cost(c, out, 16); })
    .onnx("");

BATON_OP(relu_op, "relu")
    .inputs(1)
    .fusion(Fusion::Elementwise)
    .layout_follows_inputs()
    .infer(unary_numeric_infer)
    .cpu(unary_numeric_kernel(kernels::ew::Relu{}))
    .grad([](const GradContext& c) { return Grads{relu_backward(c.grad_output(), c.output())}; })
    .cost(unary_cost)
    .onnx("Relu");

BATON_OP(sigmoid_op, "sigmoid")
    .inputs(1)
    .fusion(Fusion::Elementwise)
    .layout_follows_inputs()
    .infer(unary_float_infer)
    .cpu(unary_float_kernel(kernels::ew::Sigmoid{}))
    .grad([](const GradContext& c) { return Grads{sigmoid_backward(c.grad_output(), c.output(), c.loc)}; })
    .cost(unary_cost_flops(12))
    .onnx("Sigmoid");

// The exact form x * Phi(x) (PyTorch's default approximate="none").
// d/dx = Phi(x) + x * phi(x), phi(x) = exp(-x^2 / 2) / sqrt(2 pi).
BATON_OP(gelu_op, "gelu")
    .inputs(1)
    .fusion(Fusion::Elementwise)
    .layout_follows_inputs()
    .infer(unary_float_infer)
    .cpu(unary_float_kernel(kernels::ew::Gelu{}))
    .grad([](const GradContext& c) { return Grads{gelu_backward(c.grad_output(), c.input(0), c.loc)}; })
    .cost(unary_cost_flops(20))
    .onnx("Gelu");

// The tanh form 0.5 x (1 + tanh(u)), u = sqrt(2 / pi) (x + 0.044715 x^3) (PyTorch's
// approximate="tanh"); d/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) du/dx, t = tanh(u).
BATON_OP(gelu_tanh_op, "gelu_tanh")
    .inputs(1)
    .fusion(Fusion::Elementwise)
    .layout_follows_inputs()
    .infer(unary_float_infer)
    .cpu(unary_float_kernel(kernels::ew::GeluTanh{}))
    .grad([](const GradContext& c) { return Grads{gelu_tanh_backward(c.grad_output(), c.input(0), c.loc)}; })
    .cost(unary_cost_flops(18))
    .onnx("");  // exported as Gelu's formula (export_ops.cpp)

// x * sigmoid(x); d/dx = s * (1 + x * (1 - s)).
BATON_OP(silu_op, "silu")
    .inputs(1)
    .fusion(Fusion::Elementwise)
    .layout_follows_inputs()
    .infer(unary_float_infer)
    .cpu(unary_float_kernel(kernels::ew::Silu{}))
    .grad([](const GradContext& c) { return Grads{silu_backward(c.grad_output(), c.input(0), c.loc)}; })
    .cost(unary_cost_flops(13))
    .onnx("");  // exported as Mul(x, Sigmoid(x))

BATON_OP(softplus_op, "softplus")
    .inputs(1)
    .fusion(Fusion::Elementwise)
    .layout_follows_inputs()
    .infer(unary_float_infer)
    .cpu(unary_float_kernel(kernels::ew::Softplus{}))
    .grad([](const GradContext& c) { return Grads{c.grad_output() * sigmoid(c.input(0))}; })
    .cost(unary_cost_flops(20))
    .onnx("Softplus");

BATON_OP(leaky_relu_op, "leaky_relu")
    .inputs(1)
    .float_attr("negative_slope")
    .fusion(Fusion::Elementwise)
    .layout_follows_inputs()
    .infer(unary_float_infer)
    .params([](const CallContext& c) { return c.attrs.f("negative_slope"); })
    .cpu(unary_float_kernel_with([](const KernelContext& c, auto tag) {
      using T = typename decltype(tag)::type;
      return kernels::ew::LeakyRelu<T>{T(c.params<double>())};
    }))
    .grad([](const GradContext& c) {
      const Tensor& g = c.grad_output();
      return Grads{where(c.input(0) > 0, g, g * c.attrs.f("negative_slope"))};
    })
    .cost(unary_cost)
    .onnx("LeakyRelu");

// x > 0 ? x : alpha * (e^x - 1); d/dx = 1 or out + alpha.
BATON_OP(elu_op, "elu")
    .inputs(1)
    .float_attr("alpha")
    .fusion(Fusion::Elementwise)
    .layout_follows_inputs()
    .infer(unary_float_infer)
    .params([](const CallContext& c) { return c.attrs.f("alpha"); })
    .cpu(unary_float_kernel_with([](const KernelContext& c, auto tag) {
      using T = typename decltype(tag)::type;
      return kernels::ew::Elu<T>{T(c.params<double>())};
    }))
    .grad([](const GradContext& c) {
      const Tensor& g = c.grad_output();
      return Grads{where(c.input(0) > 0, g, g * (c.output() + c.attrs.f("alpha")))};
    })
    .cost(unary_cost_flops(12))
    .onnx("Elu");

// The gradient flows where min <= x <= max (both ends included, as in PyTorch).
// NaN stays NaN: both comparisons are false for it.
BATON_OP(clamp_op, "clamp")
    .inputs(1)
    .float_attr("min")
    .float_attr("max")
    .fusion(Fusion::Elementwise)
    .infer(unary_numeric_infer)
    .params([](const CallContext& c) { return ClampBounds{c.attrs.f("min"), c.attrs.f("max")}; })
    .cpu([](const KernelContext& c) {
      const ClampBounds& b = c.params<ClampBounds>();
      kernels::visit_numeric(c.output().dtype(), c.op_name().c_str(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        kernels::map_elements<T, T>(c.output(), kernels::ew::Clamp<T>{bound<T>(b.min), bound<T>(b.max)}, c.input(0));
      });
    })
    .grad([](const GradContext& c) {
      const Tensor& x = c.input(0);
      const Tensor& g = c.grad_output();
      Tensor zero = zero_like_scalar(g);
      return Grads{where(x < c.attrs.f("min"), zero, where(x > c.attrs.f("max"), zero, g))};
    })
    .cost(unary_cost)
    .onnx("Clip");

Tensor relu_backward(const Tensor& g, const Tensor& out, SourceLoc loc) {
  return call(relu_backward_op, {g, out}, {}, loc);
}
Tensor sigmoid_backward(const Tensor& g, const Tensor& y, SourceLoc loc) {
  return call(sigmoid_backward_op, {g, y}, {}, loc);
}
Tensor tanh_backward(const Tensor& g, const Tensor& y, SourceLoc loc) { return call(tanh_backward_op, {g, y}, {}, loc); }
Tensor gelu_backward(const Tensor& g, const Tensor& x, SourceLoc loc) { return call(gelu_backward_op, {g, x}, {}, loc); }
Tensor gelu_tanh_backward(const Tensor& g, const Tensor& x, SourceLoc loc) {
  return call(gelu_tanh_backward_op, {g, x}, {}, loc);
}
Tensor silu_backward(const Tensor& g, const Tensor& x, SourceLoc loc) { return call(silu_backward_op, {g, x}, {}, loc); }

}  // namespace baton::ops

namespace baton {

using ops::float_input;

Tensor relu(const Tensor& x, SourceLoc loc) { return ops::call(ops::relu_op, {x}, {}, loc); }

#define BATON_FLOAT_UNARY(name)                                          \
  Tensor name(const Tensor& x, SourceLoc loc) {                          \
    return ops::call(ops::name##_op, {float_input(x, loc)}, {}, loc);    \
  }
BATON_FLOAT_UNARY(sigmoid)
BATON_FLOAT_UNARY(gelu)
BATON_FLOAT_UNARY(gelu_tanh)
BATON_FLOAT_UNARY(silu)
BATON_FLOAT_UNARY(softplus)
#undef BATON_FLOAT_UNARY

Tensor leaky_relu(const Tensor& x, double negative_slope, SourceLoc loc) {
  return ops::call(ops::leaky_relu_op, {float_input(x, loc)}, {{"negative_slope", negative_slope}},
                   loc);
}

Tensor elu(const Tensor& x, double alpha, SourceLoc loc) {
  return ops::call(ops::elu_op, {float_input(x, loc)}, {{"alpha", alpha}}, loc);
}

// Integer tensors keep their dtype when both bounds are whole numbers, else become f32.
Tensor clamp(const Tensor& x, double min, double max, SourceLoc loc) {
  bool whole = std::trunc(min) == min && std::trunc(max) == max;
  Tensor in = x.defined() && is_integral(x.dtype()) && !whole ? cast(x, f32, loc) : x;
  return ops::call(ops::clamp_op, {in}, {{"min", min}, {"max", max}}, loc);
}

}  // namespace baton
